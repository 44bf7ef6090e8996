"""One worker per job: an flock on `jobs/<id>/worker.lock`, held for the worker's whole life.

roostd records a worker's pid in job.json only after spawning it; a roostd killed in
between leaves a live worker that no record names. Without this lock the next roostd would
start a second worker for the job, both would bind `ext.sock`, and both would deliver from
one mailbox. So:

* a worker takes the lock (LOCK_EX, non-blocking) before it touches anything of the job,
  writes its pid into the file, and keeps the descriptor open until it exits (the kernel
  drops the lock then, whatever kills it); a second worker finds it held and exits at once
  with EXIT_DUPLICATE;
* roostd asks `live_holder` before it spawns a worker and when it adopts one: a held lock
  names the live worker to adopt instead.

Standard library only: the worker's launcher imports this before pi starts.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

LOCK_NAME = "worker.lock"
EXIT_DUPLICATE = 4
"""A worker's exit code for "this job already has a live worker"."""

_held: int | None = None  # the descriptor whose flock this process holds (never closed)


class Duplicate(Exception):
    """The job's lock is held by another live worker (its pid, when it could be read)."""

    def __init__(self, pid: int | None) -> None:
        super().__init__(f"the job already has a live worker (pid {pid})")
        self.pid = pid


def _open(job_dir: Path, flags: int) -> int:
    # O_NOFOLLOW: a symlink planted as the lock file is refused, never written through.
    return os.open(job_dir / LOCK_NAME, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


def acquire(job_dir: Path) -> None:
    """Take the job's worker lock for this process's life; Duplicate when it is held."""
    global _held
    fd = _open(job_dir, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _read_pid(fd)
        os.close(fd)
        raise Duplicate(pid) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _held = fd


def live_holder(job_dir: Path, timeout: float = 1.0) -> int | None:
    """The pid of the live worker holding the job's lock, or None when no worker holds it.

    A worker writes its pid just after taking the lock; a holder whose pid is not written
    yet is waited for (at most `timeout`).
    """
    try:
        fd = _open(job_dir, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return None  # a symlink (ELOOP) or unreadable: no worker of ours made it
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = _read_pid(fd)
                if pid is not None or time.monotonic() >= deadline:
                    return pid
                time.sleep(0.01)
                continue
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
    finally:
        os.close(fd)
