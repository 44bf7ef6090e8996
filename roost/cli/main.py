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
from roost.cli import usage as usage_cli  # roost budget, roost usage, run --budget
from roost.cli import views  # light: it imports rich and the mailbox package where used

if TYPE_CHECKING:
    from roost.client import Client


# Exit codes, the same for every command (README: Exit codes).
REFUSED = 1
"""Understood, but not done: the job's state or kind, a limit, a conflict, a failure."""
USAGE = 2
"""A bad command line (an unknown option, a bad or missing value) or an unknown job."""
_EXIT_OF_ERROR = {"bad_request": USAGE, "not_found": USAGE}
"""roostd's error codes that are usage errors; every other code is a refusal."""


def fail(message: str, code: int = REFUSED) -> NoReturn:
    """One line on stderr, then exit `code`."""
    click.echo(f"roost: {message}", err=True)
    sys.exit(code)


def usage_error(message: str) -> NoReturn:
    fail(message, USAGE)


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
        fail(exc.message, _EXIT_OF_ERROR.get(exc.code, REFUSED))
    except (DaemonUnavailable, ConnectionError) as exc:
        fail(f"lost the connection to roostd: {exc}")
    finally:
        client.close()


def print_json(data: Any) -> None:
    import json

    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    # Light: package.json reads only (pi and node are not run), no heavy module.
    from roost.cli.doctor import version_text

    click.echo(version_text())
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Exit codes: 0 done, 1 refused or failed, 2 a usage error or an unknown "
                    "job (README: Exit codes).")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show roost's and pi's versions and exit.")
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
    from roost.client import DaemonUnavailable, connect
    from roost.procs import alive as pid_alive

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
@click.option("--name", help="A name for the job, not another job's (default: from the task).")
@click.option("--cwd", type=click.Path(file_okay=False), help="Working directory (default: .).")
@click.option("--model", help="Model as provider/id.")
@click.option("--thinking", help="Thinking level: off, minimal, low, medium, high, xhigh.")
@click.option("--agent", help="Run as this agent definition (roost agents ls).")
@click.option("--shell", is_flag=True, help="Run a shell command instead of pi: roost run --shell -- CMD ...")
@click.option("-f", "--file", "task_file", type=click.Path(dir_okay=False, allow_dash=True),
              help="Read the task from this file (`-`: stdin), for a task too big for "
                   "one argument (128 KiB).")
@usage_cli.run_options
@click.option("--worktree", is_flag=True,
              help="Run in a new git worktree on a new branch (roost diff/merge/rm JOB).")
@click.option("--branch", help="With --worktree: the new branch (default roost/<name>-<id>).")
@click.option("--base", help="With --worktree: the commit to start from (default HEAD).")
@click.argument("task", nargs=-1)
def run(name: str | None, cwd: str | None, model: str | None, thinking: str | None,
        agent: str | None, shell: bool, task: tuple[str, ...], task_file: str | None = None,
        budget: float | None = None, budget_tokens: int | None = None,
        max_turns: int | None = None, tree_budget: float | None = None, worktree: bool = False,
        branch: str | None = None, base: str | None = None) -> None:
    """Start a pi job with TASK (or a shell job); prints its id.

    TASK is the words after the options, `-` to read it from stdin, or -f FILE."""
    directory = str(Path(cwd or os.getcwd()).absolute())
    args: dict[str, Any] = {"name": name, "cwd": directory}
    if (branch or base) and not worktree:
        usage_error("--branch and --base need --worktree")
    if shell:
        if agent:
            usage_error("--agent is for pi jobs, not --shell")
        if budget or budget_tokens or max_turns or tree_budget:
            usage_error("budgets are for pi jobs, not --shell")
        if worktree:
            usage_error("--worktree is for pi jobs, not --shell")
        if task_file:
            usage_error("-f is for a pi job's task, not --shell")
        if not task:
            usage_error("give the command: roost run --shell -- CMD ...")
        args.update(shell=True, command=list(task))
    else:
        args.update(task=_task_text(task, task_file), model=model, thinking=thinking,
                    agent=agent)
        args.update(usage_cli.run_args(budget, budget_tokens, max_turns, tree_budget))
        if worktree:
            args.update(worktree=True, branch=branch, base=base)
    from roost.jobenv import caller_env

    args["env"] = caller_env()  # the job runs with it (README: A job's environment)
    with daemon() as client:
        result = client.request("run", **args)
    click.echo(result["id"])
    from roost.paths import agent_dir

    if not shell and result.get("agentDir") not in (None, str(agent_dir())):
        click.echo(f"roost: note: the job's pi uses roostd's agent dir {result['agentDir']}, "
                   f"not {agent_dir()} (PI_CODING_AGENT_DIR here); to change it, "
                   "`roost daemon stop` and run again from this shell", err=True)


