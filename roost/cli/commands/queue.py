"""The queue's commands: `roost queue` (and `queue move`), `roost group add|ls|rm`."""

from __future__ import annotations

from typing import Any

import click

from roost.cli.common import daemon, print_json, usage_error
from roost.cli.groups import Group


def _line(*cells: Any) -> str:
    from roost.display.output import visible

    return "  ".join(visible(str(cell)) for cell in cells)


@click.group(invoke_without_command=True)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {maxRunning, running, jobs: [JobRow], groups} (docs: JSON output).",
)
@click.pass_context
def queue(ctx: click.Context, as_json: bool) -> None:
    """The queued jobs in the order they will start (higher priority first, then first
    come), with maxRunning and the groups (docs: Queue and limits)."""
    if ctx.invoked_subcommand is not None:
        return
    with daemon() as client:
        result = client.request("queue")
    if as_json:
        print_json(result)
        return
    click.echo(
        f"running {result['running']} of maxRunning {result['maxRunning']}; {len(result['jobs'])} queued"
    )
    for row in result["jobs"]:
        place = row["queue"]
        click.echo(
            _line(
                f"{place['position']:>4}",
                row["id"],
                f"priority {place['priority']}",
                f"group {place['group'] or '-'}",
                row["name"],
            )
        )


@queue.command("move")
@click.argument("job")
@click.option("--priority", type=int, help="The job's new priority (higher starts first).")
@click.option("--first", is_flag=True, help="To the head of the queue.")
def move(job: str, priority: int | None, first: bool) -> None:
    """Reorder a queued job: a new --priority, or --first."""
    if first == (priority is not None):
        usage_error("give --priority N or --first")
    with daemon() as client:
        result = client.request("queue_move", job=job, priority=priority, first=first or None)
    click.echo(
        _line(
            result["id"], f"position {result['queue']['position']}", f"priority {result['queue']['priority']}"
        )
    )


@click.group(cls=Group, default="ls")
def group() -> None:
    """Named groups, each with its own limit of jobs running at once."""


def _print_groups(groups: list[dict[str, Any]]) -> None:
    if not groups:
        click.echo("no groups (add one with: roost group add NAME --parallel N)")
    for row in groups:
        click.echo(
            _line(
                row["name"],
                f"parallel {row['parallel']}",
                f"running {row['running']}",
                f"queued {row['queued']}",
            )
        )


@group.command("add")
@click.argument("name")
@click.option(
    "--parallel", type=click.IntRange(1, 10_000), required=True, help="Jobs of this group running at once."
)
def group_add(name: str, parallel: int) -> None:
    """Add a group (or change its limit); roost run --group NAME puts a job in it."""
    with daemon() as client:
        client.request("group_add", name=name, parallel=parallel)


@group.command("ls")
@click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON list of {name, parallel, running, queued}."
)
def group_ls(as_json: bool) -> None:
    """List the groups."""
    with daemon() as client:
        groups = client.request("group_ls")["groups"]
    if as_json:
        print_json(groups)
    else:
        _print_groups(groups)


@group.command("rm")
@click.argument("name")
def group_rm(name: str) -> None:
    """Remove a group: its jobs then follow maxRunning alone."""
    with daemon() as client:
        client.request("group_rm", name=name)


def register(root: click.Group) -> None:
    root.add_command(queue)
    root.add_command(group)
