"""Session writer locks (roost.locks), Python side: basics, staleness, races between processes."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from kit.wait import wait_until

from roost.locks import (
    LockHolder,
    SessionLock,
    SessionLocked,
    holder_is_alive,
    lock_path_for,
    process_start_time,
    read_holder,
)
from roost.locks.session_lock import _read

REPO = Path(__file__).resolve().parents[2]

# A process that takes the lock, says "ok"/"no", releases on "release", exits on EOF.
HOLDER = r"""
import sys
from roost.locks import SessionLock
lock = SessionLock(sys.argv[1], peer=sys.argv[2] if len(sys.argv) > 2 else None)
print("ok" if lock.acquire() else "no", flush=True)
for line in sys.stdin:
    if line.strip() == "release":
        lock.release()
        print("released", flush=True)
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def holders() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start holder processes (HOLDER); each is killed and reaped at the end."""
    procs: list[subprocess.Popen[str]] = []

    def start(session: Path, peer: str | None = None, expect: str = "ok") -> subprocess.Popen[str]:
        args = [sys.executable, "-c", HOLDER, str(session)] + ([peer] if peer else [])
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        pipe = subprocess.PIPE
        p = subprocess.Popen(args, stdin=pipe, stdout=pipe, text=True, env=env)
        procs.append(p)
        assert p.stdout is not None
        assert p.stdout.readline().strip() == expect
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def write_record(path: Path, pid: int, start_time: float, **extra: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"pid": pid, "startTime": start_time, "peer": None, "session": "/x", **extra}
    path.write_text(json.dumps(record))


def claim_path(lock: SessionLock, k: int) -> Path:
    snap = _read(lock.path)
    assert snap is not None
    return lock.path.with_name(f"{lock.path.name}.takeover.{snap.ident}.{k}")


# --- basics --------------------------------------------------------------------------------


def test_acquire_release_holder(home: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    lock = SessionLock(session, peer="job1")
    assert lock.path.parent == home / "locks"
    assert lock.holder() is None
    assert lock.acquire()
    assert lock.acquire()  # idempotent
    assert SessionLock(session).acquire()  # the lock belongs to the process
    h = lock.holder()
    assert h is not None
    assert (h.pid, h.peer, h.session) == (os.getpid(), "job1", str(session))
    assert abs(h.start_time - psutil.Process().create_time()) < 1e-6
    record = json.loads(lock.path.read_text())
    assert {"pid", "startTime", "peer", "session", "acquired"} <= record.keys()
    assert (stat := os.stat(home / "locks")).st_mode & 0o777 == 0o700, oct(stat.st_mode)
    lock.release()
    assert lock.holder() is None
    assert not lock.path.exists()
    assert os.listdir(home / "locks") == []
    lock.release()  # releasing a free lock is harmless


def test_lock_path_is_sha256_of_normalised_path(home: Path, tmp_path: Path) -> None:
    session = tmp_path / "a" / "s.jsonl"
    digest = hashlib.sha256(str(session).encode()).hexdigest()
    assert lock_path_for(session) == home / "locks" / f"{digest}.json"
    assert lock_path_for(f"{tmp_path}/a/../a/./s.jsonl") == lock_path_for(session)
    assert lock_path_for("/" + str(session)) == lock_path_for(session)  # '//x' is '/x'
    os.chdir(tmp_path)
    assert lock_path_for("a/s.jsonl") == lock_path_for(session)


def test_start_time_matches_psutil() -> None:
    for pid in (os.getpid(), os.getppid(), 1):
        assert process_start_time(pid) == psutil.Process(pid).create_time()
    assert process_start_time(dead_pid()) is None


def test_context_manager_raises_naming_holder(home: Path, tmp_path: Path, holders) -> None:
    session = tmp_path / "s.jsonl"
    child = holders(session, "peer-7")
    lock = SessionLock(session)
    h = lock.holder()
    assert h is not None and (h.pid, h.peer) == (child.pid, "peer-7")
    assert not lock.acquire()
    with pytest.raises(SessionLocked) as info, lock:
        pass
    message = str(info.value)
    assert str(child.pid) in message and "peer-7" in message and str(session) in message
    assert info.value.holder == h
    lock.release()  # not ours: must not remove it
    assert lock.holder() == h
    started = time.monotonic()
    assert not lock.acquire(blocking=True, timeout=0.2)
    assert time.monotonic() - started >= 0.2


def test_blocking_acquire_waits_for_release(home: Path, tmp_path: Path, holders) -> None:
    session = tmp_path / "s.jsonl"
    child = holders(session)
    assert child.stdin is not None
    child.stdin.write("release\n")
    child.stdin.flush()
    assert SessionLock(session).acquire(blocking=True, timeout=10)


def test_context_manager_is_reentrant(home: Path, tmp_path: Path) -> None:
    outer = SessionLock(tmp_path / "s.jsonl")
    with outer:
        with SessionLock(tmp_path / "s.jsonl") as inner:
            assert inner.held()
        assert outer.held()  # the inner `with` did not take it, so it did not drop it
    assert outer.holder() is None


# --- staleness -----------------------------------------------------------------------------


def test_lock_of_killed_process_is_taken_over(home: Path, tmp_path: Path, holders) -> None:
    session = tmp_path / "s.jsonl"
    child = holders(session, "doomed")
    lock = SessionLock(session, peer="heir")
    assert not lock.acquire()
    child.send_signal(signal.SIGKILL)
    # Not reaped yet: a zombie holds nothing.
    wait_until(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE)
    assert lock.holder() is None
    raw = read_holder(session)
    assert raw is not None and raw.pid == child.pid and not holder_is_alive(raw)
    assert lock.acquire()
    h = lock.holder()
    assert h is not None and (h.pid, h.peer) == (os.getpid(), "heir")
    child.wait()
    assert sorted(os.listdir(home / "locks")) == [lock.path.name]  # no claim left behind


def test_reused_pid_is_stale(home: Path, tmp_path: Path, holders) -> None:
    other = holders(tmp_path / "other.jsonl")  # a live process that is not the holder
    proc = psutil.Process(other.pid)
    start = proc.create_time()
    lock = SessionLock(tmp_path / "s.jsonl")
    write_record(lock.path, other.pid, start - 30.0)  # pid now belongs to another process
    assert lock.holder() is None
    assert lock.acquire()
    lock.release()
    ticks = round((start - psutil.boot_time()) * 100)
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    # Exact identity wins over the float: right time but other ticks or boot is stale...
    write_record(lock.path, other.pid, start, startTicks=ticks + 1, bootId=boot)
    assert lock.holder() is None
    write_record(lock.path, other.pid, start, startTicks=ticks, bootId="other-boot")
    assert lock.holder() is None
    # ...and the true identity is live, with or without the exact fields.
    write_record(lock.path, other.pid, start, startTicks=ticks, bootId=boot)
    assert lock.holder() == LockHolder(other.pid, start, None, "/x", ticks, boot)
    assert not lock.acquire()
    write_record(lock.path, other.pid, start)
    assert not lock.acquire()
    lock.path.unlink()


def test_corrupt_lock_file(home: Path, tmp_path: Path) -> None:
    lock = SessionLock(tmp_path / "s.jsonl")
    for content in ("", "{not json", '{"pid": "12"}', "[1,2]", '{"pid": 1}'):
        lock.path.parent.mkdir(parents=True, exist_ok=True)
        lock.path.write_text(content)
        assert lock.holder() is None
        assert read_holder(tmp_path / "s.jsonl") is None
        assert not lock.acquire()  # young: maybe a hand edit in progress
        with pytest.raises(SessionLocked, match="unreadable"), lock:
            pass
        old = time.time() - 10
        os.utime(lock.path, (old, old))
        assert lock.acquire()
        assert lock.holder() is not None
        lock.release()


def test_dead_claimant_is_superseded(home: Path, tmp_path: Path) -> None:
    """A takeover claim left by a process that died mid-takeover does not block for ever."""
    lock = SessionLock(tmp_path / "s.jsonl")
    write_record(lock.path, dead_pid(), 1.0)
    gone = dead_pid()
    for k in range(3):
        write_record(claim_path(lock, k), gone, 2.0)
    assert lock.acquire()
    assert sorted(os.listdir(home / "locks")) == [lock.path.name]


def test_live_claimant_blocks_takeover(home: Path, tmp_path: Path, holders) -> None:
    other = holders(tmp_path / "other.jsonl")
    lock = SessionLock(tmp_path / "s.jsonl")
    write_record(lock.path, dead_pid(), 1.0)
    before = lock.path.read_bytes()
    claim = claim_path(lock, 0)
    write_record(claim, other.pid, psutil.Process(other.pid).create_time())
    assert not lock.acquire()
    assert lock.path.read_bytes() == before
    claim.unlink()  # the claimant gave up
    assert lock.acquire()


def test_takeover_sweeps_orphans(home: Path, tmp_path: Path) -> None:
    lock = SessionLock(tmp_path / "s.jsonl")
    write_record(lock.path, dead_pid(), 1.0)
    orphan = lock.path.with_name(f"{lock.path.name}.takeover.{'0' * 32}.0")
    old_tmp = lock.path.with_name(f"{lock.path.name}.tmp.{'1' * 32}")
    new_tmp = lock.path.with_name(f"{lock.path.name}.tmp.{'2' * 32}")
    unrelated = home / "locks" / "unrelated.json.takeover.x.0"
    for p in (orphan, old_tmp, new_tmp, unrelated):
        p.write_text("{}")
    os.utime(old_tmp, (time.time() - 7200,) * 2)
    assert lock.acquire()
    left = sorted(os.listdir(home / "locks"))
    assert left == sorted([lock.path.name, new_tmp.name, unrelated.name])


# --- races ---------------------------------------------------------------------------------

WORKERS = 4
ROUNDS = 30


def _prepare_stale(lock: SessionLock, kind: int) -> None:
    """Leave a stale lock of one of four kinds for the contenders to fight over."""
    if kind == 0:
        write_record(lock.path, dead_pid(), 1.0)
    elif kind == 1:  # our pid, but not our start time: a reused pid
        write_record(lock.path, os.getpid(), psutil.Process().create_time() - 99)
    elif kind == 2:
        write_record(lock.path, 1, 0.0)
        lock.path.write_text("garbage")
        os.utime(lock.path, (time.time() - 60,) * 2)
    else:  # and a claimant that died mid-takeover
        write_record(lock.path, dead_pid(), 1.0)
        write_record(claim_path(lock, 0), dead_pid(), 1.0)


def _contender(sessions: list[str], barrier, results, idx: int) -> None:
    for r, session in enumerate(sessions):
        lock = SessionLock(session)
        barrier.wait(20)  # the parent has prepared this round
        results[r * WORKERS + idx] = 1 if lock.acquire() else 0
        barrier.wait(20)  # everyone has tried while the winner still holds it
        lock.release()
        barrier.wait(20)


def _race(tmp_path: Path, prepare: Callable[[SessionLock, int], None] | None) -> None:
    ctx = multiprocessing.get_context("fork")
    sessions = [str(tmp_path / f"race-{r}.jsonl") for r in range(ROUNDS)]
    barrier = ctx.Barrier(WORKERS + 1)
    results = ctx.Array("i", [-1] * (ROUNDS * WORKERS))
    procs = [ctx.Process(target=_contender, args=(sessions, barrier, results, i)) for i in range(WORKERS)]
    for p in procs:
        p.start()
    try:
        for r, session in enumerate(sessions):
            if prepare is not None:
                prepare(SessionLock(session), r)
            for _ in range(3):
                barrier.wait(20)
    finally:
        for p in procs:
            p.join(20)
            if p.exitcode is None:
                p.kill()
    assert [p.exitcode for p in procs] == [0] * WORKERS
    for r in range(ROUNDS):
        row = list(results[r * WORKERS : (r + 1) * WORKERS])
        assert sorted(row) == [0] * (WORKERS - 1) + [1], f"round {r}: {row}"
        assert SessionLock(sessions[r]).holder() is None


def test_race_exactly_one_wins(home: Path, tmp_path: Path) -> None:
    _race(tmp_path, None)
    assert os.listdir(home / "locks") == []


def test_concurrent_takeover_exactly_one_wins(home: Path, tmp_path: Path) -> None:
    _race(tmp_path, lambda lock, r: _prepare_stale(lock, r % 4))
    assert os.listdir(home / "locks") == []