def _task_text(words: tuple[str, ...], task_file: str | None) -> str:
    """The task: the words, stdin (`-`), or a file (-f FILE, `-f -` for stdin)."""
    if task_file is None and words != ("-",):
        if not words:
            usage_error("give a TASK, `-` to read it from stdin, or -f FILE")
        return " ".join(words)
    if task_file is not None and words:
        usage_error("give the task as words or with -f FILE, not both")
    source = task_file or "-"
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        from roost.mailbox.item import MAX_ITEM_BYTES  # the task is the first mailbox item

        if len(data) >= MAX_ITEM_BYTES:
            usage_error(f"the task in {source} is {len(data):,} bytes: a task must fit in one "
                        f"mailbox item ({MAX_ITEM_BYTES // 1024} KiB)")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        usage_error(f"the task in {'stdin' if source == '-' else source} is not UTF-8 text "
                    f"({exc.reason} at byte {exc.start})")
    except OSError as exc:
        usage_error(f"cannot read the task from {source}: {exc.strerror or exc}")


@cli.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of JobRow.")
@click.option("--tree", is_flag=True, help="Show children under their parents.")
@click.option("--group", type=click.Choice(["dir", "state"]), default="dir", show_default=True,
              help="Group the rows by working directory or by state.")
@click.option("--wide", is_flag=True,
              help="Every column in full, never shortened (as in a pipe).")
def ls(as_json: bool, tree: bool, group: str, wide: bool) -> None:
    """List jobs.

    \b
    In a terminal the table fits its width: the least useful columns are
    shortened or hidden first (said below the table), the id and STATE never,
    and SUMMARY / QUESTION wraps. In a pipe, or with --wide, nothing is cut or
    wrapped: one job per line.
    \b
    META:  ✉N        N pending mailbox items (replies and agent messages)
           @AGENT    runs as this agent definition (roost agents ls)
           ⎇ BRANCH  works in its own git worktree on this branch
           ↳ NAME    (--group state) a child of the job NAME
    A ↳ before a name (grouped by directory) marks a child under its parent;
    a question starts with `?`; COST `—` means the model has no prices."""
    with daemon() as client:
        rows = client.request("list")["jobs"]
    if as_json:
        print_json(views.tree_order(rows) if tree else rows)
        return
    views.print_table(rows, group=group, tree=tree, wide=wide)


@cli.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JobRow with its detail fields (README: JSON output).")
@click.option("--full", is_flag=True, help="Show a long task whole (default: its start).")
def show(job: str, as_json: bool, full: bool) -> None:
    """One job in detail."""
    with daemon() as client:
        row = client.request("show", job=job)["job"]
    if as_json:
        print_json(row)
    else:
        if not full:
            row["task"] = views.short_task(row.get("task"), row["id"])
        views.print_detail(row)


@cli.command()
@click.argument("job")
@click.argument("text", nargs=-1, required=True)
def reply(job: str, text: tuple[str, ...]) -> None:
    """Send a user reply: prints delivered, queued, started or stopped."""
    with daemon() as client:
        result = client.request("reply", job=job, text=" ".join(text))
    click.echo(result["status"])
    if result.get("why"):  # queued on a failed job: nothing runs until it is started again
        click.echo(f"roost: job {result['id']} failed: {views.printable(result['why'])}; the "
                   f"reply waits in its mailbox (`roost start {result['id']}` delivers it)",
                   err=True)
    if result["status"] == "stopped":
        fail(f"job {result['id']} is stopped; `roost start {result['id']}` first")


