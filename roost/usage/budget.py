"""Budget rules: pure functions, no I/O (tested without a process).

A job may have a budget in cost (`budget`, in the currency of the model's prices), in
tokens (`budgetTokens`: input + output + cache read + cache write, for models without
prices) and a cap on model requests (`maxTurns`). A tree root may also have `treeBudget`,
which the root and all its descendants share.

Checks happen when pi reports a model request's usage (its assistant message), i.e. between
model requests: a run can overshoot by at most the one request that crossed the limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from roost.usage.account import Usage
from roost.usage.show import format_cost

DEFAULT_WARN_AT = 0.8


@dataclass(frozen=True)
class Limits:
    budget: float | None = None
    budget_tokens: int | None = None
    max_turns: int | None = None

    @property
    def any(self) -> bool:
        return self.budget is not None or self.budget_tokens is not None or self.max_turns is not None

    @classmethod
    def of(cls, record: Any) -> Limits:
        """From a JobRecord (or anything with budget / budget_tokens / max_turns)."""
        return cls(
            getattr(record, "budget", None),
            getattr(record, "budget_tokens", None),
            getattr(record, "max_turns", None),
        )


def _parts(usage: Usage, limits: Limits) -> list[tuple[float, str, str]]:
    """(fraction used, what was used of what, the limit's name) per limit that is set."""
    parts: list[tuple[float, str, str]] = []
    if limits.budget is not None:
        spent = usage.cost if usage.priced else 0.0
        fraction = spent / limits.budget if limits.budget > 0 else math.inf
        parts.append((fraction, _of(spent, limits.budget), "budget"))
    if limits.budget_tokens is not None:
        fraction = usage.tokens / limits.budget_tokens if limits.budget_tokens > 0 else math.inf
        parts.append((fraction, f"{usage.tokens} of {limits.budget_tokens} tokens", "token budget"))
    if limits.max_turns is not None:
        fraction = usage.requests / limits.max_turns if limits.max_turns > 0 else math.inf
        parts.append((fraction, f"{usage.requests} of {limits.max_turns} model requests", "turn limit"))
    return parts


def _of(spent: float, limit: float) -> str:
    """`$2.51 of $2.50`; more digits where cents would show $0.25 of $0.25 below it."""
    text = f"{format_cost(spent)} of {format_cost(limit)}"
    if spent != limit and format_cost(spent) == format_cost(limit):
        text = f"${spent:.4f} of ${limit:.4f}"
    return text


def used_fraction(usage: Usage, limits: Limits) -> float:
    """The largest share of any limit used (0 without limits)."""
    return max((fraction for fraction, _, _ in _parts(usage, limits)), default=0.0)


def exhausted(usage: Usage, limits: Limits) -> str | None:
    """Why the job may not make another model request, or None.

    `budget exhausted: $2.51 of $2.50` (also in the job's row as its error)."""
    for fraction, figures, name in _parts(usage, limits):
        if fraction >= 1.0:
            word = "reached" if name == "turn limit" else "exhausted"
            return f"{name} {word}: {figures}"
    return None


def is_stop_reason(error: str | None) -> bool:
    """Is `error` one of `exhausted`'s reasons (or roostd's tree budget one)?"""
    return error is not None and error.startswith(
        (
            "budget exhausted:",
            "token budget exhausted:",
            "turn limit reached:",
            "tree budget exhausted:",
        )
    )


def warning(usage: Usage, limits: Limits, warn_at: float) -> str | None:
    """The one warning line once `warn_at` of a limit is used (and it is not exhausted)."""
    if not 0 < warn_at < 1:
        return None
    worst = max(_parts(usage, limits), default=None)
    if worst is None or not warn_at <= worst[0] < 1.0:
        return None
    percent = int(warn_at * 100 + 0.5)
    noun = {"budget": "budget", "token budget": "token budget", "turn limit": "model requests"}[worst[2]]
    return f"you have used {percent}% of your {noun} ({worst[1]})"


def warning_text(line: str) -> str:
    """What a spawned job's parent gets (as a message from the child): `[roost] Budget
    warning: you have used 80% of your budget ($2.00 of $2.50).` The README quotes it."""
    return f"[roost] Budget warning: {line}."


def note_text(line: str) -> str:
    """The framed note a job gets: the parent's words, then that they are roost's, not the
    user's. The README quotes it."""
    return (
        f"{warning_text(line)} This note comes from roost, the supervisor, not from the "
        "user. Finish the essential part of the task first; the run is stopped when the "
        "budget is used up."
    )


def raised_note(limits: Limits) -> str:
    return (
        "[roost] Your budget was raised"
        + (f" to {format_cost(limits.budget)}" if limits.budget is not None else "")
        + ". This note comes from roost, the supervisor, not from the user. Continue the "
        "task from where it stopped; check the state of any step that was in progress "
        "before you repeat it."
    )


def check_amount(value: Any, what: str, integer: bool = False) -> float | int | None:
    """A budget amount from a request: None, or a finite number > 0; ValueError says why."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a number, got {value!r}")
    if value <= 0:
        raise ValueError(f"{what} must be greater than 0, got {value!r}")
    if integer:
        if value != int(value):
            raise ValueError(f"{what} must be a whole number, got {value!r}")
        return int(value)
    return float(value)


def child_budget(
    requested: float | None, default: float | None, tree_left: float | None
) -> tuple[float | None, str | None]:
    """A spawned child's budget, or the refusal: never more than what is left of the tree's.

    `tree_left` is None when the tree has no budget."""
    budget = requested if requested is not None else default
    if tree_left is None:
        return budget, None
    if tree_left <= 0:
        return None, (
            f"the tree's budget is used up ({format_cost(0.0)} left): "
            "no child can be spawned until the person raises it"
        )
    if requested is not None and requested > tree_left + 1e-9:
        return None, (
            f"budget {format_cost(requested)} exceeds what is left of the tree's "
            f"budget ({format_cost(tree_left)})"
        )
    return (tree_left if budget is None else min(budget, tree_left)), None
