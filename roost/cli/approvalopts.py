"""`roost run`'s approval options (--approvals, --allow, --ask, --deny, --approval-timeout),
turned into the `run` op's arguments (roostd composes the job's policy:
roost.approvals.callrules.compose)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

RULE_HELP = "TOOL or TOOL:PATTERN (bash:git push*, write:outside); repeatable"


def approval_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        (
            click.option(
                "--approvals",
                type=click.Choice(["auto", "ask"]),
                default=None,
                help="auto: every tool call runs; ask: a call that can change something "
                "waits for roost approve (default: the agent's, roost.json's).",
            ),
            click.option(
                "--allow",
                "allow_rules",
                multiple=True,
                metavar="RULE",
                help=f"Run matching calls unasked: {RULE_HELP}.",
            ),
            click.option(
                "--ask",
                "ask_rules",
                multiple=True,
                metavar="RULE",
                help=f"Ask before matching calls: {RULE_HELP}.",
            ),
            click.option(
                "--deny",
                "deny_rules",
                multiple=True,
                metavar="RULE",
                help=f"Refuse matching calls (wins over --ask and --allow): {RULE_HELP}.",
            ),
            click.option(
                "--approval-timeout",
                type=click.FloatRange(min=0, min_open=True),
                metavar="MINUTES",
                default=None,
                help="Deny a call nobody answered after this long (default 30; "
                "roost.json approvalTimeout, in seconds).",
            ),
        )
    ):
        fn = option(fn)
    return fn


def approval_args(opts: dict[str, Any]) -> dict[str, Any]:
    """The `run` op's arguments for the options given (pops them from `opts`); each rule is
    checked here, so a typo is a usage error before anything starts."""
    from roost.approvals.callrules import BadRule, parse_rule
    from roost.cli.common import usage_error

    args: dict[str, Any] = {}
    mode = opts.pop("approvals", None)
    if mode is not None:
        args["approvals"] = mode
    for kind in ("allow", "ask", "deny"):
        rules = list(opts.pop(f"{kind}_rules", ()) or ())
        for rule in rules:
            try:
                parse_rule(rule)
            except BadRule as exc:
                usage_error(f"--{kind}: {exc}")
        if rules:
            args[kind] = rules
    timeout = opts.pop("approval_timeout", None)
    if timeout is not None:
        args["approvalTimeout"] = timeout * 60
    return args
