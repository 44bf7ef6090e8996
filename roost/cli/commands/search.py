"""`roost search QUERY`: full-text search of every job's conversation, through roostd's
`search` op (docs/guides/search.md); `--reindex` rebuilds the index from the files."""

from __future__ import annotations

import os
from typing import Any

import click

from roost.cli.common import daemon, print_json, usage_error
from roost.cli.searchcalls import search as run_search

KINDS = ("user", "assistant", "tool", "message", "report", "answer", "result")


@click.command("search")
@click.argument("query", required=False)
@click.option("--job", metavar="J", help="Only this job (id or name).")
@click.option("--tree", metavar="J", help="Only this job and the jobs it spawned, at any depth.")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(KINDS),
    metavar="KIND",
    help=f"Only entries of this kind (repeatable): {'|'.join(KINDS)}.",
)
@click.option(
    "--since",
    metavar="DATE",
    help="Only entries from this UTC day (2026-12-01) or UTC time (2026-12-01T14:30:00Z) on.",
)
@click.option(
    "--cwd",
    metavar="D",
    type=click.Path(file_okay=False),
    help="Only jobs that run in folder D or a folder inside it.",
)
@click.option("--all", "everything", is_flag=True, help="Removed jobs too.")
@click.option(
    "--limit", default=20, show_default=True, type=click.IntRange(1, 1000), help="At most N matches."
)
@click.option("--json", "as_json", is_flag=True, help="The matches as a JSON array of rows.")
@click.option(
    "--reindex", is_flag=True, help="Rebuild the index from the jobs' files (removed jobs' entries are kept)."
)
def search(
    query: str | None,
    job: str | None,
    tree: str | None,
    kinds: tuple[str, ...],
    since: str | None,
    cwd: str | None,
    everything: bool,
    limit: int,
    as_json: bool,
    reindex: bool,
) -> None:
    """Search every job's conversation for QUERY, best matches first (newest first on
    ties): words, "a phrase", a prefix (retr*), AND, OR, NOT, parentheses."""
    if reindex:
        with daemon() as client:
            done = client.request("search_reindex", timeout=None)
        if as_json:
            print_json(done)
        else:
            click.echo(
                f"reindexed: {done['entries']} entries of {done['jobs']} jobs in "
                f"{done['seconds']} s ({done['removedKept']} removed jobs' kept)"
            )
        if not query:
            return
    if not query:
        usage_error("give a QUERY (or --reindex)")
    args: dict[str, Any] = {"query": query, "limit": limit}
    args.update({key: value for key, value in (("job", job), ("tree", tree), ("since", since)) if value})
    if kinds:
        args["kinds"] = list(kinds)
    if cwd:
        args["cwd"] = os.path.abspath(cwd)
    if everything:
        args["all"] = True
    run_search(args, as_json)


def register(group: click.Group) -> None:
    group.add_command(search)
