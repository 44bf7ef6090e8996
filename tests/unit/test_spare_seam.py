"""The spare worker behind the Runner seam (roost.supervise.spare), in-process: a pi spec
takes a ready spare only, a shell spec never, and `WorkerProcess.spawn` says whether it
saved the record (roostd then saves it once, not twice)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from roost.config import Settings
from roost.host import paths
from roost.job.record import JobRecord
from roost.job.states import JobKind
from roost.supervise import spare as spare_mod
from roost.supervise.runner import LocalLaunch, LocalRunner, WorkerSpec
from roost.supervise.spare import SpareLaunch
from roost.supervise.workers import WorkerProcess


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "rh"))
    return tmp_path


# A stand-in for `python -m roost.worker --standby`: says ready, then prints what it got.
STANDBY = (
    "import os, socket, sys; s = socket.socket(fileno=int(os.environ['ROOST_WORKER_GO_FD']));"
    "s.sendall(b'ready'); m, fds, _, _ = socket.recv_fds(s, 65536, 1);"
    "os.write(fds[0], m) if fds else None"
)
# A stand-in for a worker started cold: held until roostd says go (as `roost.worker` is).
HELD = "import os; print(os.read(int(os.environ['ROOST_WORKER_GO_FD']), 2).decode(), flush=True)"


def test_a_pi_spec_takes_the_ready_spare_and_a_shell_spec_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spare_mod, "standby_command", lambda: [sys.executable, "-c", STANDBY])
    monkeypatch.setattr(spare_mod, "REFILL_SECONDS", 30.0)

    async def scenario() -> None:
        runner = LocalRunner(spare=lambda: True)
        assert runner.spare is not None
        runner.spare.start()
        for _ in range(400):
            if runner.spare.ready:
                break
            await asyncio.sleep(0.025)
        assert runner.spare.ready
        spare_pid = runner.spare.pid
        shell = runner.launch(
            WorkerSpec("0000aaaa", [sys.executable, "-c", HELD], str(tmp_path), tmp_path / "shell.log")
        )
        assert isinstance(shell, LocalLaunch) and shell.pid != spare_pid
        shell.go()
        assert shell.wait() == 0
        taken = runner.launch(
            WorkerSpec("0000bbbb", ["unused"], str(tmp_path), tmp_path / "pi.log", env={"X": "1"}, spare=True)
        )
        assert isinstance(taken, SpareLaunch) and taken.pid == spare_pid
        assert runner.spare.pid is None  # used once: the next one comes later
        again = runner.launch(
            WorkerSpec(
                "0000cccc", [sys.executable, "-c", HELD], str(tmp_path), tmp_path / "cold.log", spare=True
            )
        )
        assert isinstance(again, LocalLaunch)  # none ready: a worker of its own
        again.go()
        assert again.wait() == 0
        taken.go()
        assert taken.wait() == 0
        assert (tmp_path / "shell.log").read_text() == (tmp_path / "cold.log").read_text() == "go\n"
        sent = (tmp_path / "pi.log").read_text()
        assert '"job": "0000bbbb"' in sent and '"X": "1"' in sent
        assert oct(os.stat(tmp_path / "pi.log").st_mode & 0o777) == "0o600"
        runner.close()

    asyncio.run(scenario())


def test_a_spare_is_never_started_when_turned_off() -> None:
    async def scenario() -> None:
        runner = LocalRunner(spare=lambda: False)
        assert runner.spare is not None
        runner.spare.start()
        assert runner.spare.pid is None
        runner.close()

    asyncio.run(scenario())


class Launch:
    pid = os.getpid()
    start_time = start_ticks = boot_id = None

    def go(self) -> None: ...

    def cancel(self) -> None: ...

    def wait(self) -> int | None:
        return 0


class Runner:
    def launch(self, spec: WorkerSpec) -> Launch:
        return Launch()


def test_spawn_says_whether_it_saved_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = JobRecord(id="0000dddd", name="s", kind=JobKind.PI, cwd=str(tmp_path))
    paths.ensure_dir(record.dir)

    async def spawn() -> bool:
        proc = WorkerProcess(record, Settings, lambda p, how, detail: None, Runner())
        monkeypatch.setattr(proc, "_watch", lambda pid: None)
        monkeypatch.setattr(proc, "adopt", lambda: False)
        return proc.spawn()

    assert asyncio.run(spawn()) is True

    def no_save() -> None:
        raise OSError("disk full")

    monkeypatch.setattr(record, "save", no_save)
    assert asyncio.run(spawn()) is False
