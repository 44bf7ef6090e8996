"""Text an MCP client reads: what a model wrote (a transcript, a question, a result) never
carries raw terminal control (C0, C1, DEL, bidi controls, line separators: shown as
escapes, `roost.text.escapes`) nor the mailbox's wire form (`<agent-message` and its
look-alikes: neutralised as in the envelope, `roost.agents.envelope.neutralize_body`), so
an MCP client's model cannot be handed a forged agent message through roost."""

from __future__ import annotations

from typing import Any

from roost.agents.envelope import neutralize_body
from roost.text import escapes


def text(value: str) -> str:
    """One string made safe to show (newlines and tabs kept)."""
    return escapes.shown(neutralize_body(value), escapes.BODY)


def clean(value: Any) -> Any:
    """`value` (decoded JSON, any depth) with every string, keys included, made safe."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {clean(k) if isinstance(k, str) else k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value