WAIT_FOR = ("needs_input", "settled", "done", "failed")


@cli.command()
@click.argument("jobs", nargs=-1, required=True, metavar="JOB...")
@click.option("--timeout", type=float, default=None, help="Give up after S seconds (exit 1).")
@click.option("--any", "mode", flag_value="any", help="Until the first of the jobs gets there.")
@click.option("--all", "mode", flag_value="all", help="Until every one of the jobs is there.")
@click.option("--for", "until", type=click.Choice(WAIT_FOR), default=None,
              help="What to wait for with --any/--all (default: settled).")
def wait(jobs: tuple[str, ...], timeout: float | None, mode: str | None,
         until: str | None) -> None:
    """Block until the job's current run has settled; with --any/--all, until the first or
    every one of the jobs reaches --for (prints `ID NAME STATE` per job; exit 0, 1 on
    timeout, 2 for an unknown or removed job)."""
    if mode is None and until is None and len(jobs) == 1:
        _wait_one(jobs[0], timeout)
        return
    if mode is None:
        if len(jobs) > 1:
            usage_error("several jobs: say --any or --all")
        mode = "any"
    with daemon() as client:
        result = client.call("wait_jobs", {"jobs": list(jobs), "until": until or "settled",
                                           "mode": mode, "timeout": timeout},
                             None if timeout is None else timeout + 30)
    rows = result["jobs"] if mode == "all" or not result["jobs"] else result["jobs"][:1]
    for row in rows:
        click.echo(f"{row['id']} {row['name']} {row['state']}")
    if not result["reached"]:
        waiting = ", ".join(f"{r['id']} ({r['state']})" for r in result["waiting"])
        click.echo(f"roost: timed out; still waiting for {waiting}", err=True)
        sys.exit(1)


def _wait_one(job: str, timeout: float | None) -> None:
    with daemon() as client:
        # The daemon answers `settled: false` at `timeout`; our socket waits a little longer.
        result = client.call("wait", {"job": job, "timeout": timeout},
                             None if timeout is None else timeout + 30)
    row = result["row"]
    if not result["settled"]:
        click.echo(f"roost: timed out; job {row['id']} is {row['state']}", err=True)
        sys.exit(1)
    click.echo(row["state"])
    if row["state"] == "failed" and row.get("summary"):  # why, and what to do (stdout stays one word)
        click.echo(f"roost: job {row['id']} failed: {views.printable(row['summary'])}", err=True)


@cli.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they happen.")
@click.option("--since", metavar="SEQ|TIME",
              help="From after this seq, or from this UTC time (2026-11-30T11:20).")
@click.option("--type", "types", multiple=True, metavar="T",
              help="Only these types (repeatable; `job.` matches every job.* type).")
@click.option("--job", help="Only events of this job (id or name).")
@click.option("--json", "as_json", is_flag=True, help="The log's JSON lines as they are.")
def events(follow: bool, since: str | None, types: tuple[str, ...], job: str | None,
           as_json: bool) -> None:
    """roostd's event log ($ROOST_HOME/events.jsonl); --follow streams new events."""
    from roost.cli.eventviews import print_events

    try:
        print_events(follow, since, types, job, as_json)
    except KeyboardInterrupt:
        sys.exit(130)


@cli.command()
@click.option("--enable", "action", flag_value="enable",
              help="Add notify-send hooks for needs_input, failed and gave_up.")
@click.option("--disable", "action", flag_value="disable", help="Remove them.")
@click.option("--send", "action", flag_value="send",
              help="(the hook) Read one event as JSON on stdin and notify.")
def notify(action: str | None) -> None:
    """Desktop notifications (notify-send) for jobs that need you."""
    from roost.cli import notify as notifier

    if action is None:
        usage_error("say --enable, --disable or --send")
    try:
        if action == "send":
            sys.exit(notifier.send(sys.stdin.read()))
        click.echo(notifier.enable() if action == "enable" else notifier.disable())
    except notifier.NotifyError as exc:
        fail(str(exc))


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
    """Start a stopped or ended job again, with this command's environment."""
    from roost.jobenv import caller_env

    with daemon() as client:
        result = client.request("start", job=job, env=caller_env())
    click.echo(f"{result['id']} {result['state']}")


