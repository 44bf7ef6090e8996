"""Every op's arguments as a type (a TypedDict: `NotRequired` keys are optional), and
`JobRow`, a job's row as roostd answers it. roost.wire.ops derives the op tables from them.

An optional argument may be null, which means the same as leaving it out (the CLI sends its
unset options as null): read it with `.get`, which types it `X | None`. A handler is given
its request as its op's type, checked where the frame arrived (roost.wire.ops, `Op.check`);
services below the handlers read it as a `Mapping[str, Any]`.

No `from __future__ import annotations` here: `NotRequired` must be seen when each class is
made, for its `__required_keys__`.
"""

from typing import Any, Literal, NotRequired, TypedDict


# -- what a new pi job may be given (`run`, and a tool's `spawn`): roostd fills in the rest --
class JobArgs(TypedDict):
    cwd: NotRequired[str]
    name: NotRequired[str]
    model: NotRequired[str]
    thinking: NotRequired[str]
    agent: NotRequired[str]
    defaultModel: NotRequired[str]
    defaultThinking: NotRequired[str]
    env: NotRequired[dict[str, Any]]  # roost.job.env.checked says which name or value is bad
    budget: NotRequired[float]
    budgetTokens: NotRequired[int]
    maxTurns: NotRequired[int]
    worktree: NotRequired[bool]
    branch: NotRequired[str]
    base: NotRequired[str]
    after: NotRequired[str | list[str]]
    afterMode: NotRequired[str]
    withResults: NotRequired[bool]
    output_schema: NotRequired[dict[str, Any] | str]  # an object, or its JSON text
    sandbox: NotRequired[bool]
    sandboxNetwork: NotRequired[str]
    approvals: NotRequired[str]
    allow: NotRequired[list[str]]
    ask: NotRequired[list[str]]
    deny: NotRequired[list[str]]
    approvalTimeout: NotRequired[float]


class NoArgs(TypedDict):
    pass


class JobRef(TypedDict):
    job: str


class ShutdownRequest(TypedDict):
    jobs: NotRequired[bool]


class NewJob(JobArgs):
    """What roost.supervise.jobs.create_job makes a job of: a run's, a spawn's (task
    given), a schedule's run, a hand-off's."""

    task: NotRequired[str]
    shell: NotRequired[bool]
    command: NotRequired[list[str]]


RunnerKind = Literal["local", "ray"]
"""Where a pi job's worker runs (roost.supervise.placement)."""


class RunRequest(NewJob):
    treeBudget: NotRequired[float]
    group: NotRequired[str]
    priority: NotRequired[int]
    runner: NotRequired[RunnerKind]


class RunEachRequest(JobArgs):
    tasks: list[str | dict[str, Any]]
    group: NotRequired[str]
    priority: NotRequired[int]
    treeBudget: NotRequired[float]


class QueueMoveRequest(TypedDict):
    job: str
    priority: NotRequired[int]
    first: NotRequired[bool]


class GroupAddRequest(TypedDict):
    name: str
    parallel: int


class GroupRef(TypedDict):
    name: str


class ListRequest(TypedDict):
    tree: NotRequired[bool]
    text: NotRequired[bool]


class ReplyRequest(TypedDict):
    job: str
    text: NotRequired[str]
    cause: NotRequired[str]
    by: NotRequired[str]
    question: NotRequired[str]
    choice: NotRequired[int]
    plain: NotRequired[bool]


class WaitRequest(TypedDict):
    job: str
    timeout: NotRequired[float]


class StartRequest(TypedDict):
    job: str
    env: NotRequired[dict[str, Any]]


class RmRequest(TypedDict):
    job: str
    force: NotRequired[bool]
    deleteBranch: NotRequired[bool]


class MergeRequest(TypedDict):
    job: str
    into: NotRequired[str]
    squash: NotRequired[bool]


class GcRequest(TypedDict):
    force: NotRequired[bool]


class AnswerRequest(TypedDict):
    entry: str
    text: NotRequired[str]
    choice: NotRequired[int]
    dismiss: NotRequired[bool]
    by: NotRequired[str]


class EventsRequest(TypedDict):
    since: NotRequired[int]
    types: NotRequired[list[str]]
    job: NotRequired[str]


