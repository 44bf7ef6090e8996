"""The Runner seam (`roost.supervise.runner`): roostd starts a job's worker only through a
runner, saves the identity it reports (pid and start time) before the worker may act, and
never releases one it could not record. A fake runner stands in for the process start."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from roost.config import Settings
from roost.host import paths, procid
from roost.job.record import JobRecord, load_record
from roost.job.states import JobKind, ProcState, WorkerExit
from roost.supervise.runner import LocalRunner, WorkerSpec
from roost.supervise.workers import WorkerProcess


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "rh"))
    return tmp_path


class FakeLaunch:
    """A started 'worker' (a sleep) that logs what roostd does with it."""

    def __init__(self, log: list[str], record: JobRecord) -> None:
        self._popen = subprocess.Popen(["sleep", "30"])
        self.pid = self._popen.pid
        self.start_time, self.start_ticks, self.boot_id = procid.identity(self.pid)
        self._log, self._record = log, record

    def go(self) -> None:
        p = load_record(self._record.file).process
        saved = (p.worker_pid, p.worker_start, p.worker_ticks, p.worker_boot)
        same = saved == (self.pid, self.start_time, self.start_ticks, self.boot_id)
        self._log.append(f"go saved={same}")
        self._popen.kill()

    def cancel(self) -> None:
        self._log.append("cancel")
        self._popen.kill()

    def wait(self) -> int | None:
        return self._popen.wait()


class FakeRunner:
    def __init__(self, record: JobRecord) -> None:
        self.log: list[str] = []
        self.specs: list[WorkerSpec] = []
        self._record = record

    def launch(self, spec: WorkerSpec) -> FakeLaunch:
        self.specs.append(spec)
        self.log.append("launch")
        return FakeLaunch(self.log, self._record)


def a_job(tmp_path: Path) -> JobRecord:
    record = JobRecord(id="0000abcd", name="seam", kind=JobKind.PI, cwd=str(tmp_path))
    paths.ensure_dir(record.dir)
    return record


def spawn_and_exit(proc: WorkerProcess, exits: list[WorkerExit]) -> None:
    async def scenario() -> None:
        proc.spawn()
        await asyncio.wait_for(proc.exited.wait(), 10)

    asyncio.run(scenario())


def test_a_worker_is_released_only_after_its_identity_is_saved(tmp_path: Path) -> None:
    record = a_job(tmp_path)
    runner = FakeRunner(record)
    exits: list[WorkerExit] = []
    proc = WorkerProcess(record, Settings, lambda p, how, detail: exits.append(how), runner)
    spawn_and_exit(proc, exits)
    assert runner.log == ["launch", "go saved=True"]
    spec = runner.specs[0]
    assert spec.job_id == record.id and spec.command == proc.command()
    assert spec.cwd == str(tmp_path) and spec.log_path == record.dir / "worker.log"
    assert exits == [WorkerExit.CRASHED]  # killed: the crash path, as for a local worker
    assert proc.state == ProcState.BACKOFF


def test_a_worker_whose_identity_could_not_be_saved_is_never_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = a_job(tmp_path)
    runner = FakeRunner(record)

    def no_save() -> None:
        raise OSError("disk full")

    monkeypatch.setattr(record, "save", no_save)
    exits: list[WorkerExit] = []
    proc = WorkerProcess(record, Settings, lambda p, how, detail: exits.append(how), runner)
    spawn_and_exit(proc, exits)
    assert runner.log == ["launch", "cancel"]
    assert exits == [WorkerExit.FATAL]


def test_the_local_runner_holds_its_worker_until_go(tmp_path: Path) -> None:
    """LocalRunner's worker sees ROOST_WORKER_GO_FD and reads `go` from it only once told."""
    script = (
        "import os,sys; fd=int(os.environ['ROOST_WORKER_GO_FD']); "
        "sys.stdout.write(os.read(fd, 2).decode() or 'eof'); sys.stdout.flush()"
    )
    for release in (True, False):
        log_path = tmp_path / f"w{release}.log"
        launched = LocalRunner().launch(
            WorkerSpec("0000abcd", [sys.executable, "-c", script], str(tmp_path), log_path)
        )
        assert (launched.start_time, launched.start_ticks, launched.boot_id) == procid.identity(launched.pid)
        assert launched.start_ticks is not None and launched.boot_id is not None
        launched.go() if release else launched.cancel()
        assert launched.wait() == 0
        assert log_path.read_text() == ("go" if release else "eof")
