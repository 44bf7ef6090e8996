"""roostd's worker operations: a worker proves its token, then reports its job's state."""

from __future__ import annotations

import hmac
import os
from typing import Any, cast

from roost.job.record import Facts, JobRecord
from roost.job.states import WORKER_STATES, JobState
from roost.supervise import budget, remotehub
from roost.supervise.core import Core, bind
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import NOT_FOUND, REFUSED, UNAUTHORIZED, RequestError
from roost.wire.requests import NoArgs, WorkerExiting, WorkerHello, WorkerUpdate

# What a worker may report, and the job states it may move its job to.
WORKER_FIELDS = ("status", "summary", "question", "dialog", "options", "busy", "usage", "error")
# Re-sent by the worker after every reconnect; `usage` is also recomputed from the session
# file at every worker start, and saved with the record's next persisted change.
EPHEMERAL_FIELDS = {"status", "busy", "usage"}


async def worker_hello(core: Core, conn: Connection, request: WorkerHello) -> dict[str, Any]:
    record = core.jobs.get(request["job"])
    if record is None:
        raise RequestError(NOT_FOUND, f"no job {request['job']!r}")
    if not hmac.compare_digest(request["token"], record.token):
        raise RequestError(UNAUTHORIZED, f"wrong token for job {record.id}")
    if remotehub.linked_job(conn.writer) == record.id:
        return _remote_hello(core, conn, record)
    # The token alone is no proof: job.json is readable by any process of the user
    # (an agent's tools included), and so is its worker lock. The caller must be the very
    # process roostd spawned (or adopted) as the job's worker: the pid the kernel gives
    # for the socket (SO_PEERCRED) and that process's start (its ticks since boot:
    # WorkerProcess.not_the_worker) are the ones roostd saved when it spawned it, and roostd
    # still watches it.
    peer = conn.peer
    if peer is None or peer.uid != os.getuid():
        raise RequestError(UNAUTHORIZED, "worker_hello: the caller's credentials are unknown")
    pid = peer.pid
    if request["pid"] != pid:
        raise RequestError(UNAUTHORIZED, f"worker_hello: the caller is pid {pid}, not {request['pid']!r}")
    proc = core.proc(record)
    if not proc.alive and not proc.adopt():
        raise RequestError(UNAUTHORIZED, f"job {record.id} has no worker that roostd started")
    refusal = proc.not_the_worker(pid)
    if refusal is not None:
        raise RequestError(UNAUTHORIZED, refusal)
    return _bind(core, conn, record)


def _remote_hello(core: Core, conn: Connection, record: JobRecord) -> dict[str, Any]:
    """A worker on another machine (supervise/remotehub.py): its connection proved the
    job's current attempt with the attempt's secret; no pid of this machine is its."""
    proc = core.proc(record)
    if not proc.alive and not proc.adopt():
        raise RequestError(UNAUTHORIZED, f"job {record.id} has no remote attempt that roostd started")
    return _bind(core, conn, record)


def _bind(core: Core, conn: Connection, record: JobRecord) -> dict[str, Any]:
    proc = core.proc(record)
    conn.job_id = record.id
    conn.peer_id = record.id
    proc.connected_as_worker(conn)
    core.job_changed(record)
    core.queue.hello(record, conn)
    core.agents.retry_undelivered(record.session)
    budget.worker_connected(core, record)
    return {"job": record.id}


async def worker_update(core: Core, conn: Connection, request: WorkerUpdate) -> dict[str, Any]:
    assert conn.job_id is not None
    record = core.jobs.get(conn.job_id)
    if record is None:
        raise RequestError(NOT_FOUND, f"job {conn.job_id} was removed")
    fields = cast(Facts, {key: value for key, value in request.items() if key in WORKER_FIELDS})
    proc = core.procs.get(record.id)
    if proc is not None:  # its record is current once this returns (nothing here awaits)
        proc.reported.set()
    if record.state in (JobState.STOPPED, JobState.REAPED):
        return {}  # the worker is on its way out; its last words change nothing
    state = request.get("state")
    if state is not None and state != JobState.STARTING.value:
        target = next((s for s in WORKER_STATES if s.value == state), None)
        if target is None:
            raise RequestError(REFUSED, f"a worker cannot set state {state!r}")
        if record.state == JobState.QUEUED and target != JobState.RUNNING:
            target = record.state  # idle while it waits for a slot: still queued
        elif record.id in core.queue.granted:  # roost.supervise.jobqueue.JobQueue.turn
            if target != JobState.RUNNING and fields.get("busy"):
                target = record.state  # the granted run's prompt is on its way
            else:
                core.queue.granted.discard(record.id)  # it runs, or no run followed
        if target != record.state:
            core.set_state(record, target, **fields)
            return {}
    if "usage" in fields and not isinstance(fields["usage"], dict):
        raise RequestError(REFUSED, "usage must be an object")
    changed = {key for key, value in fields.items() if getattr(record, key) != value}
    record.apply(fields)
    if "usage" in changed:
        budget.after_usage(core, record)
    if changed:
        # What the agent is doing right now is not worth an fsync on the core's loop
        # (it would delay every message behind it); the rest of the record is.
        # Usage after a settle (pi 1.x's get_session_stats) is saved: no run follows it.
        core.job_changed(
            record, persist=bool(changed - EPHEMERAL_FIELDS) or ("usage" in changed and not record.busy)
        )
    return {}


async def worker_exiting(core: Core, conn: Connection, request: WorkerExiting) -> dict[str, Any]:
    assert conn.job_id is not None
    proc = core.procs.get(conn.job_id)
    if proc is not None:
        if request.get("fatal"):
            proc.fatal_reason = request["reason"]
        elif proc.expected_exit is None:
            proc.expected_exit = request["reason"]
    return {}


async def turn(core: Core, conn: Connection, request: NoArgs) -> dict[str, Any]:
    assert conn.job_id is not None
    record = core.jobs.get(conn.job_id)
    if record is None:
        raise RequestError(NOT_FOUND, f"job {conn.job_id} was removed")
    return {"go": core.queue.turn(record)}


def handlers(core: Core) -> dict[str, Handler]:
    return bind(
        core,
        {
            "worker_hello": worker_hello,
            "worker_update": worker_update,
            "worker_exiting": worker_exiting,
            "turn": turn,
        },
    )
