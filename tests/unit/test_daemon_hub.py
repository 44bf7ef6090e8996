"""roostd as a hub: the services that follow every change of a job are its listeners, in
a fixed order; a worker's end is looked up in a table (`WorkerExits`); the queue's gate is
asked once per start. In-process, with a fake in place of each worker process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from roost.host import paths
from roost.job.record import JobRecord
from roost.job.states import JobKind, JobState, ProcState, WorkerExit
from roost.supervise import daemon as daemon_module
from roost.supervise import jobs as jobs_service
from roost.supervise.workerexits import WorkerExits

pytestmark = pytest.mark.usefixtures("home")


class FakeProc:
    """A WorkerProcess with no process behind it: counts its spawns."""

    def __init__(self, record: JobRecord) -> None:
        self.record = record
        self.alive = False
        self.state = ProcState.STOPPED
        self.conn = None
        self.spawned = 0

    def spawn(self) -> bool:
        self.spawned += 1
        self.alive, self.state = True, ProcState.STARTING
        return False


def pi_job(job_id: str, state: JobState = JobState.STARTING) -> JobRecord:
    record = JobRecord(
        id=job_id,
        name=f"n{job_id}",
        kind=JobKind.PI,
        cwd="/",
        state=state,
        task="hello",
        session=str(paths.job_dir(job_id) / "session.jsonl"),
    )
    paths.ensure_dir(record.dir)
    Path(record.session or "").touch()
    return record


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> daemon_module.Daemon:
    monkeypatch.setattr(daemon_module, "agent_catalog", lambda cwd: None)
    return daemon_module.Daemon()


def count_admits(monkeypatch: pytest.MonkeyPatch, daemon: daemon_module.Daemon) -> list[str]:
    asked: list[str] = []
    admit = daemon.queue.admit

    def counted(record: JobRecord, why: str) -> bool:
        asked.append(record.id)
        return admit(record, why)

    monkeypatch.setattr(daemon.queue, "admit", counted)
    return asked


def test_the_listeners_are_called_in_the_documented_order(daemon: daemon_module.Daemon) -> None:
    """The queue first (its positions fresh for anyone after it), then the idle keeper,
    the dependencies, the search keeper; roostd's waiters and pushed rows last."""
    assert daemon.job_listeners == [
        daemon.queue.changed,
        daemon.idle.changed,
        daemon.deps.changed,
        daemon.search.changed,
        daemon._wake_waiters,
        daemon._push_row,
    ]


def test_job_changed_tells_every_listener_in_order(
    daemon: daemon_module.Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = pi_job("00000001", JobState.DONE)
    daemon.jobs[record.id] = record
    heard: list[str] = []
    daemon.job_listeners[:] = [lambda r: heard.append(f"a:{r.id}"), lambda r: heard.append(f"b:{r.id}")]
    daemon.job_changed(record, persist=False)
    assert heard == ["a:00000001", "b:00000001"]


def test_every_worker_exit_has_a_handler(daemon: daemon_module.Daemon) -> None:
    exits = WorkerExits(daemon, lambda record: None)
    assert set(exits._handlers) == set(WorkerExit)


def test_a_removed_jobs_worker_exit_is_dropped(daemon: daemon_module.Daemon) -> None:
    record = pi_job("00000002", JobState.RUNNING)
    saved: list[str] = []
    exits = WorkerExits(daemon, lambda r: saved.append(r.id))
    for how in WorkerExit:
        exits.report(record, how, "gone")
    assert record.state == JobState.RUNNING and saved == []
    daemon.jobs[record.id] = record
    exits.report(record, WorkerExit.RESTARTED, "")
    assert saved == [record.id]


def test_a_new_job_asks_the_gate_once(daemon: daemon_module.Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = count_admits(monkeypatch, daemon)

    async def scenario() -> None:
        record = pi_job("00000003")
        proc = FakeProc(record)
        daemon.procs[record.id] = proc  # type: ignore[assignment]
        jobs_service.launch(daemon, record)
        assert (asked, proc.spawned, record.state) == ([record.id], 1, JobState.STARTING)

    asyncio.run(scenario())


def test_a_start_asks_the_gate_once_and_a_queued_job_waits(
    daemon: daemon_module.Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon_module.Daemon, "settings", staticmethod(lambda: settings(maxRunning=1)))
    asked = count_admits(monkeypatch, daemon)

    async def scenario() -> None:
        first, second = pi_job("00000004", JobState.REAPED), pi_job("00000005", JobState.REAPED)
        procs: dict[str, Any] = {r.id: FakeProc(r) for r in (first, second)}
        for record in (first, second):
            daemon.jobs[record.id] = record
            daemon.procs[record.id] = procs[record.id]
        daemon.start_worker(first, "an item is waiting")
        daemon.start_worker(second, "an item is waiting")
        assert asked == [first.id, second.id]
        assert (first.state, second.state) == (JobState.STARTING, JobState.QUEUED)
        assert (procs[first.id].spawned, procs[second.id].spawned) == (1, 0)

        # The slot frees: the pump starts the queued job, on the plan's word (no second ask).
        daemon.set_state(first, JobState.DONE, status="")
        for _ in range(5):
            await asyncio.sleep(0)
        assert second.state == JobState.STARTING and procs[second.id].spawned == 1
        assert asked == [first.id, second.id]

    asyncio.run(scenario())


def settings(**fields: Any) -> Any:
    from dataclasses import replace

    from roost.config import load_settings

    return replace(load_settings(), **fields)