@cli.command()
@click.argument("job")
@click.option("--force", is_flag=True,
              help="Also when its worktree has uncommitted changes (they are lost); with "
                   "--delete-branch, also when the branch has unmerged commits.")
@click.option("--delete-branch", is_flag=True,
              help="Also delete its worktree's branch (only when merged, unless --force).")
def rm(job: str, force: bool, delete_branch: bool) -> None:
    """Stop and remove a job (its directory, mailbox and session file, and its worktree;
    the worktree's branch is kept unless --delete-branch)."""
    with daemon() as client:
        result = client.request("rm", job=job, force=force, deleteBranch=delete_branch)
    click.echo(f"{result['id']} removed")
    for note in result.get("worktree") or ():
        click.echo(f"  {note}")


@cli.command()
@click.argument("job")
@click.option("--stat", is_flag=True, help="A diffstat instead of the patch.")
def diff(job: str, stat: bool) -> None:
    """The changes of a job in a worktree against its base (uncommitted work included)."""
    from roost.worktrees import git

    with daemon() as client:
        row = client.request("show", job=job)["job"]
    worktree = row.get("worktree")
    if not worktree:
        fail(f"job {row['id']} has no worktree (roost run --worktree, roost_spawn worktree)")
    if not os.path.isdir(worktree["path"]):
        fail(f"the worktree of job {row['id']} ({worktree['path']}) is gone")
    from roost.worktrees import CHECKOUT_MARKER

    if (Path(row["dir"]) / CHECKOUT_MARKER).exists():
        fail(f"the worktree of job {row['id']} is still being written (the job is starting); "
             "try again in a moment")
    try:
        click.echo(git.diff(worktree["path"], worktree["base"], stat=stat,
                            color=sys.stdout.isatty()), nl=False)
    except git.GitError as exc:
        fail(str(exc))


@cli.command()
@click.argument("job")
@click.option("--into", metavar="BRANCH",
              help="The branch to merge into (default: the branch checked out where the "
                   "job was started).")
@click.option("--squash", is_flag=True, help="One commit instead of a merge commit.")
def merge(job: str, into: str | None, squash: bool) -> None:
    """Merge a job's worktree branch (refused while it runs, into a checkout with
    uncommitted changes, or on a conflict: then nothing changes)."""
    with daemon() as client:
        result = client.request("merge", job=job, into=into, squash=squash, timeout=300)
    if result["merged"]:
        how = "squashed into" if squash else "merged into"
        click.echo(f"{result['branch']} {how} {result['into']} ({result['commit'][:12]})")
    else:
        click.echo(f"{result['branch']}: {result['outcome']} ({result['into']})")
    if result.get("uncommitted"):
        click.echo(f"note: the worktree has {result['uncommitted']} uncommitted changes; "
                   "they were not merged (roost diff shows them)", err=True)


@cli.command()
@click.option("--force", is_flag=True, help="Also orphaned worktrees with uncommitted changes.")
def gc(force: bool) -> None:
    """Remove the worktrees of removed jobs and prune git's worktree records."""
    with daemon() as client:
        result = client.request("gc", force=force, timeout=300)
    for path in result["removed"]:
        click.echo(f"removed {path}")
    for line in result["kept"]:
        click.echo(f"kept {line}")
    click.echo(f"pruned the worktree records of {len(result['pruned'])} repositories")


