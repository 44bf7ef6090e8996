"""`roost daemon run|start|stop|status` (and `roostd`, which is `roost daemon run`)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from roost import __version__
from roost.cli.common import daemon, fail, print_json
from roost.cli.groups import Group

DAEMON_ARGV = [sys.executable, "-m", "roost.supervise"]
"""roostd in the foreground: run as a program, so the CLI never imports the daemon."""


@click.group("daemon", cls=Group)
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
@click.option(
    "--jobs",
    is_flag=True,
    help="Also stop every running job first (their "
    "workers and pi; found by their job records when roostd is not running).",
)
def daemon_stop(jobs: bool) -> None:
    """Stop roostd. Workers keep running (the next roostd adopts them) unless --jobs."""
    from roost.host.procid import alive as pid_alive
    from roost.wire.client import DaemonUnavailable, ForeignDaemon, connect

    try:
        client = connect(autostart=False)
    except ForeignDaemon as exc:
        fail(str(exc))
    except DaemonUnavailable:
        if not jobs:
            click.echo("roostd is not running")
            _say_left_running(live_workers())
            return
        stopped = stop_workers(live_workers())
        click.echo(
            f"roostd is not running; stopped {_workers(len(stopped))}"
            + (f" ({', '.join(stopped)})" if stopped else "")
        )
        return
    with client:
        pid = client.request("status")["pid"]
        client.request("shutdown", jobs=jobs)
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    click.echo(f"roostd stopped (pid {pid})")
    _say_left_running(live_workers())


def _workers(count: int) -> str:
    return f"{count} worker" + ("" if count == 1 else "s")


def _say_left_running(found: list[tuple[Any, int, float]]) -> None:
    if found:
        click.echo(
            f"{_workers(len(found))} left running, with their jobs "
            f"({', '.join(record.id for record, _, _ in found)}): the next roostd "
            "adopts them; `roost daemon stop --jobs` stops them"
        )


def live_workers() -> list[tuple[Any, int, float]]:
    """The jobs whose recorded worker is alive: (record, pid, start time), the pid checked
    against its recorded start time as roostd does before adopting it (a reused pid is
    some other process)."""
    from roost.host import paths
    from roost.host.procid import same_process
    from roost.job.record import load_record

    found = []
    for path in sorted(paths.jobs_dir().glob("*/job.json")):
        try:
            record = load_record(path)
        except (OSError, ValueError):
            continue
        process = record.process
        pid, start = process.worker_pid, process.worker_start
        ticks, boot = process.worker_ticks, process.worker_boot
        if pid is not None and start is not None and same_process(pid, start, ticks, boot):
            found.append((record, pid, start))
    return found


def stop_workers(found: list[tuple[Any, int, float]]) -> list[str]:
    """Stop these workers (and their pi: the worker leads its process group) as roostd's
    `shutdown --jobs` does, with no roostd: each job's record says `stopped` after, so the
    next roostd neither adopts nor restarts it. The ids of the jobs stopped."""
    from roost.config import load_settings
    from roost.host.procid import stop_exact
    from roost.job.states import JobState

    grace = load_settings().stopTimeoutSeconds
    stopped = []
    for record, pid, start in found:
        if not stop_exact(pid, start, grace, record.process.worker_ticks, record.process.worker_boot):
            continue  # gone meanwhile, or no longer that process
        record.process.worker_pid = None
        record.process.worker_start = None
        record.process.worker_ticks = record.process.worker_boot = None
        if record.state not in (JobState.FAILED, JobState.STOPPED):
            record.state = JobState.STOPPED
            record.apply({"status": "", "busy": False, "dialog": False})
        record.save()
        stopped.append(record.id)
    return stopped


@daemon_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def daemon_status(as_json: bool) -> None:
    """Is roostd running? Exit 0 when it answers, 1 when not."""
    from roost.host import paths
    from roost.wire.client import DaemonUnavailable, ForeignDaemon, connect
    from roost.wire.protocol import ProtocolError

    try:
        with connect(autostart=False) as client:
            status = client.request("status", timeout=5)
    except ForeignDaemon as exc:
        fail(str(exc))
    except (DaemonUnavailable, ProtocolError, OSError):
        status = {
            "running": False,
            "pid": None,
            "socket": str(paths.socket_path()),
            "version": __version__,
            "jobs": 0,
        }
    if as_json:
        print_json(status)
    elif status["running"]:
        click.echo(
            f"roostd {status['version']} running, pid {status['pid']}, "
            f"{status['jobs']} jobs, socket {status['socket']}"
        )
    else:
        click.echo(f"roostd is not running (socket {status['socket']})")
    sys.exit(0 if status["running"] else 1)


def register(group: click.Group) -> None:
    group.add_command(daemon_group)
