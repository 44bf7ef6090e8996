"""Waiting on a condition, and looking at and killing processes (every layer).

`wait_until`, `pid_alive`, `is_pi` and `pi_under` are kit.procs' (the Lab waits
and finds processes with them); here beside the two ways tests kill one process.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil

from kit.procs import is_pi, pi_under, pid_alive, wait_until

__all__ = ["is_pi", "kill", "kill_and_wait", "pi_under", "pid_alive", "wait_until"]


def kill(pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Send `sig` and wait until the process is gone (or a zombie nobody reaped yet)."""
    os.kill(pid, sig)
    wait_until(lambda: not pid_alive(pid), 10, f"pid {pid} to die")


def kill_and_wait(pid: int) -> None:
    """SIGKILL `pid` (gone already is fine) and wait until it is gone or a zombie."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)

    def gone() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_until(gone, 10, f"pid {pid} to die")
