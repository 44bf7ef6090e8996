"""The job table: one record per job, persisted as `$ROOST_HOME/jobs/<id>/job.json`.

The daemon is the only writer of job.json (atomic writes); the CLI, the worker and scripts
only read it. Keys are camelCase in JSON (as in JobRow) and snake_case in Python.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roost import paths
from roost.fsutil import atomic_write_json, utc_now
from roost.states import JobState

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1


def new_job_id(taken: set[str] | frozenset[str] = frozenset()) -> str:
    while True:
        job_id = secrets.token_hex(4)
        if job_id not in taken:
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
    schema: int = SCHEMA_VERSION

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
            value = getattr(self, f.name)
            out[_camel(f.name)] = value.value if isinstance(value, JobState) else value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRecord:
        known = {_camel(f.name): f.name for f in dataclasses.fields(cls)}
        kwargs = {known[key]: value for key, value in data.items() if key in known}
        kwargs["state"] = JobState(kwargs.get("state", JobState.STARTING))
        return cls(**kwargs)

    def save(self) -> None:
        self.updated = utc_now()
        paths.ensure_dir(self.dir)
        atomic_write_json(self.file, self.to_json())


def load_record(path: Path) -> JobRecord:
    with path.open(encoding="utf-8") as handle:
        return JobRecord.from_json(json.load(handle))


def load_all() -> dict[str, JobRecord]:
    """Every readable job record; an unreadable one is logged and left on disk untouched."""
    records: dict[str, JobRecord] = {}
    root = paths.jobs_dir()
    if not root.is_dir():
        return records
    for job_json in sorted(root.glob("*/job.json")):
        try:
            record = load_record(job_json)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.error("skipping unreadable job record %s: %s", job_json, exc)
            continue
        records[record.id] = record
    return records
