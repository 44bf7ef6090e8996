"""roostd's idle jobs in-process (`roost.supervise.idle.IdleKeeper`): the warm window and
the live-pi cap, with fake workers (no roostd, no process)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from roost.config import Settings
from roost.host import paths
from roost.job.record import JobRecord
from roost.job.states import JobKind, JobState, ProcState
from roost.mailbox import Mailbox
from roost.supervise.idle import LIVE_JOB_BYTES, MIN_LIVE_PI, IdleKeeper, default_live_pi_cap


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "rh"))
    return tmp_path


class FakeProc:
    """A live worker that records being stopped (and goes, as a real one would)."""

    def __init__(self, stopped: list[str], job_id: str) -> None:
        self.alive, self.state = True, ProcState.RUNNING
        self._stopped, self._id = stopped, job_id

    async def stop(self, reason: str, timeout: float) -> None:
        self._stopped.append(self._id)
        self.alive, self.state = False, ProcState.EXITED


class Table:
    """The part of the daemon the keeper uses."""

    def __init__(self, **settings: Any) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self.procs: dict[str, FakeProc] = {}
        self.stopped: list[str] = []
        self.started: list[str] = []
        self._settings = replace(Settings(), **settings)
        self.keeper = IdleKeeper(self)  # type: ignore[arg-type]

    def settings(self) -> Settings:
        return self._settings

    def mailbox(self, record: JobRecord) -> Mailbox:
        return Mailbox(record.mailbox_dir)

    def start_worker(self, record: JobRecord, why: str) -> None:
        self.started.append(record.id)

    def add(self, job_id: str, state: JobState = JobState.DONE, busy: bool = False) -> JobRecord:
        record = JobRecord(id=job_id, name=job_id, kind=JobKind.PI, cwd="/", state=state, busy=busy)
        paths.ensure_dir(record.dir)
        self.jobs[job_id] = record
        self.procs[job_id] = FakeProc(self.stopped, job_id)
        return record

    def change(self, record: JobRecord) -> None:
        self.keeper.changed(record)


async def settle_loop(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def test_over_the_cap_the_least_recently_idle_go_first_and_never_a_running_job() -> None:
    async def scenario() -> None:
        table = Table(maxLivePi=2, warmSeconds=3600.0)
        busy = table.add("run1", JobState.RUNNING, busy=True)  # oldest, but working
        table.change(busy)
        for name in ("idle1", "idle0", "idle2"):  # idle1 became idle first, then 0, then 2
            table.change(table.add(name))
            await asyncio.sleep(0.01)
        await settle_loop()
        # 4 live, cap 2: the two idle longest go; the running job is not a candidate.
        assert table.stopped == ["idle1", "idle0"]
        assert table.procs["idle2"].alive and table.procs["run1"].alive
        assert busy.id not in table.stopped
        table.keeper.close()

    asyncio.run(scenario())


def test_the_cap_never_stops_a_running_needs_input_or_pending_job() -> None:
    async def scenario() -> None:
        table = Table(maxLivePi=0, warmSeconds=3600.0)
        table.change(table.add("run", JobState.RUNNING, busy=True))
        table.change(table.add("ask", JobState.NEEDS_INPUT))
        waiting = table.add("mail")
        table.mailbox(waiting).post(kind="reply", text="waits")
        table.change(waiting)
        table.change(table.add("starting", JobState.STARTING))
        await settle_loop()
        assert table.stopped == []  # over the cap, yet none of them is idle
        table.keeper.close()

    asyncio.run(scenario())


def test_a_done_job_is_stopped_when_its_warm_window_ends_not_before() -> None:
    async def scenario() -> None:
        table = Table(warmSeconds=0.3, maxLivePi=100)
        record = table.add("warm")
        table.change(record)
        await asyncio.sleep(0.1)
        assert table.stopped == []  # still warm
        await asyncio.sleep(0.4)
        assert table.stopped == ["warm"]
        table.keeper.close()

    asyncio.run(scenario())


def test_a_new_run_cancels_the_window() -> None:
    async def scenario() -> None:
        table = Table(warmSeconds=0.2, maxLivePi=100)
        record = table.add("again")
        table.change(record)
        record.state, record.busy = JobState.RUNNING, True  # a reply started a run
        table.change(record)
        await asyncio.sleep(0.4)
        assert table.stopped == []
        table.keeper.close()

    asyncio.run(scenario())


def test_an_item_that_came_while_it_was_stopped_starts_it_again() -> None:
    async def scenario() -> None:
        table = Table(warmSeconds=0.05, maxLivePi=100)
        record = table.add("late")
        proc = table.procs["late"]
        original = proc.stop

        async def stop_with_a_late_item(reason: str, timeout: float) -> None:
            table.mailbox(record).post(kind="reply", text="just in time")
            await original(reason, timeout)
            record.state = JobState.REAPED  # what roostd makes of a reap

        proc.stop = stop_with_a_late_item  # type: ignore[method-assign]
        table.change(record)
        await asyncio.sleep(0.3)
        assert table.stopped == ["late"] and table.started == ["late"]
        table.keeper.close()

    asyncio.run(scenario())


def test_the_default_cap_is_a_quarter_of_memory_over_one_live_job() -> None:
    assert default_live_pi_cap(24 * 2**30) == 24 * 2**30 // 4 // LIVE_JOB_BYTES
    assert default_live_pi_cap(2**30) == MIN_LIVE_PI  # a small machine still keeps a few


def test_reap_after_seconds_is_read_as_the_warm_window() -> None:
    assert Settings.from_dict({"reapAfterSeconds": 7}).warmSeconds == 7.0
    assert Settings.from_dict({"reapAfterSeconds": 7, "warmSeconds": 3}).warmSeconds == 3.0
    assert Settings.from_dict({"maxLivePi": 12}).maxLivePi == 12
