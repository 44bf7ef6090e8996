"""`roost view`: the live agent view (roost.view.app)."""

from __future__ import annotations

import click


@click.command()
def view() -> None:
    """The live agent view: the tree of sessions, states, status and questions.

    \b
    Keys: enter/o open the transcript, a reply (or answer the job's dialog),
    g group by directory/state, r refresh, ? help (keys and symbols), q quit.
    META: ✉N pending items, @AGENT agent definition, ⎇ BRANCH git worktree,
    ↳ NAME (grouped by state) a child of NAME; a ↳ before a name: a child."""
    from roost.cli.common import fail
    from roost.wire.client import ForeignDaemon, check_home

    try:  # refused in one line before the screen opens (the view's connects check too)
        check_home()
    except ForeignDaemon as exc:
        fail(str(exc))
    from roost.view.app import run_view

    run_view()


def register(group: click.Group) -> None:
    group.add_command(view)
