"""The `roost` command line. Every command but `daemon run|stop|status` starts roostd when
it is not running. Errors go to stderr with a non-zero exit; `--json` output is stable
(README: JSON output).

Start-up is part of every command's wall time (the target: `roost ls --json`, `reply` and
`run` within 80 ms with roostd up), so this module imports only click, the standard library
and the light `views` at the top. The client, the protocol and the socket are imported by
`daemon()` (`roost --help` never loads them); rich, the mailbox package, textual and the
daemon's modules by the commands (and view functions) that use them.
`benchmarks/cli_bench.py` measures it, including which heavy modules each command loads.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from roost import __version__
from roost.cli import views  # light: it imports rich and the mailbox package where used

if TYPE_CHECKING:
    from roost.client import Client


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"roost: {message}", err=True)
    sys.exit(code)


@contextmanager
def daemon(autostart: bool = True) -> Iterator[Client]:
    from roost.client import DaemonUnavailable, connect
    from roost.protocol import ProtocolError, RequestError

    try:
        client = connect(autostart=autostart)
    except (DaemonUnavailable, ProtocolError, OSError) as exc:
        fail(str(exc))
    try:
        yield client
    except RequestError as exc:
        fail(exc.message, 2 if exc.code in ("refused", "not_found") else 1)
    except (DaemonUnavailable, ConnectionError) as exc:
        fail(f"lost the connection to roostd: {exc}")
    finally:
        client.close()


def print_json(data: Any) -> None:
    import json

    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="roost")
def cli() -> None:
    """roost: supervised background pi sessions that talk to each other."""


# -- daemon ------------------------------------------------------------------------------
@cli.group()
def daemon_group() -> None:
    """Run, start, stop or inspect roostd."""


cli.add_command(daemon_group, name="daemon")


@daemon_group.command("run")
def daemon_run() -> None:
    """Run roostd in the foreground (for supervisord/systemd), logging to stderr."""
    from roost.supervise.daemon import main as daemon_main

    sys.exit(daemon_main())


@daemon_group.command("start")
def daemon_start() -> None:
    """Start roostd in the background; returns when its socket answers."""
    with daemon() as client:
        click.echo(f"roostd running (pid {client.request('status')['pid']})")


@daemon_group.command("stop")
@click.option("--jobs", is_flag=True, help="Also stop every running job first.")
def daemon_stop(jobs: bool) -> None:
    """Stop roostd. Workers keep running (the next roostd adopts them) unless --jobs."""
    from roost.client import DaemonUnavailable, connect, pid_alive

    try:
        client = connect(autostart=False)
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
    from roost.client import DaemonUnavailable, connect
    from roost.protocol import ProtocolError

    try:
        with connect(autostart=False) as client:
            status = client.request("status", timeout=5)
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


# -- jobs --------------------------------------------------------------------------------
@cli.command(context_settings={"ignore_unknown_options": False})
@click.option("--name", help="A name for the job (default: from the task).")
@click.option("--cwd", type=click.Path(file_okay=False), help="Working directory (default: .).")
@click.option("--model", help="Model as provider/id.")
@click.option("--thinking", help="Thinking level: off, minimal, low, medium, high, xhigh.")
@click.option("--shell", is_flag=True, help="Run a shell command instead of pi: roost run --shell -- CMD ...")
@click.argument("task", nargs=-1, required=True)
def run(name: str | None, cwd: str | None, model: str | None, thinking: str | None,
        shell: bool, task: tuple[str, ...]) -> None:
    """Start a pi job with TASK (or a shell job); prints its id."""
    directory = str(Path(cwd or os.getcwd()).absolute())
    args: dict[str, Any] = {"name": name, "cwd": directory}
    if shell:
        args.update(shell=True, command=list(task))
    else:
        args.update(task=" ".join(task), model=model, thinking=thinking)
    with daemon() as client:
        result = client.request("run", **args)
    click.echo(result["id"])


@cli.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of JobRow.")
@click.option("--tree", is_flag=True, help="Show children under their parents.")
@click.option("--group", type=click.Choice(["dir", "state"]), default="dir", show_default=True)
def ls(as_json: bool, tree: bool, group: str) -> None:
    """List jobs."""
    with daemon() as client:
        rows = client.request("list")["jobs"]
    if as_json:
        print_json(views.tree_order(rows) if tree else rows)
        return
    views.print_table(rows, group=group, tree=tree)


@cli.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True)
def show(job: str, as_json: bool) -> None:
    """One job in detail."""
    with daemon() as client:
        row = client.request("show", job=job)["job"]
    if as_json:
        print_json(row)
    else:
        views.print_detail(row)


@cli.command()
@click.argument("job")
@click.argument("text", nargs=-1, required=True)
def reply(job: str, text: tuple[str, ...]) -> None:
    """Send a user reply: prints delivered, queued, started or stopped."""
    with daemon() as client:
        result = client.request("reply", job=job, text=" ".join(text))
    click.echo(result["status"])
    if result["status"] == "stopped":
        click.echo(f"roost: job {result['id']} is stopped; `roost start {result['id']}` first",
                   err=True)
        sys.exit(2)


@cli.command()
@click.argument("job")
@click.option("--timeout", type=float, default=None, help="Give up after S seconds (exit 1).")
def wait(job: str, timeout: float | None) -> None:
    """Block until the job's current run has settled."""
    with daemon() as client:
        # The daemon answers `settled: false` at `timeout`; our socket waits a little longer.
        result = client.call("wait", {"job": job, "timeout": timeout},
                             None if timeout is None else timeout + 30)
    row = result["row"]
    if not result["settled"]:
        click.echo(f"roost: timed out; job {row['id']} is {row['state']}", err=True)
        sys.exit(1)
    click.echo(row["state"])


