"""The job table: one record per job, persisted as `$ROOST_HOME/jobs/<id>/job.json`.

The daemon is the only writer of job.json (atomic writes); the CLI, the worker and scripts
only read it. Keys are camelCase in JSON (as in JobRow) and snake_case in Python.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roost import paths
from roost.fsutil import atomic_write_json, utc_now
from roost.states import JobState

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
    "agent_def": (dict, type(None)), "agent_catalog": _OPT_STR,
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


def new_job_id(taken: set[str] | frozenset[str] = frozenset()) -> str:
    while True:
        job_id = secrets.token_hex(4)
        # A directory (or a planted symlink) of that name is never reused.
        if job_id not in taken and not os.path.lexists(paths.job_dir(job_id)):
            return job_id


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass
class JobRecord:
    id: str
    name: str
    kind: str  # "pi" | "shell"
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
    attached: bool = False  # a foreground pi holds the session (attach, hand-off): no worker
    # The job's git worktree (roost.worktrees): {path, branch, base, origin, toplevel, repo}.
    worktree: dict[str, Any] | None = None
    schema: int = SCHEMA_VERSION
    # Not saved: a stand-in for an unreadable record (load_all); it is never started.
    recovered: bool = field(default=False, compare=False, metadata={"transient": True})

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
            out[_camel(f.name)] = value.value if isinstance(value, JobState) else value
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
        if kwargs["kind"] not in ("pi", "shell"):
            raise BadRecord(f"kind must be pi or shell, got {kwargs['kind']!r}")
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


def load_all() -> tuple[dict[str, JobRecord], list[JobRecord]]:
    """Every job record, and the jobs whose record could not be read.

    One bad job.json must not take down every job (nor roostd): it is moved aside to
    `job.json.bad` with the reason in `job.json.why` (as the mailbox quarantines an
    unreadable item), and the job is listed as `failed` with that reason under a
    stand-in record, so nothing disappears silently; its mailbox stays where it is.
    """
    records: dict[str, JobRecord] = {}
    recovered: list[JobRecord] = []
    root = paths.jobs_dir()
    if not root.is_dir():
        return records, recovered
    for job_dir in sorted(root.iterdir()):
        job_json = job_dir / "job.json"
        job_id = job_dir.name
        if job_dir.is_symlink() or not job_dir.is_dir():
            log.error("ignoring %s: not a job directory roost made", job_dir)
            continue
        if not os.path.lexists(job_json):
            bad = job_dir / f"job.json{BAD_SUFFIX}"
            if bad.is_file() and not bad.is_symlink():  # quarantined by an earlier roostd
                recovered.append(stand_in(job_dir, _salvage(bad), _why(job_dir)))
            continue
        try:
            if job_json.is_symlink():
                raise BadRecord("a symlink, not a file roost wrote")
            record = load_record(job_json)
            if record.id != job_id:
                raise BadRecord(f"its id {record.id!r} is not its directory's name")
        except (OSError, ValueError, TypeError, KeyError) as exc:
            recovered.append(quarantine_record(job_json, f"{type(exc).__name__}: {exc}"))
            continue
        records[record.id] = record
    return records, recovered


def quarantine_record(job_json: Path, reason: str) -> JobRecord:
    """Move an unreadable job.json aside and return the failed stand-in that replaces it."""
    job_id = job_json.parent.name
    bad = job_json.with_name(job_json.name + BAD_SUFFIX)
    why = job_json.with_name(job_json.name + ".why")
    log.error("job %s: unreadable job record %s (%s): moved to %s", job_id, job_json, reason, bad)
    salvaged = _salvage(job_json)
    try:
        os.replace(job_json, bad)
        fd = os.open(why, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"{utc_now()} {reason}\n")
    except OSError as exc:
        log.error("job %s: could not move its record aside: %s", job_id, exc)
    return stand_in(job_json.parent, salvaged, reason)


def _salvage(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _why(job_dir: Path) -> str:
    try:
        return (job_dir / "job.json.why").read_text(encoding="utf-8").strip()[:500]
    except OSError:
        return "unreadable"


def stand_in(job_dir: Path, salvaged: dict[str, Any], reason: str) -> JobRecord:
    """A failed record standing for a job whose job.json is unreadable (never saved,
    never started; `roost rm` removes the job, its mailbox is kept until then)."""
    job_id = job_dir.name

    def text(key: str, default: str | None) -> str | None:
        value = salvaged.get(key)
        return value if isinstance(value, str) else default

    kind = text("kind", "pi")
    record = JobRecord(
        id=job_id, name=text("name", job_id) or job_id, kind=kind if kind in ("pi", "shell") else "pi",
        cwd=text("cwd", "/") or "/", state=JobState.FAILED, session=text("session", None),
        task=text("task", None), parent_session=text("parentSession", None),
        root_session=text("rootSession", None),
        error=f"its job record was unreadable ({reason}); moved to job.json{BAD_SUFFIX}",
    )
    record.recovered = True
    return record