class WaitJobsRequest(TypedDict):
    jobs: list[str]
    until: str
    mode: NotRequired[str]
    timeout: NotRequired[float]


class WorkerHello(TypedDict):
    job: str
    token: str
    pid: int


class WorkerUpdate(TypedDict):
    """The worker's view of its job (roost.job.record.Facts: a null clears its field)."""

    state: NotRequired[str]
    status: NotRequired[str]
    summary: NotRequired[str]
    question: NotRequired[str | None]
    dialog: NotRequired[bool]
    options: NotRequired[list[str] | None]
    busy: NotRequired[bool]
    usage: NotRequired[dict[str, Any] | None]
    error: NotRequired[str | None]


class WorkerExiting(TypedDict):
    reason: str
    fatal: NotRequired[bool]


class UsageNote(TypedDict):
    kind: str
    text: NotRequired[str]


class BudgetRequest(TypedDict):
    job: str
    budget: NotRequired[float]
    budgetTokens: NotRequired[int]
    maxTurns: NotRequired[int]
    tree: NotRequired[bool]


class PeerRegister(TypedDict):
    pid: int
    session: NotRequired[str]  # null: a --no-session pi (the handler checks it)
    peer: NotRequired[str]
    name: NotRequired[str]
    cwd: NotRequired[str]


class SendRequest(TypedDict):
    to: str
    message: str


# `from` is a keyword: the functional form.
MessageRequest = TypedDict("MessageRequest", {"job": str, "message": str, "from": str})


class SpawnRequest(JobArgs):
    task: str
    queue: NotRequired[bool]


class Handback(TypedDict):
    state: str
    report: NotRequired[str]
    result: NotRequired[str]
    question: NotRequired[str]
    error: NotRequired[str]
    structured: NotRequired[bool]


class ResultRequest(TypedDict):
    value: NotRequired[Any]


class ScheduleAdd(TypedDict):
    name: str
    run: dict[str, Any]  # a RunRequest's schedulable keys (handlers/schedules.py: RUN_KEYS)
    cron: NotRequired[str]
    every: NotRequired[str]
    at: NotRequired[str]
    onChange: NotRequired[list[str]]
    debounce: NotRequired[str]
    tz: NotRequired[str]
    session: NotRequired[str]
    catchUp: NotRequired[str]
    overlap: NotRequired[str]
    env: NotRequired[dict[str, Any]]


class PartialRequest(TypedDict):
    partial: NotRequired[dict[str, Any] | None]


class FollowPartials(TypedDict):
    job: NotRequired[str]


class SearchRequest(TypedDict):
    query: str
    job: NotRequired[str]
    tree: NotRequired[str]
    kinds: NotRequired[list[str]]
    since: NotRequired[str]
    cwd: NotRequired[str]
    all: NotRequired[bool]
    limit: NotRequired[int]


class ApprovalRequest(TypedDict):
    call: str
    tool: str
    input: NotRequired[Any]
    worker: NotRequired[Any]


class ApprovalAnswer(TypedDict):
    entry: str
    decision: str
    always: NotRequired[bool]
    reason: NotRequired[str]
    by: NotRequired[str]


class Handoff(TypedDict):
    task: NotRequired[str]
    env: NotRequired[dict[str, Any]]
    cwd: NotRequired[str]
    name: NotRequired[str]
    model: NotRequired[str]
    thinking: NotRequired[str]


class ExtHello(TypedDict):
    pid: int


class Gate(TypedDict):
    call: str
    tool: str
    input: NotRequired[Any]


class JobRow(TypedDict):
    """A job's row as roostd answers `list` and `show` and pushes it (`job` events); docs:
    reference/json.md says what each key means. `show` adds detail keys, `list --tree`
    adds `depth`."""

    id: str
    name: str
    kind: str
    state: str
    status: str
    summary: str
    question: str | None
    dialog: bool
    options: list[str] | None
    cwd: str
    session: str | None
    parent: str | None
    parentSession: str | None
    rootSession: str | None
    pending: dict[str, int]
    created: str
    updated: str
    agent: str | None
    usage: dict[str, Any]
    queue: dict[str, Any]
    after: dict[str, Any] | None
    schedule: dict[str, Any] | None
    result: Any
    worktree: dict[str, Any] | None
    sandbox: dict[str, Any] | None
