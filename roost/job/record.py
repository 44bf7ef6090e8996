"""A job's record, persisted as `$ROOST_HOME/jobs/<id>/job.json`: shared by roostd (its only
writer, with atomic writes; the table of all jobs is `roost.supervise.jobstore`), the worker,
the CLI and scripts, which only read it. Keys are camelCase in JSON (as in JobRow) and snake_case in
Python. job.json is roostd's private record (README: the contract is `roost ls --json` and
`roost show --json`); a file of an older schema is migrated when it is read.

Schema 2 groups what belongs together (`links`, `process`, `limits`, `reports`) and keeps
the attach status as its own field; schema 1 (roost up to 2026-12-01) was flat, with
`attached` a bool and the attach step in the free-text `status`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, TypedDict

from roost.host import paths
from roost.host.fsutil import atomic_write_json, utc_now
from roost.job.states import ATTACHES, Attach, JobKind, JobState

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
BAD_SUFFIX = ".bad"


class BadRecord(ValueError):
    """A job.json that parses but is not a job record (wrong shape or types)."""


_STR, _OPT_STR, _INT, _OPT_INT = (str,), (str, type(None)), (int,), (int, type(None))
_OPT_NUM = (int, float, type(None))
_OPT_DICT = (dict, type(None))
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "id": _STR,
    "name": _STR,
    "kind": _STR,
    "cwd": _STR,
    "state": _STR,
    "status": _STR,
    "summary": _STR,
    "question": _OPT_STR,
    "dialog": (bool,),
    "busy": (bool,),
    "session": _OPT_STR,
    "task": _OPT_STR,
    "command": (list, type(None)),
    "model": _OPT_STR,
    "thinking": _OPT_STR,
    "token": _STR,
    "created": _STR,
    "updated": _STR,
    "error": _OPT_STR,
    "attach": _STR,
    "schema": _INT,
    "options": (list, type(None)),
    "agent": _OPT_STR,
    "agent_def": _OPT_DICT,
    "agent_catalog": _OPT_STR,
    "usage": _OPT_DICT,
    "worktree": _OPT_DICT,
    "queue": _OPT_DICT,
    "after": _OPT_DICT,
    "result": (),
    "output_schema": _OPT_DICT,
    "approvals": _OPT_DICT,
    "sandbox": _OPT_DICT,
    # links
    "parent_session": _OPT_STR,
    "parent_peer": _OPT_STR,
    "root_session": _OPT_STR,
    "depth": _INT,
    "spawned": (bool,),
    # process
    "worker_pid": _OPT_INT,
    "worker_start": _OPT_NUM,
    "worker_ticks": _OPT_INT,
    "worker_boot": _OPT_STR,
    "exit_code": _OPT_INT,
    "crashes": (list,),
    # limits
    "budget": _OPT_NUM,
    "budget_tokens": _OPT_INT,
    "max_turns": _OPT_INT,
    "tree_budget": _OPT_NUM,
    # reports
    "undelivered": _OPT_DICT,
    "last": _OPT_STR,
}


def _has_type(value: Any, expected: tuple[type, ...]) -> bool:
    if not expected:  # any JSON value (a structured result)
        return True
    if isinstance(value, bool) and bool not in expected:
        return False  # JSON true is not a pid
    if not isinstance(value, expected):
        return False
    if isinstance(value, list) and expected == (list, type(None)):  # command, options
        return all(isinstance(part, str) for part in value)
    if isinstance(value, list):  # crashes
        return all(isinstance(t, int | float) and not isinstance(t, bool) for t in value)
    return True


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass
class Links:
    """Where the job sits in a tree of agents."""

    parent_session: str | None = None  # the session of the pi that spawned it
    parent_peer: str | None = None  # that pi's peer id (a job's id, or a foreground pi's)
    root_session: str | None = None  # the tree's root session (None: it is a root)
    depth: int = 0
    spawned: bool = False  # created by roost_spawn (counts toward the spawn limits)


@dataclass
class Process:
    """The job's worker process, as roostd last knew it."""

    worker_pid: int | None = None
    worker_start: float | None = None  # its start time (roost.host.procid): a reused pid is not it
    # Its start in clock ticks since the boot `worker_boot`: unlike worker_start, they do not
    # move when the wall clock is stepped (procid.matches); None in a record of an older roostd.
    worker_ticks: int | None = None
    worker_boot: str | None = None
    exit_code: int | None = None  # a shell job's command's
    crashes: list[float] = field(default_factory=list)  # when it crashed, in the window


@dataclass
class JobLimits:
    """The job's limits (roost.usage.budget); a root's tree_budget is shared by its tree."""

    budget: float | None = None
    budget_tokens: int | None = None
    max_turns: int | None = None
    tree_budget: float | None = None


