"""When the next spare worker starts (roost.supervise.spare): once the pi workers started
since are up (their jobs left `starting`), not REFILL_SECONDS after the last start. pi 1.x
boots in a third of a second, so waiting out the 2 s made a `roost run` that followed the
last one within ~2.5 s start its worker cold. In-process, behind the Runner seam."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from roost.host import paths
from roost.job.record import JobRecord
from roost.job.states import JobKind, JobState
from roost.supervise import daemon as daemon_module
from roost.supervise import spare as spare_mod
from roost.supervise.runner import LocalLaunch, LocalRunner, WorkerSpec

pytestmark = pytest.mark.usefixtures("home")

# A stand-in for `python -m roost.worker --standby`: says ready, then waits for its job.
STANDBY = (
    "import os, socket; s = socket.socket(fileno=int(os.environ['ROOST_WORKER_GO_FD']));"
    "s.sendall(b'ready'); socket.recv_fds(s, 65536, 1)"
)
# A stand-in for a worker started cold: held until roostd says go (as `roost.worker` is).
HELD = "import os; os.read(int(os.environ['ROOST_WORKER_GO_FD']), 2)"


def cold(runner: LocalRunner, tmp_path: Path, job: str, *, pi: bool = True) -> LocalLaunch:
    launched = runner.launch(
        WorkerSpec(job, [sys.executable, "-c", HELD], str(tmp_path), tmp_path / f"{job}.log", spare=pi)
    )
    assert isinstance(launched, LocalLaunch)  # no spare there yet: a worker of its own
    return launched


async def started(runner: LocalRunner, within: float) -> bool:
    """Whether a spare process exists within `within` seconds."""
    assert runner.spare is not None
    deadline = asyncio.get_running_loop().time() + within
    while runner.spare.pid is None and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)
    return runner.spare.pid is not None


def refill_in(runner: LocalRunner) -> float:
    """Seconds until the pending refill starts a spare."""
    assert runner.spare is not None and runner.spare._refill is not None
    return runner.spare._refill.when() - asyncio.get_running_loop().time()


def test_the_spare_starts_once_the_pis_started_since_are_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spare_mod, "standby_command", lambda: [sys.executable, "-c", STANDBY])
    monkeypatch.setattr(spare_mod, "REFILL_SECONDS", 60.0)  # the test never waits for it

    async def scenario() -> None:
        runner = LocalRunner(spare=lambda: True)
        runner.prepare()
        workers = [
            cold(runner, tmp_path, "0000000a"),
            cold(runner, tmp_path, "0000000b"),
            cold(runner, tmp_path, "0000000c", pi=False),
        ]  # a shell job's worker
        assert refill_in(runner) > 30
        runner.worker_up("0000000a")
        assert refill_in(runner) > 30  # b's pi still boots: no spare beside it
        runner.worker_up("0000000c")  # not a pi worker: nothing waited for it
        assert refill_in(runner) > 30
        runner.worker_up("0000000b")  # every pi started since is up
        assert refill_in(runner) <= spare_mod.UP_GRACE_SECONDS
        assert await started(runner, 30)
        runner.worker_up("0000000b")  # said twice (or of a job it never started): no-op
        for worker in workers:
            worker.go()
            assert worker.wait() == 0
        runner.close()

    asyncio.run(scenario())


def test_a_worker_started_meanwhile_holds_the_spare_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spare_mod, "standby_command", lambda: [sys.executable, "-c", STANDBY])
    monkeypatch.setattr(spare_mod, "REFILL_SECONDS", 60.0)

    async def scenario() -> None:
        runner = LocalRunner(spare=lambda: True)
        a = cold(runner, tmp_path, "0000000a")
        runner.worker_up("0000000a")
        assert refill_in(runner) <= spare_mod.UP_GRACE_SECONDS
        b = cold(runner, tmp_path, "0000000b")  # before the spare came: it waits for b again
        assert refill_in(runner) > 30
        runner.worker_up("0000000b")
        assert await started(runner, 30)
        for worker in (a, b):
            worker.go()
            assert worker.wait() == 0
        runner.close()

    asyncio.run(scenario())


class Runner:
    """The seam, recording what roostd tells it."""

    def __init__(self) -> None:
        self.up: list[str] = []

    def worker_up(self, job_id: str) -> None:
        self.up.append(job_id)

    def close(self) -> None: ...


def test_roostd_says_a_worker_is_up_when_its_job_leaves_starting() -> None:
    async def scenario() -> None:
        daemon = daemon_module.Daemon()
        runner = Runner()
        daemon.runner = runner  # type: ignore[assignment]
        record = JobRecord(
            id="0000000d", name="d", kind=JobKind.PI, cwd="/", state=JobState.STARTING, session=None
        )
        paths.ensure_dir(record.dir)
        daemon.jobs[record.id] = record
        daemon.set_state(record, JobState.RUNNING)
        assert runner.up == ["0000000d"]
        daemon.set_state(record, JobState.DONE)
        assert runner.up == ["0000000d"]  # once, as it left starting
        daemon.set_state(record, JobState.STARTING)  # its worker crashed: a new one starts
        daemon.set_state(record, JobState.FAILED)  # it will not come up either
        assert runner.up == ["0000000d", "0000000d"]

    asyncio.run(scenario())
