"""A worker roostd started is still its job's worker after the wall clock is stepped.

A start time as psutil's `create_time()` computes it is /proc/stat's `btime` plus the
process's start ticks, and `btime` (the wall clock minus the time since boot) moves
whenever the wall clock is stepped: NTP, or a virtual machine's clock set again after a
pause. On a loaded 2-core CI machine it moved between a worker's start and its hello
(clean-clone run: test_queue, test_output_layer, and test_search's workers adopted after a
roostd SIGKILL): roostd refused the very worker it had started, once a second, until the
test gave up. Here the step is made by reading `btime` a few seconds later than the
kernel says; the process, its pid and its ticks since boot stay the same."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from roost.config import Settings
from roost.host import paths, procid
from roost.job.record import JobRecord, load_record
from roost.job.states import JobKind
from roost.locks.session_lock import LockHolder, holder_is_alive
from roost.supervise.handlers.worker import worker_hello
from roost.supervise.runner import LocalRunner
from roost.supervise.workers import WorkerProcess
from roost.wire.protocol import UNAUTHORIZED, RequestError

STEP = 13.0
"""Seconds the wall clock jumps: the CI run's wall clock ran ~12 s ahead of its monotonic
clock over one 90 s `roost wait`."""


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "rh"))
    return tmp_path


def step_the_clock(monkeypatch: pytest.MonkeyPatch, seconds: float = STEP) -> None:
    """From now on /proc/stat's btime reads `seconds` later, as after a wall-clock step."""
    real = procid.boot_time
    monkeypatch.setattr(procid, "boot_time", lambda: real() + seconds)


class Sleeper(WorkerProcess):
    """A pi job's WorkerProcess whose 'worker' is a sleep, started by the real LocalRunner
    (which records the identity as for any worker)."""

    def command(self) -> list[str]:
        return ["sleep", "60"]


def a_job(tmp_path: Path) -> JobRecord:
    record = JobRecord(id="0000c10c", name="clock", kind=JobKind.PI, cwd=str(tmp_path))
    paths.ensure_dir(record.dir)
    return record


def no_report(proc: WorkerProcess, how: Any, detail: str) -> None:
    pass


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[JobRecord, int]]:
    """A job whose worker roostd's spawn started and saved: (its record, the worker's pid)."""
    record = a_job(tmp_path)

    async def spawn() -> int:
        proc = Sleeper(record, Settings, no_report, LocalRunner())
        assert proc.spawn()
        proc.forget()  # roostd stops watching it, as when it is SIGKILLed
        assert record.process.worker_pid is not None
        return record.process.worker_pid

    pid = asyncio.run(spawn())
    try:
        yield record, pid
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def test_a_worker_started_before_a_clock_step_is_adopted_after_it(
    started: tuple[JobRecord, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    record, pid = started
    step_the_clock(monkeypatch)
    saved = load_record(record.file)  # what a roostd started after a SIGKILL reads

    async def adopt() -> bool:
        proc = WorkerProcess(saved, Settings, no_report, LocalRunner())
        try:
            return proc.adopt()
        finally:
            proc.forget()

    assert asyncio.run(adopt())
    assert procid.same_process(
        pid, saved.process.worker_start, saved.process.worker_ticks, saved.process.worker_boot
    )


def test_a_worker_started_before_a_clock_step_may_say_hello_after_it(
    started: tuple[JobRecord, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    record, pid = started
    step_the_clock(monkeypatch)
    proc = WorkerProcess(record, Settings, no_report, LocalRunner())
    assert proc.not_the_worker(pid) is None


async def hello_refusal(record: JobRecord, proc: WorkerProcess, pid: int) -> str:
    """worker_hello's refusal for a caller with pid `pid`, as the kernel gives it."""
    core = SimpleNamespace(jobs={record.id: record}, proc=lambda r: proc)
    # A unix connection (`writer`: no remote hub's proved link, roost.supervise.remotehub).
    conn = SimpleNamespace(peer=SimpleNamespace(uid=os.getuid(), pid=pid), writer=None)
    request = {"job": record.id, "token": record.token, "pid": pid}
    with pytest.raises(RequestError) as refused:
        await worker_hello(cast(Any, core), cast(Any, conn), cast(Any, request))
    assert refused.value.code == UNAUTHORIZED
    return refused.value.message


def test_a_refused_hello_says_which_check_failed(started: tuple[JobRecord, int]) -> None:
    record, pid = started
    other = subprocess.Popen(["sleep", "60"])

    async def refusals() -> tuple[str, str]:
        proc = WorkerProcess(record, Settings, no_report, LocalRunner())
        assert proc.adopt()  # watched, as after its spawn
        try:
            another_process = await hello_refusal(record, proc, other.pid)
            # The saved pid, reused by another process (the ticks saved are not its own):
            record.process.worker_ticks = (record.process.worker_ticks or 0) - 500
            reused_pid = await hello_refusal(record, proc, pid)
        finally:
            proc.forget()
        return another_process, reused_pid

    try:
        another_process, reused_pid = asyncio.run(refusals())
    finally:
        other.kill()
        other.wait()
    assert another_process == f"job {record.id}: its worker is pid {pid}, not pid {other.pid}"
    assert reused_pid.startswith(
        f"job {record.id}: pid {pid} is not the worker roostd started: it started at "
    )
    assert f"tick {record.process.worker_ticks} of boot" in reused_pid
    assert record.token not in another_process + reused_pid


def test_start_ticks_decide_when_both_sides_have_them(monkeypatch: pytest.MonkeyPatch) -> None:
    me = procid.inspect(os.getpid())
    assert me is not None and me.start_time is not None and me.start_ticks is not None
    step_the_clock(monkeypatch)
    assert procid.same_process(os.getpid(), me.start_time, me.start_ticks, me.boot_id)
    assert not procid.same_process(os.getpid(), me.start_time, me.start_ticks + 1, me.boot_id)
    assert not procid.same_process(os.getpid(), me.start_time, me.start_ticks, "another boot")
    # A record of an older roostd has only the start time: compared as before (and so
    # moved by the step, but never taken for another process's).
    assert not procid.same_process(os.getpid(), me.start_time)
    assert procid.same_process(os.getpid(), me.start_time + STEP)
    # The session lock's rule is the same one (docs/locks.md, "Who is alive").
    holder = LockHolder(os.getpid(), me.start_time, None, "s", me.start_ticks, me.boot_id)
    assert holder_is_alive(holder)
