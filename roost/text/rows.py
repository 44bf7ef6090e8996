"""A job row's words as a person reads them, where they differ from its JSON values.

`reaped` (idle long enough that its worker was let go; the next reply or message starts
one) reads as "killed" to a newcomer, so every human view (roost ls, show, view, the web
page) shows it as `idle`, through `state_text`; JSON, the event log and `roost wait` keep
`reaped`, the contract scripts read. Standard library only: the CLI's quick path and the
web both use it.
"""

from __future__ import annotations

STATE_SHOWN = {"reaped": "idle"}
"""A state's word for a person, where it is not its JSON value."""


def state_text(state: str) -> str:
    """How a job's `state` is shown to a person (STATE_SHOWN)."""
    return STATE_SHOWN.get(state, state)