@dataclass
class Reports:
    """A spawned job's hand-backs to its parent."""

    # One its parent could not take yet (handed over when the parent is back).
    undelivered: dict[str, Any] | None = None
    # The id of the last hand-back roostd took: the worker sends one again when roostd
    # went away before answering, and it must not reach the parent twice.
    last: str | None = None


_GROUPS: dict[str, type] = {"links": Links, "process": Process, "limits": JobLimits, "reports": Reports}
# Schema 1 kept the groups' fields at the top level: its key -> (group, key in the group).
_FLAT_NAMES = {
    **{
        _camel(f.name): (group, _camel(f.name))
        for group, cls in _GROUPS.items()
        if cls is not Reports
        for f in dataclasses.fields(cls)
    },
    "undeliveredReport": ("reports", "undelivered"),
    "lastReport": ("reports", "last"),
}


class Facts(TypedDict, total=False):
    """What a state change may set besides the state (`Daemon.set_state`'s keywords; a
    worker's report carries the first eight)."""

    status: str
    summary: str
    question: str | None
    dialog: bool
    options: list[str] | None
    busy: bool
    usage: dict[str, Any] | None
    error: str | None
    exit_code: int | None


def _migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A job.json of an older schema in today's layout (schema 1: flat, and the attach
    status kept as `attached`, a bool, plus the free-text `status` naming the step)."""
    if data.get("schema", 1) != 1 or any(group in data for group in _GROUPS):
        return data
    data = dict(data)
    for flat, (group, key) in _FLAT_NAMES.items():
        if flat in data:
            data.setdefault(group, {})[key] = data.pop(flat)
    if "attach" not in data and "attached" in data:
        attached = data.pop("attached")
        if attached is True:
            status = data.get("status")
            data["attach"] = next(
                (a.value for a in (Attach.ATTACHING, Attach.HANDING_OFF) if a.value == status),
                Attach.ATTACHED.value,
            )
        elif attached is not False:
            raise BadRecord(f"attached has the wrong type ({type(attached).__name__})")
    data["schema"] = SCHEMA_VERSION
    return data


def _fields_of(cls: type, data: Any, where: str) -> dict[str, Any]:
    """The keyword arguments for `cls` from its JSON object, every value type-checked."""
    if not isinstance(data, dict):
        raise BadRecord(f"{where} must be an object, got {type(data).__name__}")
    known = {
        _camel(f.name): f.name
        for f in dataclasses.fields(cls)
        if not f.metadata.get("transient") and f.name not in _GROUPS
    }
    kwargs = {known[key]: value for key, value in data.items() if key in known}
    for key, value in kwargs.items():
        if not _has_type(value, _FIELD_TYPES[key]):
            name = _camel(key) if cls is JobRecord else f"{where}.{_camel(key)}"
            raise BadRecord(f"{name} has the wrong type ({type(value).__name__})")
    return kwargs


_JSON_PLANS: dict[type, tuple[tuple[str, str, bool], ...]] = {}


def _json_plan(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """For each saved field of `cls`: its name, its JSON key, whether it is a group. Worked
    out once per class: a record is saved on every state change, on the daemon's loop."""
    plan = _JSON_PLANS.get(cls)
    if plan is None:
        plan = _JSON_PLANS[cls] = tuple(
            (f.name, _camel(f.name), f.name in _GROUPS)
            for f in dataclasses.fields(cls)
            if not f.metadata.get("transient")
        )
    return plan


