"""The mailbox's errors; every one derives from `roost.errors.RoostError`."""

from __future__ import annotations

from pathlib import Path

from roost.errors import RoostError


class MailboxError(RoostError):
    """A mailbox operation failed; the message names the path and the action."""


class InvalidItem(MailboxError, ValueError):
    """An item (to post, or read from a file) breaks the item format.

    Also a `ValueError`, so callers validating input can catch either.
    """


class MailboxFull(MailboxError):
    """A cap on pending items was reached; nothing was written.

    `cap` is "replies" or "agent", `pending` how many such items are pending,
    `limit` the cap and `path` the mailbox directory.
    """

    def __init__(self, cap: str, pending: int, limit: int, path: Path) -> None:
        self.cap = cap
        self.pending = pending
        self.limit = limit
        self.path = path
        what = "user replies" if cap == "replies" else "agent items (message+report)"
        super().__init__(f"mailbox full: {pending} pending {what}, the cap is {limit} (mailbox {path})")
