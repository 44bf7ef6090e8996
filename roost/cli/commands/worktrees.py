"""The commands on a job's git worktree: diff, merge, gc."""

from __future__ import annotations

import os
from pathlib import Path

import click

from roost.cli.common import daemon, fail
from roost.display.output import field


@click.command()
@click.argument("job")
@click.option("--stat", is_flag=True, help="A diffstat instead of the patch.")
@click.option(
    "--raw", is_flag=True, help="The patch as git wrote it, control characters included: only to a pipe."
)
def diff(job: str, stat: bool, raw: bool) -> None:
    """The changes of a job in a worktree against its base (uncommitted work included).

    Control characters in the files (an escape sequence that moves the cursor up and
    erases a line, say) are shown as escapes such as \\x1b, never run by the terminal."""
    from roost.display import output
    from roost.display.answerpaths import owned
    from roost.worktrees import git

    if raw and not output.raw_allowed():
        fail(output.RAW_REFUSED)
    with daemon() as client:
        row = client.request("show", job=job)["job"]
    worktree = row.get("worktree")
    if not worktree:
        fail(f"job {row['id']} has no worktree (roost run --worktree, roost_spawn worktree)")
    owned(worktree["path"], "worktree")  # git writes objects there
    owned(row["dir"], "job directory")
    if not os.path.isdir(worktree["path"]):
        fail(f"the worktree of job {row['id']} ({worktree['path']}) is gone")
    from roost.worktrees import CHECKOUT_MARKER

    if (Path(row["dir"]) / CHECKOUT_MARKER).exists():
        fail(
            f"the worktree of job {row['id']} is still being written (the job is starting); "
            "try again in a moment"
        )
    try:
        patch = git.diff(worktree["path"], worktree["base"], stat=stat)
    except git.GitError as exc:
        fail(str(exc))
    if raw:
        output.write_raw(patch.encode("utf-8", "surrogateescape"))
    else:
        output.print_diff(patch)


@click.command()
@click.argument("job")
@click.option(
    "--into",
    metavar="BRANCH",
    help="The branch to merge into (default: the branch checked out where the job was started).",
)
@click.option("--squash", is_flag=True, help="One commit instead of a merge commit.")
def merge(job: str, into: str | None, squash: bool) -> None:
    """Merge a job's worktree branch (refused while it runs, into a checkout with
    uncommitted changes, or on a conflict: then nothing changes). Only commits are merged:
    a job that committed nothing is refused (exit 1), whatever its worktree holds."""
    with daemon() as client:
        result = client.request("merge", job=job, into=into, squash=squash, timeout=300)
    if result["merged"]:
        how = "squashed into" if squash else "merged into"
        click.echo(f"{result['branch']} {how} {result['into']} ({result['commit'][:12]})")
    else:
        # The outcome may name a repository's files (a conflict): shown, never run.
        click.echo(field(f"{result['branch']}: {result['outcome']} ({result['into']})"))
    if result.get("uncommitted"):
        click.echo(
            f"note: the worktree has {result['uncommitted']} uncommitted changes; "
            "they were not merged (roost diff shows them)",
            err=True,
        )


@click.command()
@click.option("--force", is_flag=True, help="Also orphaned worktrees with uncommitted changes.")
def gc(force: bool) -> None:
    """Remove the worktrees of removed jobs and prune git's worktree records."""
    with daemon() as client:
        result = client.request("gc", force=force, timeout=300)
    for path in result["removed"]:
        click.echo(f"removed {field(path)}")
    for line in result["kept"]:
        click.echo(f"kept {field(line)}")
    click.echo(f"pruned the worktree records of {len(result['pruned'])} repositories")


def register(group: click.Group) -> None:
    group.add_command(diff)
    group.add_command(merge)
    group.add_command(gc)
