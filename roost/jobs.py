"""A job's record, persisted as `$ROOST_HOME/jobs/<id>/job.json`: shared by roostd (its only
writer, with atomic writes; the table of all jobs is `roost.supervise.jobstore`), the worker,
the CLI and scripts, which only read it. Keys are camelCase in JSON (as in JobRow) and snake_case in Python.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from roost import paths
from roost.fsutil import atomic_write_json, utc_now
from roost.states import ATTACHES, Attach, JobKind, JobState

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
BAD_SUFFIX = ".bad"


class BadRecord(ValueError):
    """A job.json that parses but is not a job record (wrong shape or types)."""


_STR, _OPT_STR, _INT, _OPT_INT = (str,), (str, type(None)), (int,), (int, type(None))
_OPT_NUM = (int, float, type(None))
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "id": _STR, "name": _STR, "kind": _STR, "cwd": _STR, "state": _STR, "status": _STR,
    "summary": _STR, "question": _OPT_STR, "dialog": (bool,), "busy": (bool,),
    "session": _OPT_STR, "task": _OPT_STR, "command": (list, type(None)), "model": _OPT_STR,
    "thinking": _OPT_STR, "token": _STR, "parent_session": _OPT_STR, "parent_peer": _OPT_STR,
    "root_session": _OPT_STR, "depth": _INT, "spawned": (bool,), "created": _STR,
    "updated": _STR, "worker_pid": _OPT_INT, "worker_start": _OPT_NUM, "exit_code": _OPT_INT,
    "error": _OPT_STR, "crashes": (list,), "undelivered_report": (dict, type(None)),
    "attached": (bool,), "schema": _INT, "options": (list, type(None)), "agent": _OPT_STR,
    "agent_def": (dict, type(None)), "agent_catalog": _OPT_STR, "last_report": _OPT_STR,
    # Usage (roost.usage): figures as the worker last reported them, and the limits.
    "usage": (dict, type(None)), "budget": _OPT_NUM, "budget_tokens": _OPT_INT,
    "max_turns": _OPT_INT, "tree_budget": _OPT_NUM,
    "worktree": (dict, type(None)),
}


def _has_type(value: Any, expected: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in expected:
        return False  # JSON true is not a pid
    if not isinstance(value, expected):
        return False
    if isinstance(value, list) and expected == (list, type(None)):  # command
        return all(isinstance(part, str) for part in value)
    if isinstance(value, list):  # crashes
        return all(isinstance(t, int | float) and not isinstance(t, bool) for t in value)
    return True


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


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
    token: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)
    parent_session: str | None = None
    parent_peer: str | None = None
    root_session: str | None = None
    depth: int = 0
    spawned: bool = False  # created by roost_spawn (counts toward the spawn limits)
    created: str = field(default_factory=utc_now)
    updated: str = field(default_factory=utc_now)
    worker_pid: int | None = None
    worker_start: float | None = None
    exit_code: int | None = None
    error: str | None = None
    crashes: list[float] = field(default_factory=list)
    undelivered_report: dict[str, Any] | None = None
    # The id of the last hand-back roostd took: the worker sends one again when roostd
    # went away before answering, and it must not reach the parent twice.
    last_report: str | None = None
    attached: bool = False  # a foreground pi holds the session (attach, hand-off): no worker
    # Usage and budgets (roost.usage): the job's own figures (its session file's sum, as the
    # worker last reported them) and its limits; a root's tree_budget is shared by its tree.
    usage: dict[str, Any] | None = None
    budget: float | None = None
    budget_tokens: int | None = None
    max_turns: int | None = None
    tree_budget: float | None = None
    # The job's git worktree (roost.worktrees): {path, branch, base, origin, toplevel, repo}.
    worktree: dict[str, Any] | None = None
    schema: int = SCHEMA_VERSION
    # Not saved: a stand-in for an unreadable record (roost.supervise.jobstore.load_all); it is never started.
    recovered: bool = field(default=False, compare=False, metadata={"transient": True})

    @property
    def attach(self) -> Attach:
        """Where the session is held (`attached` and `status` are how job.json keeps it)."""
        if not self.attached:
            return Attach.DETACHED
        # While it lets go, its worker's last words may overwrite the status.
        return next((a for a in (Attach.ATTACHING, Attach.HANDING_OFF) if a.value == self.status),
                    Attach.ATTACHED)

    def set_attach(self, target: Attach, why: str = "") -> None:
        """The one setter of the attach status (checked against its table, logged)."""
        ATTACHES.move(self.attach, target, f"job {self.id}", why)
        self.attached = target != Attach.DETACHED
        self.status = target.value

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
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.metadata.get("transient"):
                continue
            value = getattr(self, f.name)
            out[_camel(f.name)] = value.value if isinstance(value, Enum) else value
        return out

    @classmethod
    def from_json(cls, data: Any) -> JobRecord:
        """A record from its JSON; BadRecord when it is not one (a wrong type anywhere)."""
        if not isinstance(data, dict):
            raise BadRecord(f"expected a JSON object, got {type(data).__name__}")
        known = {_camel(f.name): f.name for f in dataclasses.fields(cls)
                 if not f.metadata.get("transient")}
        kwargs = {known[key]: value for key, value in data.items() if key in known}
        for key in ("id", "name", "kind", "cwd"):
            if key not in kwargs:
                raise BadRecord(f"missing {key!r}")
        for key, value in kwargs.items():
            expected = _FIELD_TYPES[key]
            if not _has_type(value, expected):
                raise BadRecord(f"{_camel(key)} has the wrong type ({type(value).__name__})")
        try:
            kwargs["kind"] = JobKind(kwargs["kind"])
        except ValueError:
            raise BadRecord(f"kind must be pi or shell, got {kwargs['kind']!r}") from None
        try:
            kwargs["state"] = JobState(kwargs.get("state", JobState.STARTING))
        except ValueError:
            raise BadRecord(f"unknown state {kwargs.get('state')!r}") from None
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