@cli.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list of {state, seq, kind, from, text, created, extra}.")
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
            fail(f"job {row['id']} is a shell job: nothing to attach to")
        if row["status"] not in ("", "attached") or row["state"] in ("running", "starting"):
            name = views.printable(row["name"])
            click.echo(f"waiting for the current run of {row['id']} ({name}) to settle…",
                       err=True)
        attached = client.request("attach", job=row["id"])
    try:
        from roost.pi.locate import find_pi

        argv = find_pi().argv + ["--session", attached["session"],
                                 "-e", str(paths.extension_path())]
        # The job's agent definition holds in the foreground too (same tools and prompt).
        definition = row.get("agentDefinition") or {}
        if definition.get("tools") is not None:
            argv += ["--tools", ",".join(definition["tools"])]
        if definition.get("prompt"):
            from roost.worker.launch import prompt_file

            argv += ["--append-system-prompt", str(prompt_file(row, definition["prompt"]))]
    except FileNotFoundError as exc:  # PiNotFound
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
        from roost import writers

        # What this pi wrote is roost's: not a sign of another writer (roost.writers).
        writers.remember(attached["session"], str(paths.job_dir(row["id"])))
        outcome = _detach(row["id"])
    click.echo(f"{row['id']} is back in the background ({outcome})", err=True)
    sys.exit(code)


def _detach(job_id: str) -> str:
    with daemon() as client:
        return str(client.request("detach", job=job_id)["outcome"])


@cli.command()
def view() -> None:
    """The live agent view: the tree of sessions, states, status and questions.

    \b
    Keys: enter/o open the transcript, a reply (or answer the job's dialog),
    g group by directory/state, r refresh, ? help (keys and symbols), q quit.
    META: ✉N pending items, @AGENT agent definition, ⎇ BRANCH git worktree,
    ↳ NAME (grouped by state) a child of NAME; a ↳ before a name: a child."""
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
    from roost.definitions import store

    store.write_catalog_cache()  # roost_spawn's list of agents in your own pi
    if not outcome.written:
        click.echo(f"up to date: {directory}")
    else:
        verb = "installed" if outcome.created else "updated"
        click.echo(f"{verb} the roost pi extension in {directory} ({', '.join(outcome.written)})")
        click.echo("pi loads it at start-up (in a running pi: /reload)")


# -- agent definitions -------------------------------------------------------------------
@cli.group()
def agents() -> None:
    """Named agent definitions (TOML): list, show, create, check."""


@agents.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option("--cwd", type=click.Path(file_okay=False), help="For jobs in this directory "
              "(its project agents, when projectAgents is on; default: .).")
def agents_ls(as_json: bool, cwd: str | None) -> None:
    """The agents a job here can use: name, source (builtin|user|project), description."""
    from roost.definitions import store

    merged = store.load(cwd or os.getcwd())
    rows = store.to_json_list(merged)
    if as_json:
        print_json(rows)
        return
    width = max(len(r["name"]) for r in rows) if rows else 4
    click.echo(f"{'NAME':<{width}}  SOURCE   DESCRIPTION")
    for r in rows:
        click.echo(f"{r['name']:<{width}}  {r['source']:<7}  {r['description']}")
    for problem in merged.errors:
        click.echo(f"roost: {problem}", err=True)


@agents.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the definition as JSON.")
@click.option("--cwd", type=click.Path(file_okay=False),
              help="For jobs in this directory (default: .).")
def agents_show(name: str, as_json: bool, cwd: str | None) -> None:
    """The merged definition NAME (what `roost run --agent NAME` would use)."""
    from roost.definitions import rules, store

    merged = store.load(cwd or os.getcwd())
    defn = merged.agents.get(name)
    if defn is None:
        usage_error(rules.unknown_agent(name, merged))
    if as_json:
        print_json(defn.to_json())
        return
    click.echo(f"# {defn.name} ({defn.source}{': ' + defn.path if defn.path else ''})")
    click.echo(f"# tools: {', '.join(defn.effective_tools())}"
               + (" (the defaults)" if defn.tools is None else ""))
    import tomli_w

    click.echo(tomli_w.dumps(defn.body(), multiline_strings=True), nl=False)


@agents.command("new")
@click.argument("name")
@click.option("--from", "base", metavar="NAME", help="Start from this agent's definition.")
def agents_new(name: str, base: str | None) -> None:
    """Write <agent dir>/roost/agents/NAME.toml to edit (with comments); prints its path."""
    from roost.definitions import rules, store

    if not rules.NAME.match(name):
        usage_error(f"bad agent name {name!r}: use 1-40 of a-z 0-9 _ - (starting with a "
                    "letter or digit)")
    start_from = None
    if base is not None:
        merged = store.load(os.getcwd())
        start_from = merged.agents.get(base)
        if start_from is None:
            usage_error(rules.unknown_agent(base, merged))
    try:
        path = store.new_file(name, start_from)
    except FileExistsError:
        fail(f"{store.user_dir() / (name + '.toml')} exists; edit it or remove it first")
    except OSError as exc:
        fail(f"cannot write the definition: {exc}")
    store.write_catalog_cache()
    click.echo(path)