def _json_of(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, key, group in _json_plan(type(obj)):
        value = getattr(obj, name)
        if group:
            value = _json_of(value)
        elif isinstance(value, Enum):
            value = value.value
        out[key] = value
    return out


@dataclass
class JobRecord:
    id: str
    name: str
    kind: JobKind
    cwd: str
    state: JobState = JobState.STARTING
    status: str = ""
    summary: str = ""
    question: str | None = None
    dialog: bool = False  # an extension dialog is open (the question is its prompt)
    options: list[str] | None = None  # the open dialog's choices (select; yes/no: confirm)
    busy: bool = False  # a run is starting or in progress, as the worker last said
    session: str | None = None  # the pi session file
    task: str | None = None
    command: list[str] | None = None  # shell jobs
    model: str | None = None
    thinking: str | None = None
    agent: str | None = None  # the agent definition's name
    # The definition as resolved when the job was created (its tools already narrowed for
    # a spawn): restarts use this, so editing the file later changes new jobs only.
    agent_def: dict[str, Any] | None = None
    # roost_spawn's list of agents for this job's pi, refreshed at every worker start.
    agent_catalog: str | None = None
    # What it waits on (roost.supervise.dependencies): {jobs, names, mode, results, ended,
    # sender}; kept after it starts, so `roost show` says what it waited on.
    after: dict[str, Any] | None = None
    token: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)
    created: str = field(default_factory=utc_now)
    updated: str = field(default_factory=utc_now)
    error: str | None = None
    # Whether a foreground pi holds the session (attach, hand-off): then no worker runs it.
    # Changed only by set_attach; saved as itself (`attach`), not read back from `status`.
    attach: Attach = Attach.DETACHED
    links: Links = field(default_factory=Links)
    process: Process = field(default_factory=Process)
    limits: JobLimits = field(default_factory=JobLimits)
    reports: Reports = field(default_factory=Reports)
    # The job's own usage figures (its session file's sum, as the worker last reported them).
    usage: dict[str, Any] | None = None
    # The job's git worktree (roost.worktrees): {path, branch, base, origin, toplevel, repo}.
    worktree: dict[str, Any] | None = None
    # Its place in the queue (roost.supervise.jobqueue): {group, priority, seq}; seq orders
    # jobs of one priority, first come first; `caps`: a spawn that waits for its tree's caps.
    queue: dict[str, Any] | None = None
    # The last valid structured result (roost run --output-schema), or None.
    result: Any = None
    # The JSON Schema its final answers are checked against (roost.job.results), or None.
    output_schema: dict[str, Any] | None = None
    # Its approval policy (roost.approvals.callrules): mode, allow/ask/deny rules, timeout.
    approvals: dict[str, Any] | None = None
    # Its bash tool's bubblewrap sandbox (roost.sandbox): {network, writable}, or None.
    sandbox: dict[str, Any] | None = None
    schema: int = SCHEMA_VERSION
    # Not saved: a stand-in for an unreadable record (roost.supervise.jobstore.load_all); it is never started.
    recovered: bool = field(default=False, compare=False, metadata={"transient": True})

    @property
    def attached(self) -> bool:
        """A foreground pi holds the session (attaching, attached or handing off)."""
        return self.attach != Attach.DETACHED

    def set_attach(self, target: Attach, why: str = "") -> None:
        """The one setter of the attach status (checked against its table, logged); the
        row's status says it too, until the worker's or roostd's next words."""
        self.attach = ATTACHES.move(self.attach, target, f"job {self.id}", why)
        self.status = target.value

    def apply(self, facts: Facts) -> None:
        """Set what a state change (`Daemon.set_state`) says besides the state."""
        if "status" in facts:
            self.status = facts["status"]
        if "summary" in facts:
            self.summary = facts["summary"]
        if "question" in facts:
            self.question = facts["question"]
        if "dialog" in facts:
            self.dialog = facts["dialog"]
        if "options" in facts:
            self.options = facts["options"]
        if "busy" in facts:
            self.busy = facts["busy"]
        if "usage" in facts:
            self.usage = facts["usage"]
        if "error" in facts:
            self.error = facts["error"]
        if "exit_code" in facts:
            self.process.exit_code = facts["exit_code"]

    @property
    def dir(self) -> Path:
        return paths.job_dir(self.id)

    @property
    def mailbox_dir(self) -> Path:
        return self.dir / "mailbox"

    @property
    def file(self) -> Path:
        return self.dir / "job.json"

    def to_json(self) -> dict[str, Any]:
        return _json_of(self)

    @classmethod
    def from_json(cls, data: Any) -> JobRecord:
        """A record from its JSON (an older schema migrated); BadRecord when it is not one
        (a wrong type anywhere)."""
        if not isinstance(data, dict):
            raise BadRecord(f"expected a JSON object, got {type(data).__name__}")
        data = _migrate(data)
        kwargs = _fields_of(cls, data, "job")
        for key in ("id", "name", "kind", "cwd"):
            if key not in kwargs:
                raise BadRecord(f"missing {key!r}")
        for group, group_cls in _GROUPS.items():
            if group in data:
                kwargs[group] = group_cls(**_fields_of(group_cls, data[group], group))
        try:
            kwargs["kind"] = JobKind(kwargs["kind"])
        except ValueError:
            raise BadRecord(f"kind must be pi or shell, got {kwargs['kind']!r}") from None
        try:
            kwargs["state"] = JobState(kwargs.get("state", JobState.STARTING))
        except ValueError:
            raise BadRecord(f"unknown state {kwargs.get('state')!r}") from None
        try:
            kwargs["attach"] = Attach(kwargs.get("attach", Attach.DETACHED))
        except ValueError:
            raise BadRecord(f"unknown attach {kwargs.get('attach')!r}") from None
        return cls(**kwargs)

    def save(self) -> None:
        self.updated = utc_now()
        if self.recovered:
            return  # its record is job.json.bad: a stand-in is never written over it
        paths.ensure_dir(self.dir)
        atomic_write_json(self.file, self.to_json())


def load_record(path: Path) -> JobRecord:
    with path.open(encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except RecursionError:
            raise BadRecord("nested too deeply") from None
    return JobRecord.from_json(data)
