"""`roost run`'s sandbox options (--sandbox, --sandbox-network), turned into the `run` op's
arguments; a sandbox asked for where bwrap cannot make one is refused here, before
anything starts (exit 1, naming the package: roost.sandbox)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def sandbox_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        (
            click.option(
                "--sandbox/--no-sandbox",
                "sandbox",
                default=None,
                help="Run the job's bash commands under bubblewrap: read-only but its "
                "directory, a private /tmp and sandbox.writable; no secrets, no "
                "network (default: the agent's, roost.json's sandbox).",
            ),
            click.option(
                "--sandbox-network",
                type=click.Choice(["none", "host"]),
                default=None,
                help="With --sandbox: none (default) or host (the machine's network).",
            ),
        )
    ):
        fn = option(fn)
    return fn


def sandbox_args(opts: dict[str, Any]) -> dict[str, Any]:
    """The `run` op's arguments for the options given (pops them from `opts`)."""
    from roost.cli.common import fail

    args: dict[str, Any] = {}
    on = opts.pop("sandbox", None)
    network = opts.pop("sandbox_network", None)
    if network is not None and on is None:
        on = True
    if on is not None:
        args["sandbox"] = on
    if network is not None:
        args["sandboxNetwork"] = network
    if on:
        from roost import sandbox

        try:
            sandbox.check(network=network or "none")
        except sandbox.SandboxError as exc:
            fail(str(exc))
    return args
