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
from typing import Any

from roost.host import paths, procid
from roost.job import env as jobenv
from roost.job.states import ATTACH_REASON, ENDED_JOB_STATES, Attach, ItemKind, JobKind, JobState, RunCause
from roost.supervise import budget, jobstore
from roost.supervise.core import Core, bind
from roost.supervise.jobs import create_job, request_env
from roost.wire import protocol
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError
from roost.wire.requests import Handoff, JobRef, NewJob

log = logging.getLogger(__name__)


async def attach(core: Core, conn: Connection, request: JobRef) -> dict[str, Any]:
    record = core.find_job(request["job"])
    if record.kind != JobKind.PI:
        raise RequestError(REFUSED, f"job {record.id} is a shell job: nothing to attach to")
    if record.attached:
        raise RequestError(REFUSED, f"job {record.id} is already attached to a foreground pi")
    if record.state == JobState.WAITING:  # no session yet: its task is given when it starts
        raise RequestError(REFUSED, f"job {record.id} is {record.status}: nothing to attach to yet")
    if (held := jobstore.held_by_other(record)) is not None:  # the TUI would be a second writer
        raise RequestError(REFUSED, f"job {record.id}: {held.who()}: quit it first")
    record.set_attach(Attach.ATTACHING, "roost attach")
    start, ticks, boot = procid.identity(conn.peer.pid) if conn.peer is not None else (None, None, None)
    if conn.peer is not None and start is not None:  # whose pi may register for it
        core.agents.attach_callers[record.id] = (conn.peer.pid, start, ticks, boot)
    core.job_changed(record)
    proc = core.procs.get(record.id)
    try:
        if proc is not None and proc.alive:
            if proc.connected:
                assert proc.conn is not None
                await proc.conn.send(protocol.event("release", reason=ATTACH_REASON))
                await proc.exited.wait()
            else:
                await proc.stop(ATTACH_REASON, core.settings().stopTimeoutSeconds)
        elif proc is not None:
            await proc.stop(ATTACH_REASON, core.settings().stopTimeoutSeconds)  # a backoff
    except asyncio.CancelledError:
        core.agents.detach(record, "attach cancelled")
        raise
    if record.state == JobState.STARTING:
        core.set_state(record, JobState.DONE)
    record.set_attach(Attach.ATTACHED, "its worker let go")
    core.job_changed(record)
    return {"id": record.id, "name": record.name, "session": record.session, "cwd": record.cwd}


async def detach(core: Core, conn: Connection, request: JobRef) -> dict[str, Any]:
    record = core.find_job(request["job"])
    return {"id": record.id, "outcome": core.agents.detach(record, "roost attach ended")}


async def handoff(core: Core, conn: Connection, request: Handoff) -> dict[str, Any]:
    """A foreground pi gives its session to a job (new, or the session's old one)."""
    router = core.agents
    fg = router.foreground.get(conn.peer_id or "")
    if fg is None or conn.job_id is not None:
        raise RequestError(REFUSED, "only a registered foreground pi can hand off its session")
    if not fg.session:
        raise RequestError(
            BAD_REQUEST, "a session without a file (--no-session) cannot move to the background"
        )
    task = request.get("task") or None
    env = request_env(request)  # the pi's environment: the job's from now on
    record = router.job_for_session(fg.session)
    if record is not None and core.procs.get(record.id) and core.procs[record.id].alive:
        raise RequestError(REFUSED, f"job {record.id} already runs this session")
    if record is None:
        cwd, model, thinking = request.get("cwd"), request.get("model"), request.get("thinking")
        job: NewJob = {
            "task": task or "(handed off from the foreground)",
            "name": request.get("name") or fg.name,
            "cwd": cwd if cwd and os.path.isdir(cwd) else fg.cwd,
        }
        if model:
            job["model"] = model
        if thinking:
            job["thinking"] = thinking
        record = create_job(core, job)
        record.session = fg.session
        budget.apply_budget(core, record, {})  # the user's default budgets
        core.add_job(record)
    record.task = task or record.task
    record.set_attach(Attach.HANDING_OFF, "/roost-bg")
    if record.state in ENDED_JOB_STATES:
        core.set_state(record, JobState.STARTING)
    if task:
        core.mailbox(record).post(kind=ItemKind.REPLY.value, text=task, sender=None, cause=RunCause.CLI.value)
    else:
        record.summary = record.summary or "handed off from the foreground"
        if record.state == JobState.STARTING:
            core.set_state(record, JobState.DONE)
    if env is not None:
        paths.ensure_dir(record.dir)
        jobenv.save(record.dir, env, "/roost-bg")
    record.save()
    # From now on the session belongs to the job: nothing goes to this pi any more.
    router.foreground.pop(fg.id, None)
    conn.peer_id = None
    router.holders[conn] = record.id
    core.job_changed(record)
    return {"id": record.id, "name": record.name}


def handlers(core: Core) -> dict[str, Handler]:
    return bind(core, {"attach": attach, "detach": detach, "handoff": handoff})
