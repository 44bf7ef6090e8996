"""`roost daemon run|start|stop|status` (and `roostd`, which is `roost daemon run`)."""

from __future__ import annotations

import os
import sys
import time

import click

from roost import __version__
from roost.cli.common import daemon, fail, print_json

DAEMON_ARGV = [sys.executable, "-m", "roost.supervise"]
"""roostd in the foreground: run as a program, so the CLI never imports the daemon."""


@click.group("daemon")
def daemon_group() -> None:
    """Run, start, stop or inspect roostd."""


@daemon_group.command("run")
def daemon_run() -> None:
    """Run roostd in the foreground (for supervisord/systemd), logging to stderr."""
    sys.stdout.flush()
    # exec, not a child: the process supervisord or systemd started stays roostd (same pid,
    # signals, exit code).
    os.execv(sys.executable, DAEMON_ARGV)


@daemon_group.command("start")
def daemon_start() -> None:
    """Start roostd in the background; returns when its socket answers."""
    with daemon() as client:
        click.echo(f"roostd running (pid {client.request('status')['pid']})")


@daemon_group.command("stop")
@click.option("--jobs", is_flag=True, help="Also stop every running job first.")
def daemon_stop(jobs: bool) -> None:
    """Stop roostd. Workers keep running (the next roostd adopts them) unless --jobs."""
    from roost.client import DaemonUnavailable, ForeignDaemon, connect
    from roost.procid import alive as pid_alive

    try:
        client = connect(autostart=False)
    except ForeignDaemon as exc:
        fail(str(exc))
    except DaemonUnavailable:
        click.echo("roostd is not running")
        return
    with client:
        pid = client.request("status")["pid"]
        client.request("shutdown", jobs=jobs)
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    click.echo(f"roostd stopped (pid {pid})")


@daemon_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def daemon_status(as_json: bool) -> None:
    """Is roostd running? Exit 0 when it answers, 1 when not."""
    from roost import paths
    from roost.client import DaemonUnavailable, ForeignDaemon, connect
    from roost.protocol import ProtocolError

    try:
        with connect(autostart=False) as client:
            status = client.request("status", timeout=5)
    except ForeignDaemon as exc:
        fail(str(exc))
    except (DaemonUnavailable, ProtocolError, OSError):
        status = {"running": False, "pid": None, "socket": str(paths.socket_path()),
                  "version": __version__, "jobs": 0}
    if as_json:
        print_json(status)
    elif status["running"]:
        click.echo(f"roostd {status['version']} running, pid {status['pid']}, "
                   f"{status['jobs']} jobs, socket {status['socket']}")
    else:
        click.echo(f"roostd is not running (socket {status['socket']})")
    sys.exit(0 if status["running"] else 1)


def register(group: click.Group) -> None:
    group.add_command(daemon_group)
