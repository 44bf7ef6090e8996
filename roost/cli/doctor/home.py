"""The doctor's checks of roostd and ROOST_HOME: roostd answers (its version this CLI's; a pid
file whose roostd does not answer), ROOST_HOME 0700 and the socket 0600, both the user's
(anyone who reaches the socket can run jobs as this user). roostd is asked, never started."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from roost.cli.doctor.checklist import Report
from roost.cli.doctor.disk import existing_parent, write_problem
from roost.host import paths


def check_daemon(report: Report) -> None:
    from roost import __version__
    from roost.wire.client import DaemonUnavailable, ForeignDaemon, connect
    from roost.wire.protocol import ProtocolError

    socket = paths.socket_path()
    try:
        with connect(autostart=False) as client:
            status = client.request("status", timeout=5)
    except ForeignDaemon as exc:
        report.add("roostd", "fail", str(exc), "point ROOST_HOME at a folder of your own")
        return
    except (DaemonUnavailable, ProtocolError, OSError):
        status = None
    if status is None:
        pid = _live_roostd_pid()
        if pid is not None:
            report.add(
                "roostd",
                "warn",
                f"pid {pid} holds {paths.pid_file()} but nothing answers on {socket}",
                f"see {paths.roost_home() / 'roostd.log'}; if roostd {pid} is stuck, kill {pid}",
            )
        else:
            report.add("roostd", "ok", f"not running (roost commands start it; socket {socket})")
        return
    detail = f"running, pid {status.get('pid')}, {status.get('jobs')} jobs, socket {status.get('socket')}"
    if status.get("version") != __version__:
        report.add(
            "roostd",
            "warn",
            f"{detail}; it is roost {status.get('version')}, this CLI {__version__}",
            "roost daemon stop, then roost daemon start (jobs keep running and are adopted)",
        )
    else:
        report.add("roostd", "ok", detail)


def _live_roostd_pid() -> int | None:
    try:
        pid = int(paths.pid_file().read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if any(b"roost" in part for part in cmdline) else None  # not a reused pid


def check_home(report: Report) -> None:
    """ROOST_HOME 0700 and the socket 0600, both the user's: anyone who reaches the socket
    can run jobs as this user."""
    import stat

    from roost.host.trusted import home_problem

    home = paths.roost_home()
    if problem := home_problem(home):  # before anything is written there
        report.add("ROOST_HOME", "fail", problem, "set ROOST_HOME to a folder of your own")
        return
    if not os.path.lexists(home):
        parent = existing_parent(home)
        problem = write_problem(parent)
        if problem:
            report.add("ROOST_HOME", "fail", f"{home} does not exist and cannot be made: {problem}", HOME_FIX)
        else:
            report.add("ROOST_HOME", "ok", f"{home} does not exist yet (made 0700 on first use)")
    elif os.path.isdir(home) and (problem := write_problem(home)):
        report.add("ROOST_HOME", "fail", problem, HOME_FIX)
    else:
        _private(
            report,
            "ROOST_HOME",
            home,
            0o700,
            stat.S_ISDIR,
            "a directory",
            f"move {home} away or set ROOST_HOME elsewhere",
        )
    socket = paths.socket_path()
    if os.path.lexists(socket):  # none: roostd is not running (the roostd check says so)
        _private(
            report,
            "socket",
            socket,
            0o600,
            stat.S_ISSOCK,
            "a socket",
            f"stop roostd, remove {socket}, start roostd",
        )


HOME_FIX = "free space there or remount it read-write, or set ROOST_HOME elsewhere"


def _private(
    report: Report, name: str, path: Path, mode: int, is_kind: Any, kind: str, fix_kind: str
) -> None:
    import stat

    try:
        info = os.lstat(path)
    except OSError as exc:
        report.add(name, "fail", f"{path}: {exc}", "check the path and its parents")
        return
    uid = os.getuid()
    has = stat.S_IMODE(info.st_mode)
    if not is_kind(info.st_mode):
        report.add(name, "fail", f"{path} is not {kind}", fix_kind)
    elif info.st_uid != uid:
        report.add(
            name,
            "fail",
            f"{path} belongs to uid {info.st_uid}, not you ({uid})",
            "set ROOST_HOME to a directory of your own",
        )
    elif has != mode:
        report.add(
            name, "fail", f"{path} has mode {has:04o}; others could reach roostd", f"chmod {mode:o} {path}"
        )
    else:
        report.add(name, "ok", f"{path} ({mode:04o}, yours)")
