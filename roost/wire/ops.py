"""The op tables: every op of roostd (DAEMON_OPS) and of a worker's extension socket
(EXTENSION_OPS), each with its arguments' type from roost.wire.requests, whose required and
`NotRequired` keys are the op's required and optional arguments: the table cannot disagree
with the type. `Op.check` is the one decoding of a request, where its frame arrives
(roost.wire.connection.serve_connection): a required argument absent (or null, or "") is answered
`bad_request` "OP: missing NAME", one of the wrong type "OP: NAME must be WHAT, got WHAT"
(the top level only; what a value means, its handler checks). The handler is then given the
typed value.

The CLI's start-up never imports this module nor roost.wire.requests (typing and the classes cost
some ms): roostd, a worker, `roost mcp` and the tests do; the framing is roost.wire.protocol's.
"""

import types
from collections.abc import Mapping
from typing import Any, Literal, Union, cast, get_args, get_origin, get_type_hints

from roost.wire.protocol import BAD_REQUEST, RequestError
from roost.wire.requests import (
    AnswerRequest,
    ApprovalAnswer,
    ApprovalRequest,
    BudgetRequest,
    EventsRequest,
    ExtHello,
    FollowPartials,
    Gate,
    GcRequest,
    GroupAddRequest,
    GroupRef,
    Handback,
    Handoff,
    JobRef,
    ListRequest,
    MergeRequest,
    MessageRequest,
    NoArgs,
    PartialRequest,
    PeerRegister,
    QueueMoveRequest,
    ReplyRequest,
    ResultRequest,
    RmRequest,
    RunEachRequest,
    RunRequest,
    ScheduleAdd,
    SearchRequest,
    SendRequest,
    ShutdownRequest,
    SpawnRequest,
    StartRequest,
    UsageNote,
    WaitJobsRequest,
    WaitRequest,
    WorkerExiting,
    WorkerHello,
    WorkerUpdate,
)

__all__ = ["DAEMON_OPS", "EXTENSION_OPS", "Op", "run_request"]


# -- checking a request against its type ------------------------------------------------------
def _fits(value: Any, kind: Any) -> bool:
    if kind is Any or kind is object:
        return True
    if kind is None or kind is type(None):
        return value is None
    origin = get_origin(kind)
    if origin is Union or origin is types.UnionType:
        return any(_fits(value, k) for k in get_args(kind))
    if origin is Literal:
        return value in get_args(kind)
    if origin is list:
        (item,) = get_args(kind)
        return isinstance(value, list) and (item is Any or all(_fits(v, item) for v in value))
    if origin is dict:
        _, item = get_args(kind)
        return isinstance(value, dict) and (item is Any or all(_fits(v, item) for v in value.values()))
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:  # as in Python's typing, a whole number is a number too
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, kind)


_WHAT = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}


def _what(kind: Any) -> str:
    """`kind` in words, for an error: "a string", "a list of strings", ..."""
    origin = get_origin(kind)
    if origin is Union or origin is types.UnionType:
        return " or ".join(_what(k) for k in get_args(kind) if k is not type(None))
    if origin is Literal:
        return "one of " + ", ".join(repr(v) for v in get_args(kind))
    if origin is list:
        return "a list" if get_args(kind)[0] is Any else f"a list of {_what(get_args(kind)[0])[2:]}s"
    if origin is dict:
        return "an object"
    return _WHAT.get(kind, getattr(kind, "__name__", str(kind)))


