"""The MCP tools' structured outputs as pydantic models: their JSON Schemas are the tools'
`outputSchema`, and the SDK checks each result against its model before it is sent."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A job row's fields a tool shows (the JobRow contract, docs: JSON output), plus `cost`.
BRIEF_KEYS = (
    "id",
    "name",
    "kind",
    "state",
    "status",
    "summary",
    "question",
    "dialog",
    "options",
    "cwd",
    "agent",
    "parent",
    "created",
    "updated",
)


class Job(BaseModel):
    """One job as list_jobs and wait_for_jobs show it."""

    id: str
    name: str
    kind: str = Field(description="pi or shell")
    state: str = Field(
        description="starting, queued, waiting, running, done, needs_input, failed, stopped or reaped (idle)"
    )
    status: str | None = None
    summary: str | None = None
    question: str | None = Field(None, description="what the job asks (needs_input)")
    dialog: bool = Field(False, description="the question is a dialog: a person answers it")
    options: list[str] | None = None
    cwd: str
    agent: str | None = None
    parent: str | None = None
    created: str | None = None
    updated: str | None = None
    cost: float | None = Field(None, description="what its model calls cost so far")
    hasResult: bool = Field(False, description="it has a structured result (job_result)")


class JobList(BaseModel):
    jobs: list[Job]
    total: int = Field(description="jobs matching the filters (the list may be cut to limit)")


class JobDetail(Job):
    """show_job: the row, the task, the error, the usage, and the transcript's end."""

    task: str | None = None
    model: str | None = None
    error: str | None = None
    usage: dict[str, Any] | None = None
    result: Any = None
    outputSchema: dict[str, Any] | None = None
    transcript: str = Field("", description="the last `entries` entries of its session, as text")


class Started(BaseModel):
    id: str
    name: str
    state: str
    position: int | None = Field(None, description="its place in the queue, when queued")
    cursor: int = Field(
        description="the event log's position before it started: "
        "wait_for_jobs from here misses none of its events"
    )


class Delivery(BaseModel):
    id: str
    status: str = Field(description="delivered, queued, started, stopped, ...")


class Events(BaseModel):
    events: list[dict[str, Any]] = Field(
        description="event-log entries after the cursor (seq, time, type, job, ...)"
    )
    cursor: int = Field(description="pass it to the next call: nothing is missed or repeated")
    reached: bool = Field(description="the jobs reached `until` (always false for `event`)")
    timedOut: bool
    jobs: list[Job] = Field(description="the jobs waited on, as they are now")


class Result(BaseModel):
    id: str
    state: str
    result: Any = Field(description="its last final answer valid against its output schema")


class Stopped(BaseModel):
    id: str
    was: str
    state: str


class InboxEntry(BaseModel):
    """An inbox entry as roostd gives it (a kind's own fields kept: an approval's, ...)."""

    model_config = ConfigDict(extra="allow")

    id: str
    job: dict[str, Any]
    kind: str = Field(description="question, dialog, budget, gave_up, failed, conflict, ...")
    text: str | None = None
    options: list[str] | None = None
    since: str | None = None


class Inbox(BaseModel):
    entries: list[InboxEntry]


class Found(BaseModel):
    results: list[dict[str, Any]]
