"""Moving a session between the foreground and the background (attach, hand-off).

One session file never has two writers: a job is `attached` while a foreground pi holds
its session, and no worker is started for it then (items wait in its mailbox). The worker
lets go only at a safe point (no run in progress, nothing in flight). The job returns to
the background when the foreground pi's connection closes (or `roost attach` says so):
items that arrived meanwhile are then delivered by a new worker.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from roost import protocol
from roost.jsonlines import Connection
from roost.protocol import BAD_REQUEST, REFUSED, RequestError
from roost.states import JobState
from roost.supervise.jobs import JobRecord

if TYPE_CHECKING:
    from roost.supervise.daemon import Daemon

log = logging.getLogger(__name__)


def detach_job(daemon: Daemon, record: JobRecord, why: str) -> str:
    """Back to the background; a worker starts at once if anything is waiting."""
    if not record.attached:  # already back (its pi's connection closed first)
        proc = daemon.procs.get(record.id)
        return "started" if proc is not None and proc.alive else "idle"
    record.attached = False
    record.status = ""
    log.info("job %s: back in the background (%s)", record.id, why)
    if record.state == JobState.STARTING or daemon.mailbox(record).pending():
        daemon.start_worker(record, why)
        daemon.job_changed(record)
        return "started"
    daemon.job_changed(record)
    daemon.agents.retry_undelivered(record.session)
    return "idle"


def handlers(daemon: Daemon) -> dict[str, Any]:
    async def attach(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        if record.kind != "pi":
            raise RequestError(REFUSED, f"job {record.id} is a shell job: nothing to attach to")
        if record.attached:
            raise RequestError(REFUSED, f"job {record.id} is already attached to a foreground pi")
        record.attached = True
        record.status = "attaching"
        daemon.job_changed(record)
        proc = daemon.procs.get(record.id)
        try:
            if proc is not None and proc.alive:
                if proc.connected:
                    assert proc.conn is not None
                    await proc.conn.send(protocol.event("release", reason="attach"))
                    await proc.exited.wait()
                else:
                    await proc.stop("attach", daemon.settings().stopTimeoutSeconds)
            elif proc is not None:
                await proc.stop("attach", daemon.settings().stopTimeoutSeconds)  # a backoff
        except asyncio.CancelledError:
            detach_job(daemon, record, "attach cancelled")
            raise
        if record.state == JobState.STARTING:
            daemon.set_state(record, JobState.DONE)
        record.status = "attached"
        daemon.job_changed(record)
        return {"id": record.id, "name": record.name, "session": record.session,
                "cwd": record.cwd}

    async def detach(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        return {"id": record.id, "outcome": detach_job(daemon, record, "roost attach ended")}

    async def handoff(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        """A foreground pi gives its session to a job (new, or the session's old one)."""
        from roost.supervise.ops_jobs import create_job
        from roost.usage import daemon as usage_daemon

        router = daemon.agents
        fg = router.foreground.get(conn.peer_id or "")
        if fg is None or conn.job_id is not None:
            raise RequestError(REFUSED, "only a registered foreground pi can hand off its session")
        if not fg.session:
            raise RequestError(BAD_REQUEST, "a session without a file (--no-session) cannot "
                                            "move to the background")
        task = request.get("task") or None
        if task is not None and not isinstance(task, str):
            raise RequestError(BAD_REQUEST, "task must be a string")
        record = router.job_for_session(fg.session)
        if record is not None and daemon.procs.get(record.id) and daemon.procs[record.id].alive:
            raise RequestError(REFUSED, f"job {record.id} already runs this session")
        if record is None:
            record = create_job(daemon, {
                "task": task or "(handed off from the foreground)",
                "name": request.get("name") or fg.name,
                "cwd": request.get("cwd") if os.path.isdir(str(request.get("cwd"))) else fg.cwd,
                "model": request.get("model"), "thinking": request.get("thinking"),
            })
            record.session = fg.session
            usage_daemon.apply_budget(daemon, record, {})  # the user's default budgets
            daemon.add_job(record)
        record.task = task or record.task
        record.attached = True
        record.status = "handing off"
        if record.state in (JobState.STOPPED, JobState.FAILED, JobState.REAPED):
            daemon.set_state(record, JobState.STARTING)
        if task:
            daemon.mailbox(record).post(kind="reply", text=task, sender=None, cause="cli")
        else:
            record.summary = record.summary or "handed off from the foreground"
            if record.state == JobState.STARTING:
                daemon.set_state(record, JobState.DONE)
        record.save()
        # From now on the session belongs to the job: nothing goes to this pi any more.
        router.foreground.pop(fg.id, None)
        conn.peer_id = None
        router.holders[conn] = record.id
        daemon.job_changed(record)
        return {"id": record.id, "name": record.name}

    return {"attach": attach, "detach": detach, "handoff": handoff}
