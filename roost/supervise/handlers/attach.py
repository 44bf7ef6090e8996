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

from roost import jobenv, paths, protocol
from roost.jsonlines import Connection
from roost.protocol import BAD_REQUEST, REFUSED, RequestError
from roost.states import ATTACH_REASON, ENDED_JOB_STATES, Attach, JobKind, JobState
from roost.supervise import table

if TYPE_CHECKING:
    from roost.supervise.daemon import Daemon

log = logging.getLogger(__name__)


def handlers(daemon: Daemon) -> dict[str, Any]:
    async def attach(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        if record.kind != JobKind.PI:
            raise RequestError(REFUSED, f"job {record.id} is a shell job: nothing to attach to")
        if record.attached:
            raise RequestError(REFUSED, f"job {record.id} is already attached to a foreground pi")
        if (held := table.held_by_other(record)) is not None:  # the TUI would be a second writer
            raise RequestError(REFUSED, f"job {record.id}: {held.who()}: quit it first")
        record.set_attach(Attach.ATTACHING, "roost attach")
        daemon.job_changed(record)
        proc = daemon.procs.get(record.id)
        try:
            if proc is not None and proc.alive:
                if proc.connected:
                    assert proc.conn is not None
                    await proc.conn.send(protocol.event("release", reason=ATTACH_REASON))
                    await proc.exited.wait()
                else:
                    await proc.stop(ATTACH_REASON, daemon.settings().stopTimeoutSeconds)
            elif proc is not None:
                await proc.stop(ATTACH_REASON, daemon.settings().stopTimeoutSeconds)  # a backoff
        except asyncio.CancelledError:
            table.detach(daemon, record, "attach cancelled")
            raise
        if record.state == JobState.STARTING:
            daemon.set_state(record, JobState.DONE)
        record.set_attach(Attach.ATTACHED, "its worker let go")
        daemon.job_changed(record)
        return {"id": record.id, "name": record.name, "session": record.session,
                "cwd": record.cwd}

    async def detach(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        return {"id": record.id, "outcome": table.detach(daemon, record, "roost attach ended")}

    async def handoff(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        """A foreground pi gives its session to a job (new, or the session's old one)."""
        from roost.supervise import usage
        from roost.supervise.handlers.jobs import create_job, request_env

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
        env = request_env(request)  # the pi's environment: the job's from now on
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
            usage.apply_budget(daemon, record, {})  # the user's default budgets
            daemon.add_job(record)
        record.task = task or record.task
        record.set_attach(Attach.HANDING_OFF, "/roost-bg")
        if record.state in ENDED_JOB_STATES:
            daemon.set_state(record, JobState.STARTING)
        if task:
            daemon.mailbox(record).post(kind="reply", text=task, sender=None, cause="cli")
        else:
            record.summary = record.summary or "handed off from the foreground"
            if record.state == JobState.STARTING:
                daemon.set_state(record, JobState.DONE)
        if env is not None:
            paths.ensure_dir(record.dir)
            jobenv.save(record.dir, env, "/roost-bg")
        record.save()
        # From now on the session belongs to the job: nothing goes to this pi any more.
        router.foreground.pop(fg.id, None)
        conn.peer_id = None
        router.holders[conn] = record.id
        daemon.job_changed(record)
        return {"id": record.id, "name": record.name}

    return {"attach": attach, "detach": detach, "handoff": handoff}
