"""`roost acp`: roost as an ACP agent for editors (roost.acp), over stdio. The
agent-client-protocol package is imported only here, when the command runs
(docs/guides/editors.md)."""

from __future__ import annotations

from typing import Any

import click

from roost.cli.common import fail


@click.command("acp")
def acp() -> None:
    """Serve roost's jobs to an editor over the Agent Client Protocol (Zed, JetBrains,
    Neovim): stdio, started by the editor.

    Each editor session is a roost job in the session's folder: roost ls, roost view and
    the web see it, and it goes on when the editor closes (docs: Editors)."""
    try:
        import asyncio

        from acp import run_agent

        from roost.acp.session import RoostAgent
    except ImportError as exc:
        fail(
            f"roost acp needs the agent-client-protocol package ({exc}): pip install "
            "'roost[acp]' (scripts/setup installs it)"
        )
    import sys

    from roost.display.output import terminal

    # The wire is stdin and stdout as an editor gives them (pipes): asyncio cannot wait on
    # a file or /dev/null (a traceback, or a wait that never ends), so say so instead.
    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)):
        if not _waitable(stream):
            fail(
                f"roost acp speaks the Agent Client Protocol over stdin and stdout, and its "
                f"{name} is a file or /dev/null: an editor starts it with pipes "
                "(docs: Editors)"
            )

    sys.stdout = terminal()  # the JSON-RPC wire: the package writes it as it is
    agent: Any = RoostAgent()  # acp.Agent is a Protocol of every method, optional ones too
    try:
        asyncio.run(run_agent(agent, use_unstable_protocol=True))
    except KeyboardInterrupt:
        pass
    finally:
        agent.feed.stop()


def _waitable(stream: Any) -> bool:
    """A pipe, a socket or a terminal: what asyncio's pipe transports can wait on."""
    import os
    import stat

    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def register(group: click.Group) -> None:
    group.add_command(acp)
