"""Waiting on a condition, and finding processes: what the Lab, the tests and the demo share.

`processes_of(root)` is the one way to find what a lab left running (roostd, workers, pi,
their children); `kill_processes` ends them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Literal, TypeVar

import psutil

from roost.fakellm.sandbox import kill_processes as kill_processes
from roost.fakellm.sandbox import processes_of as processes_of
from roost.host import procid

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T | Literal[False] | None],
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
    return pid is not None and procid.alive(pid)


def is_pi(proc: psutil.Process) -> bool:
    """pi is a node program that renames itself (`process.title = "pi"`)."""
    with contextlib.suppress(psutil.Error):
        return proc.name() in ("pi", "node")
    return False


def pi_under(pid: int) -> list[psutil.Process]:
    """The live pi (node) processes under `pid`, at any depth, not counting a pi's own
    children: pi's TUI forks helpers (`tmux`, a clipboard tool) that are named `pi` until
    they exec."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    pis = [k for k in kids if is_pi(k) and pid_alive(k.pid)]
    pids = {p.pid for p in pis}
    tops = []
    for proc in pis:
        with contextlib.suppress(psutil.Error):
            if proc.ppid() not in pids:
                tops.append(proc)
    return tops
