"""`roost schedule add|ls|show|rm|pause|resume|run-now`: runs that start by themselves, at
times or on file changes (README: Schedules). roostd owns them; these only ask it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from roost.cli.commands import results as results_cli  # the run's --output-schema
from roost.cli.commands import usage as usage_cli  # the run's budget options
from roost.cli.common import daemon, fail, print_json, usage_error
from roost.cli.groups import Group


def _line(*cells: Any) -> str:
    from roost.display.output import visible

    return "  ".join(visible(str(cell)) for cell in cells)


@click.group(cls=Group, default="ls")
def schedule() -> None:
    """Runs that start by themselves: at times (cron, every, at) or when files change."""


@schedule.command("add")
@click.argument("name")
@click.option("--cron", help='A cron expression, in the schedule\'s zone: "0 7 * * 1-5".')
@click.option("--every", help="A period: 30s, 15m, 1h30m, 1d (counted from now).")
@click.option("--at", "at", help="Once: HH:MM (the next one) or an ISO date and time.")
@click.option("--on-change", "on_change", help="Fire when files under PATH[,PATH...] change.")
@click.option("--debounce", help="With --on-change: a burst within this long fires once (default 2s).")
@click.option("--tz", help="The zone its times are in (default: the local zone).")
@click.option(
    "--session",
    type=click.Choice(["new", "same"]),
    default="new",
    show_default=True,
    help="new: a new job each firing; same: a reply to the same job (it keeps its memory).",
)
@click.option(
    "--catch-up",
    "catch_up",
    type=click.Choice(["one", "none", "all"]),
    default="one",
    show_default=True,
    help="Firings missed while roostd was down or the machine slept: fire one, none, or all of them.",
)
@click.option(
    "--overlap",
    type=click.Choice(["skip", "queue"]),
    default="skip",
    show_default=True,
    help="A firing while the last run still runs: skip it, or run it once that run ends.",
)
@click.option("--cwd", type=click.Path(file_okay=False), help="Working directory (default: .).")
@click.option("--model", help="Model as provider/id.")
@click.option("--thinking", help="Thinking level: off, minimal, low, medium, high, xhigh.")
@click.option("--agent", help="Run as this agent definition (roost agents ls).")
@click.option(
    "-f",
    "--file",
    "task_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Read the task from this file (`-`: stdin).",
)
@usage_cli.run_options
@click.option("--worktree", is_flag=True, help="Each run in a new git worktree.")
@click.option("--group", help="Run in this named group.")
@click.option("--priority", type=int, help="Its runs' place in the queue.")
@results_cli.schema_option
@click.option("--json", "as_json", is_flag=True, help="Print the ScheduleRow as JSON.")
@click.argument("task", nargs=-1)
def add(
    name: str,
    cron: str | None,
    every: str | None,
    at: str | None,
    on_change: str | None,
    debounce: str | None,
    tz: str | None,
    session: str,
    catch_up: str,
    overlap: str,
    cwd: str | None,
    model: str | None,
    thinking: str | None,
    agent: str | None,
    task_file: str | None,
    budget: float | None,
    budget_tokens: int | None,
    max_turns: int | None,
    tree_budget: float | None,
    worktree: bool,
    group: str | None,
    priority: int | None,
    output_schema: str | None,
    as_json: bool,
    task: tuple[str, ...],
) -> None:
    """Add the schedule NAME that runs TASK at each time (--cron, --every, --at) or when
    files change (--on-change); prints when it fires next."""
    from roost.cli.commands.jobs import _task_text
    from roost.job.env import caller_env

    if sum(x is not None for x in (cron, every, at, on_change)) != 1:
        usage_error("give one of --cron, --every, --at, --on-change")
    if debounce is not None and on_change is None:
        usage_error("--debounce is for --on-change")
    run: dict[str, Any] = {
        "task": _task_text(task, task_file),
        "cwd": str(Path(cwd or os.getcwd()).absolute()),
        "model": model,
        "thinking": thinking,
        "agent": agent,
        "worktree": worktree or None,
        "group": group,
        "priority": priority,
        **usage_cli.run_args(budget, budget_tokens, max_turns, tree_budget),
    }
    if output_schema is not None:  # each run's answer is checked against it (roost result)
        run["output_schema"] = results_cli.read_schema(output_schema)
    watched = None
    if on_change is not None:
        watched = [str(Path(p).expanduser().absolute()) for p in on_change.split(",") if p]
        if not watched:
            usage_error("--on-change needs a PATH")
    with daemon() as client:
        row = client.request(
            "schedule_add",
            name=name,
            run=run,
            cron=cron,
            every=every,
            at=at,
            onChange=watched,
            debounce=debounce,
            tz=tz,
            session=session,
            catchUp=catch_up,
            overlap=overlap,
            env=caller_env(),
        )["schedule"]
    if as_json:
        print_json(row)
        return
    click.echo(_line(row["name"], _when(row), f"next {_local(row['next'], row['tz'])}"))


def _local(iso: str | None, tz: str) -> str:
    """A time of roostd's (ISO-8601 UTC) as the schedule's zone reads it."""
    if iso is None:
        return "-"
    from datetime import datetime
    from zoneinfo import ZoneInfo

    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(ZoneInfo(tz))
    except (ValueError, KeyError):
        return iso
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z")


def _when(row: dict[str, Any]) -> str:
    kind = row["kind"]
    if kind == "change":
        return f"on change of {row['spec']} (debounce {row['debounce']:g}s)"
    return {"cron": "cron", "every": "every", "at": "at"}[kind] + f" {row['spec']} ({row['tz']})"


def _last(row: dict[str, Any]) -> str:
    last = row.get("last")
    if not last:
        return "never fired"
    job = f" job {last['job']} {last['jobState'] or 'removed'}" if last.get("job") else ""
    detail = f": {last['detail']}" if last.get("detail") else ""
    return f"{last['cause']} {last['outcome']}{detail}{job}"


@schedule.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of ScheduleRow (docs: JSON output).")
def ls(as_json: bool) -> None:
    """Every schedule: its trigger, zone, next firing and last result."""
    with daemon() as client:
        rows = client.request("schedule_ls")["schedules"]
    if as_json:
        print_json(rows)
        return
    if not rows:
        click.echo("no schedules (add one: roost schedule add NAME --every 1h TASK)")
    for row in rows:
        nxt = "paused" if row["paused"] else f"next {_local(row['next'], row['tz'])}"
        click.echo(_line(row["name"], _when(row), nxt, f"last: {_last(row)}"))


@schedule.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the ScheduleRow with its run.")
def show(name: str, as_json: bool) -> None:
    """One schedule: its trigger, options, run, next firing and last result."""
    with daemon() as client:
        row = client.request("schedule_show", name=name)["schedule"]
    if as_json:
        print_json(row)
        return
    for key, value in (
        ("name", row["name"]),
        ("when", _when(row)),
        ("zone", row["tz"]),
        ("state", "paused" if row["paused"] else "active"),
        ("next", _local(row["next"], row["tz"])),
        ("last", _last(row)),
        ("fired", row["fired"]),
        ("session", row["session"]),
        ("catch-up", row["catchUp"]),
        ("overlap", row["overlap"]),
        ("cwd", row["cwd"]),
        ("jobs", " ".join(row["jobs"]) or "-"),
        ("task", row["task"]),
    ):
        click.echo(_line(f"{key + ':':<10}", value))


def _simple(op: str, help_text: str) -> click.Command:
    @click.command(op.replace("_", "-"), help=help_text)
    @click.argument("name")
    def command(name: str) -> None:
        with daemon() as client:
            result = client.request(f"schedule_{op}", name=name)
        if op == "run_now":
            job = f" job {result['job']}" if result.get("job") else ""
            detail = f": {result['detail']}" if result.get("detail") else ""
            if result["outcome"] == "failed":
                fail(f"schedule {name}: the run failed to start{detail}")
            click.echo(_line(f"{result['outcome']}{job}{detail}"))
        else:
            click.echo(_line(_done(op, name, result)))

    return command


def _done(op: str, name: str, result: dict[str, Any]) -> str:
    """What `schedule rm|pause|resume` did, as one line."""
    if op == "rm":
        return f"schedule {name} removed (the jobs it made stay)"
    if op == "pause":
        return f"schedule {name} paused"
    row = result["schedule"]
    nxt = f"; next {_local(row['next'], row['tz'])}" if row.get("next") else ""
    return f"schedule {name} resumed{nxt}"


for _op, _help in (
    ("rm", "Remove the schedule NAME (the jobs it made stay)."),
    ("pause", "Pause the schedule NAME: it fires no more until resumed."),
    (
        "resume",
        "Resume the schedule NAME: it fires from now on (what fell due while paused is not caught up).",
    ),
    ("run_now", "Fire the schedule NAME now (its --overlap applies)."),
):
    schedule.add_command(_simple(_op, _help))


def register(root: click.Group) -> None:
    root.add_command(schedule)