@cli.command()
@click.argument("job")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new entries.")
@click.option("-v", "--verbose", is_flag=True, help="Do not shorten tool calls and results.")
def logs(job: str, follow: bool, verbose: bool) -> None:
    """The job's transcript (agent messages framed as such); shell jobs: their output."""
    with daemon() as client:
        row = client.request("show", job=job)["job"]
    views.print_logs(row, follow=follow, verbose=verbose)


@cli.command()
@click.argument("job")
def stop(job: str) -> None:
    """Stop a job (it is never woken by messages; `roost start` wakes it)."""
    with daemon() as client:
        result = client.request("stop", job=job)
    click.echo(f"{result['id']} stopped")


@cli.command()
@click.argument("job")
def start(job: str) -> None:
    """Start a stopped or ended job again."""
    with daemon() as client:
        result = client.request("start", job=job)
    click.echo(f"{result['id']} {result['state']}")


@cli.command()
@click.argument("job")
def rm(job: str) -> None:
    """Stop and remove a job (its directory, mailbox and session file)."""
    with daemon() as client:
        result = client.request("rm", job=job)
    click.echo(f"{result['id']} removed")


@cli.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True)
@click.option("--all", "show_all", is_flag=True, help="Acknowledged items too.")
@click.option("--path", "show_path", is_flag=True, help="Print the mailbox directory only.")
def mailbox(job: str, as_json: bool, show_all: bool, show_path: bool) -> None:
    """The job's pending (and with --all acknowledged) mailbox items."""
    with daemon() as client:
        row = client.request("show", job=job)["job"]
    views.print_mailbox(row, as_json=as_json, show_all=show_all, show_path=show_path)


@cli.command()
@click.argument("job")
def attach(job: str) -> None:
    """Open the job's session in the interactive pi; back to the background on quit."""
    import signal
    import subprocess

    from roost import paths

    with daemon() as client:
        row = client.request("show", job=job)["job"]
        if row["kind"] != "pi":
            fail(f"job {row['id']} is a shell job: nothing to attach to", 2)
        if row["status"] not in ("", "attached") or row["state"] in ("running", "starting"):
            name = views.printable(row["name"])
            click.echo(f"waiting for the current run of {row['id']} ({name}) to settle…",
                       err=True)
        attached = client.request("attach", job=row["id"])
    try:
        argv = paths.pi_command() + ["--session", attached["session"],
                                     "-e", str(paths.extension_path())]
    except FileNotFoundError as exc:
        _detach(row["id"])
        fail(str(exc))
    env = dict(os.environ, ROOST_ATTACH_JOB=row["id"])
    cwd = attached["cwd"] if os.path.isdir(attached["cwd"]) else None
    # Ctrl+C belongs to pi while it runs: the job must not go back to the background
    # under a pi that still holds the session (a no-op handler, unlike SIG_IGN, is not
    # inherited by pi).
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        code = subprocess.call(argv, env=env, cwd=cwd)
    finally:
        outcome = _detach(row["id"])
    click.echo(f"{row['id']} is back in the background ({outcome})", err=True)
    sys.exit(code)


def _detach(job_id: str) -> str:
    with daemon() as client:
        return str(client.request("detach", job=job_id)["outcome"])


@cli.command()
def view() -> None:
    """The live agent view: the tree of sessions, states, status and questions."""
    from roost.cli.live import run_view

    run_view()


@cli.command()
@click.option("--uninstall", "remove", is_flag=True, help="Remove the installed extension.")
@click.option("--print-path", is_flag=True, help="Print the install directory only.")
def install(remove: bool, print_path: bool) -> None:
    """Install the roost pi extension where pi loads it (<agent dir>/extensions/roost/)."""
    from roost.cli import install as installer

    directory = installer.install_dir()
    if print_path:
        click.echo(directory)
        return
    try:
        if remove:
            removed = installer.uninstall(directory)
            click.echo(f"removed {directory}" if removed else f"not installed ({directory})")
            return
        outcome = installer.install(directory)
    except (installer.InstallError, OSError) as exc:
        fail(str(exc))
    if not outcome.written:
        click.echo(f"up to date: {directory}")
    else:
        verb = "installed" if outcome.created else "updated"
        click.echo(f"{verb} the roost pi extension in {directory} ({', '.join(outcome.written)})")
        click.echo("pi loads it at start-up (in a running pi: /reload)")


@cli.command()
@click.option("--keep", is_flag=True, help="Leave the demo's jobs and daemon running.")
def demo(keep: bool) -> None:
    """The showcase: real pi against roost's scripted local model, no API key."""
    from roost.demo import run_demo

    sys.exit(run_demo(keep=keep))


def main() -> None:
    cli(prog_name="roost")


def roostd_main() -> None:
    from roost.supervise.daemon import main as daemon_main

    sys.exit(daemon_main())


if __name__ == "__main__":
    main()
