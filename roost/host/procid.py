"""Process identity: is a pid alive, and is it still the process we recorded?

A pid alone is not an identity (pids are reused), so roost records a process's start time
beside its pid (a worker in job.json, a lock holder in its lock file) and compares both.
Read from /proc as psutil's `create_time()` computes it (start ticks / USER_HZ + boot
time), because the TypeScript twin in `roost/extension/session_lock.ts` has to compute
the same number without psutil. That number moves with the boot time (`btime` in
/proc/stat, the wall clock minus the time since boot), which moves whenever the wall clock
is stepped: NTP, a virtual machine's clock set again after a pause or a snapshot's restore.
So the start ticks (clock ticks since boot, which never move) and the boot id are recorded
too, and compared when both sides have them (`matches`); the time is only the fallback.
Standard library only on Linux: the worker imports this before pi starts; psutil is the
fallback where there is no /proc.
"""

from __future__ import annotations

import os
import select
import signal
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# USER_HZ, the unit of /proc/<pid>/stat field 22. Node cannot ask sysconf, so both sides
# rely on Linux fixing it at 100 for userspace; psutil uses sysconf, which agrees.
CLK_TCK = 100
START_TOLERANCE = 0.05
"""Seconds. Two start times of one process computed from /proc with the same boot time agree
exactly; the tolerance only absorbs a float round trip through JSON. A stepped wall clock
moves them by whole seconds: hence the ticks (`matches`)."""


@dataclass(frozen=True)
class ProcessInfo:
    """What the system says about a pid that exists; start fields None when it may not be
    read (hidepid), ticks and boot id None without /proc."""

    start_time: float | None
    start_ticks: int | None
    boot_id: str | None
    zombie: bool


def boot_time() -> float:
    with open(PROC / "stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise OSError(f"no btime line in {PROC / 'stat'}")


def boot_id() -> str | None:
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def inspect(pid: int) -> ProcessInfo | None:
    """The process `pid`, or None when there is none."""
    if pid <= 0:
        return None
    if not (PROC / "self" / "stat").exists():
        return _inspect_psutil(pid)
    try:
        with open(PROC / str(pid) / "stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    except PermissionError:
        # hidepid: the process exists but we may not look.
        return ProcessInfo(None, None, None, False)
    # comm (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    fields = data[data.rindex(b")") + 2 :].split()
    state, ticks = fields[0], int(fields[19])  # fields 3 and 22
    return ProcessInfo(ticks / CLK_TCK + boot_time(), ticks, boot_id(), state in (b"Z", b"X"))


def _inspect_psutil(pid: int) -> ProcessInfo | None:
    """Fallback for systems without /proc (not Linux); the Node side has none."""
    import psutil

    try:
        p = psutil.Process(pid)
        return ProcessInfo(p.create_time(), None, None, p.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:
        return ProcessInfo(None, None, None, False)


def start_time(pid: int) -> float | None:
    """The start time of `pid` as psutil's `create_time()` computes it; None if no process."""
    info = inspect(pid)
    return None if info is None else info.start_time


def alive(pid: int) -> bool:
    """`pid` runs (a zombie, an exited child not yet reaped, does not)."""
    info = inspect(pid)
    return info is not None and not info.zombie


def live_start_time(pid: int) -> float | None:
    """When a live process started; None when it is gone, a zombie or unreadable (an
    orphan whose parent died is a zombie until init reaps it, and some inits never do)."""
    info = inspect(pid)
    return None if info is None or info.zombie else info.start_time


def live(pid: int) -> ProcessInfo | None:
    """The live process `pid` (None when it is gone or a zombie): what to record of it."""
    info = inspect(pid)
    return None if info is None or info.zombie else info


def identity(pid: int) -> tuple[float | None, int | None, str | None]:
    """What roost records beside the pid of a live process to know it again: its start time,
    its start ticks and its boot id (see `matches`); Nones when it is gone or a zombie."""
    info = live(pid)
    return (None, None, None) if info is None else (info.start_time, info.start_ticks, info.boot_id)


def matches(info: ProcessInfo, start: float, ticks: int | None = None, boot: str | None = None) -> bool:
    """`info` (a process as read now) is the one recorded as started at `start`, `ticks`
    clock ticks after the boot `boot`. The ticks and the boot id are compared when both sides
    have them: they never move, while `start` (like psutil's `create_time()`) holds the boot
    time read when it was recorded, and that moves whenever the wall clock is stepped."""
    if None not in (ticks, boot, info.start_ticks, info.boot_id):
        return info.boot_id == boot and info.start_ticks == ticks
    return info.start_time is not None and abs(info.start_time - start) < START_TOLERANCE


def same_process(
    pid: int | None, start: float | None, ticks: int | None = None, boot: str | None = None
) -> bool:
    """`pid` is still the live process that started at `start` (`ticks` after boot `boot`,
    when they were recorded: see `matches`)."""
    if not pid or start is None:
        return False
    info = live(pid)
    return info is not None and matches(info, start, ticks, boot)


def pin(
    pid: int | None, start: float | None, ticks: int | None = None, boot: str | None = None
) -> int | None:
    """A pidfd for `pid` if it is still the live process that started at `start` (and
    `ticks`, `boot`: see `matches`), else None. Signals sent through it can never reach a
    later process that reuses the pid."""
    if not pid or start is None:
        return None
    import os

    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if not same_process(pid, start, ticks, boot):  # checked after pinning: the pid cannot change now
        os.close(fd)
        return None
    return fd


def descends_from(
    pid: int,
    ancestor: int,
    ancestor_start: float,
    ticks: int | None = None,
    boot: str | None = None,
    *,
    depth: int = 8,
) -> bool:
    """`pid` is `ancestor` (the live process that started at `ancestor_start`, and `ticks`,
    `boot`: see `matches`) or one of its descendants, by the parent links in /proc (at most
    `depth` levels up)."""
    if not same_process(ancestor, ancestor_start, ticks, boot):
        return False
    for _ in range(depth):
        if pid == ancestor:
            return True
        try:
            with open(PROC / str(pid) / "stat", "rb") as f:
                data = f.read()
        except OSError:
            return False
        pid = int(data[data.rindex(b")") + 2 :].split()[1])  # field 4, the parent's pid
        if pid <= 1:
            return False
    return False


def stop_exact(
    pid: int | None, start: float | None, grace: float, ticks: int | None = None, boot: str | None = None
) -> bool:
    """SIGTERM the process `pid` that started at `start` (and `ticks`, `boot`: see
    `matches`; its group too when it leads one), SIGKILL after `grace` seconds; never a later
    process that reuses the pid. False when it was not running. Blocks at most `grace` + 2 s:
    for processes roostd does not watch."""
    fd = pin(pid, start, ticks, boot)
    if fd is None or pid is None:
        return False
    try:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
            try:
                if os.getpgid(pid) == pid:
                    os.killpg(pid, sig)
                else:
                    signal.pidfd_send_signal(fd, sig)
            except ProcessLookupError:
                return True
            if select.select([fd], [], [], wait)[0]:  # readable: it exited
                return True
        return True
    finally:
        os.close(fd)
