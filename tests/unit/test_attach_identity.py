"""Who may register for an attached job's session (docs/security.md, door 5): the pi that
`roost attach` started (that process or its descendant), holding the session's lock; not
another process of the user that takes the lock in between. In-process: a Daemon, the real
peer_register, a real session lock held by this test process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roost.host import paths, procid
from roost.job.record import JobRecord
from roost.job.states import Attach, JobKind, JobState
from roost.locks import SessionLock
from roost.supervise import daemon as daemon_module
from roost.supervise.handlers.agents import AgentOps
from roost.wire.connection import PeerCred
from roost.wire.protocol import RequestError

pytestmark = pytest.mark.usefixtures("home")


class Conn:
    def __init__(self) -> None:
        self.job_id: str | None = None
        self.peer_id: str | None = None
        self.peer = PeerCred(pid=os.getpid(), uid=os.getuid(), gid=os.getgid())
        self.info: dict[str, Any] = {}


def attached_job(attach: Attach = Attach.ATTACHED) -> JobRecord:
    record = JobRecord(
        id="0000000b",
        name="n",
        kind=JobKind.PI,
        cwd="/",
        state=JobState.DONE,
        session=str(paths.job_dir("0000000b") / "session.jsonl"),
    )
    paths.ensure_dir(record.dir)
    Path(record.session or "").touch()
    if attach != Attach.DETACHED:
        record.set_attach(Attach.ATTACHING, "roost attach")
    if attach == Attach.ATTACHED:
        record.set_attach(Attach.ATTACHED, "its worker let go")
    return record


def register(ops: AgentOps, session: str) -> dict[str, Any]:
    request = {"session": session, "pid": os.getpid(), "name": "me"}
    return asyncio.run(ops.peer_register(Conn(), request))  # type: ignore[arg-type]


@pytest.mark.parametrize("attach", [Attach.DETACHED, Attach.ATTACHING, Attach.ATTACHED])
def test_only_the_pi_that_roost_attach_started_gets_the_session(attach: Attach) -> None:
    daemon = daemon_module.Daemon()
    record = attached_job(attach)
    daemon.jobs[record.id] = record
    ops = AgentOps(daemon)
    assert record.session is not None
    lock = SessionLock(record.session)
    assert lock.acquire()  # this process holds the job's session lock
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = procid.live_start_time(stranger.pid)
        assert start is not None
        # `roost attach` was another process (not an ancestor of this one).
        daemon.agents.attach_callers[record.id] = (stranger.pid, start)
        with pytest.raises(RequestError) as refused:
            register(ops, record.session)
        assert refused.value.code == "unauthorized"
        if attach == Attach.DETACHED:
            assert "roost attach" in refused.value.message
            return
        # The pi under the `roost attach` that asked (here: this process's parent) may.
        parent = os.getppid()
        parent_start = procid.live_start_time(parent)
        assert parent_start is not None
        daemon.agents.attach_callers[record.id] = (parent, parent_start)
        assert register(ops, record.session)["name"] == "me"
    finally:
        stranger.kill()
        stranger.wait()
        lock.release()
        daemon.events.close()
