"""One worker per job: an flock on `jobs/<id>/worker.lock`, held for the worker's whole life.

Without this lock a second worker for the job (a roostd that lost track of the first)
would bind `ext.sock` beside it, and both would deliver from one mailbox. So:

* a worker takes the lock (LOCK_EX, non-blocking) before it touches anything of the job,
  writes its pid into the file, and keeps the descriptor open until it exits (the kernel
  drops the lock then, whatever kills it); a second worker finds it held and exits at once
  with EXIT_DUPLICATE;
* the lock is no identity (any process of the user may take it): roostd adopts only the
  worker whose pid and start time it saved before the worker ran (`wait_for_go`), and
  stops a holder it did not record (`kernel_holders`, the kernel's word, not the file's).

Standard library only: the worker's launcher imports this before pi starts.
"""

from __future__ import annotations

import fcntl
import os
import sys
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


EXIT_UNRECORDED = 5
"""A worker's exit code for "roostd went away before it recorded this worker"."""


GO_FD_VAR = "ROOST_WORKER_GO_FD"
"""The worker's environment variable that names the pipe roostd says `go` on."""


def wait_for_go() -> None:
    """Wait until roostd has saved this worker's pid and start time (it writes `go` to the
    pipe named by GO_FD_VAR then); exit when it closed the pipe without (roostd died or
    could not save): a worker no record names must never run, roostd adopts only recorded
    ones. A worker started by hand (no variable) goes on: the lock still keeps it single."""
    fd_text = os.environ.pop(GO_FD_VAR, None)
    if fd_text is None or not fd_text.isdigit():
        return
    fd = int(fd_text)
    try:
        go = os.read(fd, 2)
    except OSError:
        go = b""
    os.close(fd)
    if go != b"go":
        print("roost worker: roostd did not record this worker; exiting", file=sys.stderr, flush=True)
        sys.exit(EXIT_UNRECORDED)


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


def kernel_holders(job_dir: Path) -> list[int]:
    """The pids that hold the job's lock as the kernel says (/proc/locks), never as the
    file says: a holder writes what it likes into the file, so only this may name a process
    to stop. Empty when nobody holds it (or /proc/locks cannot be read)."""
    try:
        st = os.stat(job_dir / LOCK_NAME, follow_symlinks=False)
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids: list[int] = []
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 11880 fe:00:2269404 0 EOF" (a blocked waiter has "->")
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == dev and fields[4].isdigit():
            pids.append(int(fields[4]))
    return pids
