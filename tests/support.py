"""Helpers every test layer shares: waiting on a condition, and looking at processes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TypeVar

import psutil

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    what: str | Callable[[], str] = "condition",
    interval: float = 0.05,
) -> T:
    """Poll `predicate` until it returns something truthy and return that (never a fixed
    sleep); AssertionError after `timeout` seconds naming `what` (a callable gives detail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g}s waiting for {detail}")
        time.sleep(interval)


def pid_alive(pid: int | None) -> bool:
    """A live process (an exited child not yet reaped is a zombie: not alive)."""
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return False


def is_pi(proc: psutil.Process) -> bool:
    """pi is a node program that renames itself (`process.title = "pi"`)."""
    with contextlib.suppress(psutil.Error):
        return proc.name() in ("pi", "node")
    return False
