"""`roost run`'s dependency options (README: Dependencies): --after and how it waits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def after_options(func: F) -> F:
    for option in reversed(
        (
            click.option(
                "--after",
                metavar="JOB[,JOB...]",
                help="Start only once these jobs (ids or names) are done; it waits "
                "`waiting` until then, and fails if one fails or is removed.",
            ),
            click.option(
                "--after-any", is_flag=True, help="With --after: start once the first of them is done."
            ),
            click.option(
                "--after-settled",
                is_flag=True,
                help="With --after: start once all have ended, however they ended; "
                "the task is told how each ended.",
            ),
            click.option(
                "--with-results",
                is_flag=True,
                help="With --after: add each one's final answer (or structured "
                "result) to the task, framed as data from roost.",
            ),
        )
    ):
        func = option(func)
    return func


def after_args(
    after: str | None = None, after_any: bool = False, after_settled: bool = False, with_results: bool = False
) -> dict[str, Any]:
    """The run request's `after`, `afterMode`, `withResults` (nothing without --after)."""
    if after is None:
        if after_any or after_settled or with_results:
            raise click.UsageError(
                "--after-any, --after-settled and --with-results need --after JOB[,JOB...]"
            )
        return {}
    if after_any and after_settled:
        raise click.UsageError("--after-any and --after-settled: choose one")
    mode = "any" if after_any else "settled" if after_settled else "all"
    return {
        "after": [ref.strip() for ref in after.split(",")],
        "afterMode": mode,
        "withResults": with_results,
    }
