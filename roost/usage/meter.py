"""The worker's usage meter: its job's running totals and budget verdicts.

Fed with the session file once at start-up (`load`: the figures survive any restart and are
never counted twice, since a re-read replaces the sum) and then with each assistant
message pi reports (`on_message`), i.e. once per model request, between model requests.
No I/O here: the worker acts on what `on_message` returns.
"""

from __future__ import annotations

from typing import Any

from roost.usage import budget
from roost.usage.account import Usage, from_entries, message_usage
from roost.usage.budget import Limits


class Meter:
    def __init__(self, limits: Limits, warn_at: float = budget.DEFAULT_WARN_AT) -> None:
        self.limits = limits
        self.warn_at = warn_at
        self.usage = Usage()
        self.loaded = False  # the session file was read: totals are the job's
        self.warned = False
        self.exhausted: str | None = None  # why no run may start (the row's error)
        self.tree_exhausted: str | None = None  # said by roostd for the whole tree
        self.stopped_cause: str | None = None  # the cause of the run a budget stopped
        self.error_shown = False  # a stop was shown as the row's error: snapshots carry `error`
        self.ended_sent = False  # roostd was told (the parent's `ended:` report)

    def load(self, entries: list[dict[str, Any]]) -> None:
        self.usage = from_entries(entries)
        self.loaded = True
        # A restarted worker does not warn again for what an earlier one warned about.
        self.warned = budget.used_fraction(self.usage, self.limits) >= self.warn_at
        self.exhausted = budget.exhausted(self.usage, self.limits)

    def on_message(self, message: dict[str, Any]) -> str | None:
        """Count one message of pi's; 'warn', 'stop' or None."""
        usage, request = message_usage(message)
        if usage is None and not request:
            return None
        self.usage.add(usage, request)
        return self.verdict()

    def verdict(self) -> str | None:
        if self.exhausted is None:
            self.exhausted = budget.exhausted(self.usage, self.limits)
            if self.exhausted is not None:
                return "stop"
        if not self.warned and budget.warning(self.usage, self.limits, self.warn_at):
            self.warned = True
            return "warn"
        return None

    def warning_line(self) -> str:
        return budget.warning(self.usage, self.limits, self.warn_at) or ""

    @property
    def blocked(self) -> str | None:
        """Why no new run may start now, or None."""
        return self.exhausted or self.tree_exhausted

    def set_limits(self, limits: Limits) -> bool:
        """New limits from the person (`roost budget`); True when that lifted a stop."""
        was = self.blocked
        self.limits = limits
        self.exhausted = budget.exhausted(self.usage, self.limits)
        if budget.used_fraction(self.usage, self.limits) < self.warn_at:
            self.warned = False
        return was is not None and self.blocked is None

    def snapshot(self) -> dict[str, Any] | None:
        return self.usage.to_json() if self.loaded else None