@agents.command("check")
@click.option("--cwd", type=click.Path(file_okay=False),
              help="Also the project definitions of this directory (default: .).")
def agents_check(cwd: str | None) -> None:
    """Validate every definition (user, and project ones here); errors with file and line,
    and each model pi does not know."""
    from roost.config import load_settings
    from roost.definitions import store

    directory = cwd or os.getcwd()
    # Project files are checked even when projectAgents is off: a repository's author
    # wants to know, and nothing is used by checking.
    merged = store.load(directory, allow_project=True)
    from roost.cli.modelcheck import definition_problems

    errors = merged.errors + definition_problems(merged.agents)  # a model pi does not know
    for problem in errors:
        click.echo(problem, err=True)
    store.write_catalog_cache()
    if errors:
        sys.exit(1)
    note = "" if load_settings().projectAgents else " (project agents are off: projectAgents)"
    click.echo(f"ok: {len(merged.agents)} agents{note}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (README: JSON output).")
@click.option("--model", metavar="P/ID", help="Check this model instead of pi's default.")
@click.option("--agent", metavar="NAME", help="Check this agent definition's model.")
def doctor(as_json: bool, model: str | None, agent: str | None) -> None:
    """Check pi, node, the extension (a real load in your pi), the model pi would use
    (known, with credentials: no network call), roostd and ROOST_HOME.

    Exit 0 when all is well (warnings included), 1 when something is wrong."""
    from roost.cli.doctor import render, run_checks

    report = run_checks(model, agent)
    if as_json:
        print_json(report.as_json())
    else:
        for line in render(report, sys.stdout.isatty()):
            click.echo(line)
    sys.exit(0 if report.ok else 1)


@cli.command()
@click.option("--keep", is_flag=True, help="Leave the demo's jobs and daemon running.")
def demo(keep: bool) -> None:
    """The showcase: real pi against roost's scripted local model, no API key."""
    from roost.cli.demo import run_demo

    sys.exit(run_demo(keep=keep))


cli.add_command(usage_cli.budget_cmd)
cli.add_command(usage_cli.usage_cmd)


def usage_line(exc: click.UsageError) -> str:
    """A click usage error as one line: what is wrong, and where the help is (click's own
    display is three lines: usage, a hint, the error)."""
    import re

    message = exc.format_message().rstrip(".")
    command = exc.ctx.command if exc.ctx else None
    if (isinstance(exc, click.NoSuchOption) and command is not None
            and re.fullmatch(r"-(\d+\.?\d*|\.\d+)", exc.option_name)):
        # `roost budget JOB -1`: a negative number reads as an option to click.
        numbers = [p.human_readable_name for p in command.params
                   if isinstance(p, click.Argument) and isinstance(p.type, usage_cli.Positive)]
        message = (f"{exc.option_name}: a negative number is not accepted"
                   + (f" ({' and '.join(numbers)} must be > 0)" if numbers else ""))
    where = exc.ctx.command_path if exc.ctx else "roost"
    return f"{message} (see {where} --help)"


def run_cli(command: click.Command, prog_name: str) -> NoReturn:
    """Run a click command with roost's error rule: every error is one line on stderr,
    exit 2 for a usage error, 1 for anything refused (README: Exit codes)."""
    try:
        code = command.main(prog_name=prog_name, standalone_mode=False)
    except click.UsageError as exc:
        usage_error(usage_line(exc))
    except click.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
    except click.Abort:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


def main() -> None:
    run_cli(cli, "roost")


def roostd_main() -> None:
    """`roostd`: `roost daemon run` under its own name (`roostd --help` prints help)."""
    run_cli(daemon_run, "roostd")


if __name__ == "__main__":
    main()
