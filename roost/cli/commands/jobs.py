"""The commands on jobs: run, ls, show, reply, wait, logs, stop, start, rm, mailbox."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from roost.cli import jobcalls  # light: rich and the mailbox package where used
from roost.cli.afteropts import after_args, after_options
from roost.cli.approvalopts import approval_args, approval_options
from roost.cli.commands import results as results_cli  # run --output-schema
from roost.cli.commands import usage as usage_cli  # run --budget and friends
from roost.cli.common import daemon, exit_code, fail, print_json, usage_error
from roost.cli.sandboxopts import sandbox_args, sandbox_options
from roost.display import jobdetail, views  # light: rich and the mailbox package where used


@click.command(context_settings={"ignore_unknown_options": False})
@click.option("--name", help="A name for the job, not another job's (default: from the task).")
@click.option("--cwd", type=click.Path(file_okay=False), help="Working directory (default: .).")
@click.option("--model", help="Model as provider/id.")
@click.option("--thinking", help="Thinking level: off, minimal, low, medium, high, xhigh.")
@click.option("--agent", help="Run as this agent definition (roost agents ls).")
@click.option("--shell", is_flag=True, help="Run a shell command instead of pi: roost run --shell -- CMD ...")
@click.option(
    "-f",
    "--file",
    "task_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Read the task from this file (`-`: stdin), for a task too big for one argument (128 KiB).",
)
@usage_cli.run_options
@click.option(
    "--worktree", is_flag=True, help="Run in a new git worktree on a new branch (roost diff/merge/rm JOB)."
)
@click.option("--branch", help="With --worktree: the new branch (default roost/<name>-<id>).")
@click.option("--base", help="With --worktree: the commit to start from (default HEAD).")
@click.option("--group", help="Run in this named group (roost group add NAME --parallel N).")
@click.option("--priority", type=int, help="Its place in the queue: higher starts first (default 0).")
@click.option(
    "--runner",
    type=click.Choice(["local", "ray"]),
    help="Where its worker and pi run: here, or as a job of roost.json's Ray cluster "
    "(default: roost.json's runner; docs: Scale-out).",
)
@click.option(
    "--each",
    "each_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Start one pi job per task in this file (`-`: stdin): one task a line, "
    "unless the whole file is a JSON list of strings or {task, name, group, "
    "priority}; prints the ids.",
)
@results_cli.schema_option
@approval_options
@sandbox_options
@after_options
@click.argument("task", nargs=-1)
def run(
    name: str | None,
    cwd: str | None,
    model: str | None,
    thinking: str | None,
    agent: str | None,
    shell: bool,
    task: tuple[str, ...],
    task_file: str | None = None,
    budget: float | None = None,
    budget_tokens: int | None = None,
    max_turns: int | None = None,
    tree_budget: float | None = None,
    worktree: bool = False,
    branch: str | None = None,
    base: str | None = None,
    group: str | None = None,
    priority: int | None = None,
    runner: str | None = None,
    each_file: str | None = None,
    output_schema: str | None = None,
    **after_opts: Any,
) -> None:
    """Start a pi job with TASK (or a shell job); prints its id.

    TASK is the words after the options, `-` to read it from stdin, or -f FILE. Past
    maxRunning (or its group's limit) the job is queued (docs: Queue and limits)."""
    directory = str(Path(cwd or os.getcwd()).absolute())
    boxed = sandbox_args(after_opts)  # --sandbox, --sandbox-network
    approval = approval_args(after_opts)  # --approvals, --allow/--ask/--deny, --approval-timeout
    args: dict[str, Any] = {
        "name": name,
        "cwd": directory,
        "group": group,
        "priority": priority,
        **({"runner": runner} if runner else {}),
        **after_args(**after_opts),
        **approval,
    }
    if approval and shell:
        usage_error("approvals are for pi jobs, not --shell")
    if boxed.get("sandbox") and shell:
        usage_error("--sandbox is for pi jobs, not --shell")
    args.update(boxed)
    if runner and (shell or each_file is not None):
        usage_error("--runner is for one pi job (a shell job runs here; not with --each)")
    if output_schema is not None:  # checked by roostd, for each job (roost.job.results)
        if shell:
            usage_error("--output-schema is for pi jobs, not --shell")
        args["output_schema"] = results_cli.read_schema(output_schema)
    if each_file is not None:
        if task or task_file or shell or worktree or name:
            usage_error("--each takes its tasks from the file: no TASK, -f, --shell, --worktree or --name")
        args.update(model=model, thinking=thinking, agent=agent)
        args.update(usage_cli.run_args(budget, budget_tokens, max_turns, tree_budget))
        _run_each(each_file, args)
        return
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
        args.update(task=_task_text(task, task_file), model=model, thinking=thinking, agent=agent)
        args.update(usage_cli.run_args(budget, budget_tokens, max_turns, tree_budget))
        if worktree:
            args.update(worktree=True, branch=branch, base=base)
    jobcalls.start(args, shell)


def _each_tasks(source: str) -> list[Any]:
    """--each's tasks: one task a line (blank lines skipped), unless the whole file is a
    JSON list. A line file may start with `[` (`[WIP] fix the parser`); a file that means
    to be JSON (`[` then `"` or `{`, or `[` alone on its first line) and is not is refused
    with the JSON error, rather than read as lines."""
    import json
    import re

    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        usage_error(f"{source} is not UTF-8 text ({exc.reason} at byte {exc.start})")
    except OSError as exc:
        usage_error(f"cannot read the tasks from {source}: {exc.strerror or exc}")
    if text.lstrip().startswith("["):
        try:
            tasks = json.loads(text)
        except ValueError as exc:
            if re.match(r"\s*\[[ \t]*(\r?\n|[\"{])", text):
                usage_error(f"{source} is not a JSON list: {exc}")
        else:
            if isinstance(tasks, list):
                return tasks
    return [line for line in text.splitlines() if line.strip()]


def _run_each(source: str, args: dict[str, Any]) -> None:
    tasks = _each_tasks(source)
    if not tasks:
        usage_error(f"no tasks in {source}")
    from roost.job.env import caller_env

    args.pop("name", None)
    with daemon() as client:
        jobs = client.request("run_each", tasks=tasks, env=caller_env(), **args)["jobs"]
    queued = sum(1 for job in jobs if job.get("position") is not None)
    for job in jobs:
        click.echo(job["id"])
    if queued:
        click.echo(f"roost: {len(jobs)} jobs, {queued} of them queued", err=True)


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
            usage_error(
                f"the task in {source} is {len(data):,} bytes: a task must fit in one "
                f"mailbox item ({MAX_ITEM_BYTES // 1024} KiB)"
            )
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        usage_error(
            f"the task in {'stdin' if source == '-' else source} is not UTF-8 text "
            f"({exc.reason} at byte {exc.start})"
        )
    except OSError as exc:
        usage_error(f"cannot read the task from {source}: {exc.strerror or exc}")


@click.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of JobRow.")
@click.option("--tree", is_flag=True, help="Show children under their parents.")
@click.option(
    "--group",
    type=click.Choice(["dir", "state"]),
    default="dir",
    show_default=True,
    help="Group the rows by working directory or by state.",
)
@click.option("--wide", is_flag=True, help="Every column in full, never shortened (as in a pipe).")
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
           {…}       has a structured result (roost result ID)
           ↳ NAME    (--group state) a child of the job NAME
    A ↳ before a name (grouped by directory) marks a child under its parent;
    a question starts with `?`; COST `—` means the model has no prices."""
    jobcalls.list_jobs(as_json, tree, group, wide)


@click.command()
@click.argument("job")
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JobRow with its detail fields (docs: JSON output)."
)
@click.option("--full", is_flag=True, help="Show a long task whole (default: its start).")
def show(job: str, as_json: bool, full: bool) -> None:
    """One job in detail."""
    with daemon() as client:
        row = client.request("show", job=job)["job"]
    if as_json:
        print_json(row)
    else:
        if not full:
            row["task"] = jobdetail.short_task(row.get("task"), row["id"])
        jobdetail.print_detail(row)


@click.command()
@click.argument("job")
@click.argument("text", nargs=-1, required=True)
def reply(job: str, text: tuple[str, ...]) -> None:
    """Send a user reply: prints delivered, queued, started or stopped."""
    jobcalls.reply(job, " ".join(text))


WAIT_FOR = ("needs_input", "settled", "done", "failed")


@click.command()
@click.argument("jobs", nargs=-1, required=True, metavar="JOB...")
@click.option("--timeout", type=float, default=None, help="Give up after S seconds (exit 1).")
@click.option("--any", "mode", flag_value="any", help="Until the first of the jobs gets there.")
@click.option("--all", "mode", flag_value="all", help="Until every one of the jobs is there.")
@click.option(
    "--for",
    "until",
    type=click.Choice(WAIT_FOR),
    default=None,
    help="What to wait for with --any/--all (default: settled).",
)
def wait(jobs: tuple[str, ...], timeout: float | None, mode: str | None, until: str | None) -> None:
    """Block until the job's current run has settled; with --any/--all, until the first or
    every one of the jobs reaches --for (prints `ID NAME STATE` per job; exit 0, 1 on
    timeout or when a job failed (unless --for failed), 2 for an unknown or removed job)."""
    if mode is None and until is None and len(jobs) == 1:
        jobcalls.wait_one(jobs[0], timeout)
        return
    if mode is None:
        if len(jobs) > 1:
            usage_error("several jobs: say --any or --all")
        mode = "any"
    with daemon() as client:
        result = client.call(
            "wait_jobs",
            {"jobs": list(jobs), "until": until or "settled", "mode": mode, "timeout": timeout},
            None if timeout is None else timeout + 30,
        )
    rows = result["jobs"] if mode == "all" or not result["jobs"] else result["jobs"][:1]
    for row in rows:
        click.echo(f"{row['id']} {views.printable(row['name'])} {row['state']}")
    if not result["reached"]:
        waiting = ", ".join(f"{r['id']} ({r['state']})" for r in result["waiting"])
        click.echo(f"roost: timed out; still waiting for {waiting}", err=True)
        sys.exit(1)
    failed = [r for r in rows if r["state"] == "failed"]
    if failed and until != "failed":  # `roost wait --all A B && next` stops on a failure
        for row in failed:
            reason = row.get("error") or row.get("status") or row.get("summary")
            click.echo(
                f"roost: job {row['id']} failed" + (f": {views.printable(reason)}" if reason else ""),
                err=True,
            )
        sys.exit(1)


@click.command()
@click.argument("job")
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Keep printing new entries; on a terminal, the text being written shows on a live last line.",
)
@click.option("-v", "--verbose", is_flag=True, help="Do not shorten tool calls and results.")
@click.option(
    "--raw",
    is_flag=True,
    help="The text as the model (a shell job: the command) "
    "wrote it, control characters included: only to a pipe.",
)
def logs(job: str, follow: bool, verbose: bool, raw: bool) -> None:
    """The job's transcript (agent messages framed as such); shell jobs: their output.

    Control characters (a model's escape sequences) are shown as escapes such as \\x1b."""
    from roost.display import output

    if raw and not output.raw_allowed():
        fail(output.RAW_REFUSED)
    with daemon() as client:
        row = client.request("show", job=job)["job"]
    views.print_logs(row, follow=follow, verbose=verbose, raw=raw)


@click.command()
@click.argument("job")
def stop(job: str) -> None:
    """Stop a job (it is never woken by messages; `roost start` wakes it)."""
    with daemon() as client:
        result = client.request("stop", job=job)
    click.echo(f"{result['id']} stopped")


@click.command()
@click.argument("job")
def start(job: str) -> None:
    """Start a stopped or ended job again, with this command's environment."""
    from roost.job.env import caller_env

    with daemon() as client:
        result = client.request("start", job=job, env=caller_env())
    click.echo(f"{result['id']} {result['state']}")


@click.command()
@click.argument("jobs", nargs=-1, required=True, metavar="JOB...")
@click.option(
    "--force",
    is_flag=True,
    help="Also when its worktree has uncommitted changes (they are lost); with "
    "--delete-branch, also when the branch has unmerged commits.",
)
@click.option(
    "--delete-branch",
    is_flag=True,
    help="Also delete its worktree's branch (only when merged, unless --force).",
)
def rm(jobs: tuple[str, ...], force: bool, delete_branch: bool) -> None:
    """Stop and remove jobs (each one's directory, mailbox and session file, and its
    worktree; the worktree's branch is kept unless --delete-branch).

    Each job is removed or refused on its own (`ID removed`, or one line on stderr); the
    exit code is the worst of them: 2 when one is unknown, else 1 when one was refused."""
    from roost.wire.protocol import RequestError

    worst = 0
    with daemon() as client:
        for job in dict.fromkeys(jobs):
            try:
                result = client.request("rm", job=job, force=force, deleteBranch=delete_branch)
            except RequestError as exc:
                click.echo(f"roost: {views.printable(exc.message)}", err=True)
                worst = max(worst, exit_code(exc.code))
                continue
            click.echo(f"{result['id']} removed")
            for note in result.get("worktree") or ():
                click.echo(f"  {views.printable(note)}")
    if worst:
        sys.exit(worst)


@click.command()
@click.argument("job")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON list of {state, seq, kind, from, text, created, extra}.",
)
@click.option("--all", "show_all", is_flag=True, help="Acknowledged items too.")
@click.option("--path", "show_path", is_flag=True, help="Print the mailbox directory only.")
def mailbox(job: str, as_json: bool, show_all: bool, show_path: bool) -> None:
    """The job's pending (and with --all acknowledged) mailbox items."""
    with daemon() as client:
        row = client.request("show", job=job)["job"]
    views.print_mailbox(row, as_json=as_json, show_all=show_all, show_path=show_path)


def register(group: click.Group) -> None:
    group.add_command(run)
    group.add_command(ls)
    group.add_command(show)
    group.add_command(reply)
    group.add_command(wait)
    group.add_command(logs)
    group.add_command(stop)
    group.add_command(start)
    group.add_command(rm)
    group.add_command(mailbox)