def _json_kind(value: Any) -> str:
    """What a decoded JSON value is, in words (never the value: it may be long, or secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


class Op:
    """A documented operation: its name, who may call it (`caller`: "any", "worker" (a bound
    worker connection), "peer" (a worker or a foreground pi)), its arguments' type `args`,
    from which `required` and `optional` (in the type's order) and `types` come."""

    __slots__ = ("args", "caller", "doc", "name", "optional", "required", "types")

    def __init__(self, name: str, caller: str, args: type = NoArgs, doc: str = "") -> None:
        self.name = name
        self.caller = caller
        self.args = args
        self.doc = doc
        self.types: dict[str, Any] = get_type_hints(args)
        keys: frozenset[str] = args.__required_keys__  # type: ignore[attr-defined]
        self.required = tuple(k for k in self.types if k in keys)
        self.optional = tuple(k for k in self.types if k not in keys)

    def __repr__(self) -> str:
        return f"Op({self.name!r}, {self.caller!r}, {self.args.__name__})"

    def check(self, request: Mapping[str, Any]) -> str | None:
        """Why `request` is not this op's (a missing or wrong-typed argument, by name), or
        None. Keys the op does not declare are left alone (an older client's)."""
        missing = [k for k in self.required if request.get(k) in (None, "")]
        if missing:
            return f"missing {', '.join(missing)}"
        for key, kind in self.types.items():
            value = request.get(key)
            if value is not None and not _fits(value, kind):
                return f"{key} must be {_what(kind)}, got {_json_kind(value)}"
        return None


# The daemon's operations (a client, a worker or an extension -> roostd). roostd checks when
# it builds its dispatch table that each name has exactly one handler.
DAEMON_OPS: dict[str, Op] = {
    op.name: op
    for op in (
        Op("status", "any", NoArgs, "daemon health: pid, version, job count"),
        Op(
            "shutdown",
            "any",
            ShutdownRequest,
            "stop the daemon (workers keep running; `jobs`: stop them too)",
        ),
        Op(
            "run",
            "any",
            RunRequest,
            "start a pi job (`task`), or a shell job (`shell`, `command`); "
            "`env`: the caller's environment, which the job runs with; "
            "`runner`: local or ray, where its worker runs (default: roost.json's)",
        ),
        Op(
            "run_each",
            "any",
            RunEachRequest,
            "start many pi jobs in one request: `tasks`, a list "
            "of task strings or objects (`task`, `name`, `group`, "
            "`priority`); the other arguments apply to each",
        ),
        Op("queue", "any", NoArgs, "the queued jobs in order, the limits and the groups"),
        Op("queue_move", "any", QueueMoveRequest, "a queued job's new `priority`, or `first`"),
        Op("group_add", "any", GroupAddRequest, "add or change a named group's limit"),
        Op("group_ls", "any", NoArgs, "the named groups: limit, running, queued"),
        Op("group_rm", "any", GroupRef, "remove a named group (its jobs: maxRunning only)"),
        Op(
            "list",
            "any",
            ListRequest,
            "all job rows (`jobs`); `tree`: parents first, each with its "
            "`depth` (roost.job.tree); `text`: the rows as one string, as "
            "`roost ls --json` prints them",
        ),
        Op("show", "any", JobRef, "one job row with details"),
        Op(
            "reply",
            "any",
            ReplyRequest,
            "a user reply (`text`) into the job's mailbox (`cause`: "
            "reply or cli); a person's (`by`: who) while the job "
            "waits on a question or dialog answers it (`choice` N "
            "of a dialog), written down in the inbox; `question`: "
            "the text of the question answered (already answered: "
            "nothing is sent); `plain`: answers nothing, refused while "
            "the job waits on a dialog (roost mcp)",
        ),
        Op("wait", "any", WaitRequest, "resolve when the job's current run has settled"),
        Op("stop", "any", JobRef, "stop a job; never woken by messages"),
        Op("abort", "any", JobRef, "end the job's run, keep the job (pi `abort`; roost acp)"),
        Op(
            "start",
            "any",
            StartRequest,
            "start a stopped/ended job again (`env`: replaces the job's environment)",
        ),
        Op("rm", "any", RmRequest, "stop and remove a job (and its worktree: `force`, `deleteBranch`)"),
        Op("merge", "any", MergeRequest, "merge a job's worktree branch (`into`, `squash`)"),
        Op("gc", "any", GcRequest, "remove the worktrees of removed jobs; prune git's records"),
        Op(
            "inbox",
            "any",
            NoArgs,
            "what waits for a person: open questions and dialogs, budget "
            "stops, given-up workers, failures; each with a stable id",
        ),
        Op(
            "answer",
            "any",
            AnswerRequest,
            "answer an inbox entry (`text`, or `choice` N for a dialog; `dismiss`); `by`: who answers",
        ),
        Op("subscribe", "any", NoArgs, "the rows (`jobs`), then a `job` event whenever one changes"),
        Op(
            "events",
            "any",
            EventsRequest,
            "push the event log's entries after `since` (filtered by "
            "`types`, `job`) as `log` events, then each new one",
        ),
        Op(
            "wait_jobs",
            "any",
            WaitJobsRequest,
            "resolve when any (or all: `mode`) of `jobs` reach `until`: needs_input|settled|done|failed",
        ),
        Op("attach", "any", JobRef, "the worker lets go of the session (at a safe point)"),
        Op("detach", "any", JobRef, "the attached foreground pi quit: back to the background"),
        Op("worker_hello", "any", WorkerHello, "bind this connection to a worker"),
        Op("worker_update", "worker", WorkerUpdate, "the worker's view of its job: state, status, ..."),
        Op(
            "turn",
            "worker",
            NoArgs,
            "an idle worker with new work asks for a slot (`go`: run "
            "now; else the job is queued and a `turn` push follows)",
        ),
        Op("worker_exiting", "worker", WorkerExiting, "the worker is about to exit on purpose"),
        Op("usage_note", "worker", UsageNote, "a budget warning or stop for the job's parent"),
        Op("budget", "any", BudgetRequest, "set a job's budget (or a root's tree budget: `tree`)"),
        Op("peer_register", "any", PeerRegister, "bind this connection to a fg peer"),
        Op("peers", "peer", NoArgs, "peers the caller may reach"),
        Op("send", "peer", SendRequest, "an agent message to a peer"),
        Op(
            "message",
            "any",
            MessageRequest,
            "a message from an agent outside roost (`from` names it: roost mcp's client) to a "
            "job by its exact id, framed as an external agent's (agentExternalMessages)",
        ),
        Op(
            "spawn",
            "peer",
            SpawnRequest,
            "a background child session (with its parent job's "
            "environment; a foreground pi sends its own as `env`; "
            "`queue`: past the tree caps, queued, not refused)",
        ),
        Op(
            "handback",
            "worker",
            Handback,
            "a report for the job's parent (`structured`: `result` is the job's checked JSON result)",
        ),
        Op(
            "result",
            "worker",
            ResultRequest,
            "the job's answer is valid against its output schema: `value`, kept as its result (job.result)",
        ),
        Op(
            "schedule_add",
            "any",
            ScheduleAdd,
            "add a schedule: one of `cron`, `every`, `at`, `onChange` (paths); `run`: the run "
            "request each firing sends (docs: Schedules)",
        ),
        Op("schedule_ls", "any", NoArgs, "every schedule's row: next firing, last result"),
        Op("schedule_show", "any", GroupRef, "one schedule's row with its run"),
        Op("schedule_rm", "any", GroupRef, "remove a schedule (its jobs stay)"),
        Op("schedule_pause", "any", GroupRef, "pause a schedule"),
        Op("schedule_resume", "any", GroupRef, "resume a paused schedule (from now on)"),
        Op("schedule_run_now", "any", GroupRef, "fire a schedule now (cause run-now)"),
        Op(
            "partial",
            "worker",
            PartialRequest,
            "the assistant message pi is streaming now and the tools "
            "running (`partial`; null: none), coalesced; kept in "
            "memory only and pushed to `follow_partials` clients",
        ),
        Op(
            "follow_partials",
            "any",
            FollowPartials,
            "the jobs' streamed partials now (`partials`, by job "
            "id), then a `partial` event at each change (`job`: "
            "that job's only)",
        ),
        Op(
            "search",
            "any",
            SearchRequest,
            "full-text search of every job's conversation "
            '(`query`: FTS5 words, "phrases", `retr*`, AND, OR, '
            "NOT): `results`, best first (docs: Search)",
        ),
        Op(
            "search_reindex",
            "any",
            NoArgs,
            "rebuild the search index from the session files (removed jobs' entries are kept)",
        ),
        Op("approval_request", "worker", ApprovalRequest, "a call needs a person"),
        Op("approval_answer", "any", ApprovalAnswer, "a person's answer"),
        Op(
            "handoff",
            "peer",
            Handoff,
            "a foreground pi moves its session into a background job "
            "(`env`: the pi's environment, the job's from now on)",
        ),
    )
}

# The worker's extension socket operations (extension -> worker). The `peer` ones are
# roostd's: the worker forwards them as they are, on its own connection, as the job.
EXTENSION_OPS: dict[str, Op] = {
    # Checked by SO_PEERCRED: the caller must be the worker's own pi (no token).
    "ext_hello": Op("ext_hello", "any", ExtHello, "bind the extension of this worker's pi"),
    **{name: DAEMON_OPS[name] for name in ("peers", "send", "spawn")},
    "gate": Op("gate", "any", Gate, "may this tool call run? (`block`, `reason`)"),
}


def run_request(value: dict[str, Any], what: str = "") -> RunRequest:
    """`value`, a `run` request inside another request (a schedule's `run`, one of
    `run_each`'s tasks with the shared arguments), checked as `run`'s own are where its
    frame arrives; RequestError (bad_request) says what is wrong (after `what`: "run: ")."""
    wrong = DAEMON_OPS["run"].check(value)
    if wrong:
        raise RequestError(BAD_REQUEST, f"{what}: {wrong}" if what else wrong)
    return cast(RunRequest, value)
