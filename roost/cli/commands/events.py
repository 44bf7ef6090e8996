"""`roost events`: roostd's event log, read from its file or followed through roostd."""

from __future__ import annotations

import sys

import click


@click.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they happen.")
@click.option(
    "--since", metavar="SEQ|TIME", help="From after this seq, or from this UTC time (2026-11-30T11:20)."
)
@click.option(
    "--type",
    "types",
    multiple=True,
    metavar="T",
    help="Only these types (repeatable; `job.` matches every job.* type).",
)
@click.option("--job", help="Only events of this job (id or name).")
@click.option("--json", "as_json", is_flag=True, help="The log's JSON lines as they are.")
def events(follow: bool, since: str | None, types: tuple[str, ...], job: str | None, as_json: bool) -> None:
    """roostd's event log ($ROOST_HOME/events.jsonl); --follow streams new events."""
    from roost.display.events import print_events

    try:
        print_events(follow, since, types, job, as_json)
    except KeyboardInterrupt:
        sys.exit(130)


def register(group: click.Group) -> None:
    group.add_command(events)
