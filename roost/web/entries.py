"""A pi session file as the web shows it: one item a line of the transcript.

The same reading as `roost logs` (roost.transcript), as data for the templates rather than
text: every string here is agent-, model- or user-written and goes to the page only
through Jinja's autoescape. Agent messages and reports (and roost's own notes) are their
own kinds, so the page frames them as coming from an agent, never as the user's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from roost.agents.envelope import title
from roost.protocol import CUSTOM_TYPE, NOTE_TYPE
from roost.transcript import content_text

SUMMARY_MAX = 160
"""The characters of a tool call's arguments or result shown before it is expanded."""
BODY_MAX = 20_000
"""The most characters of one item's expanded text (a page stays quick to render)."""


@dataclass(frozen=True)
class Item:
    kind: str  # user, assistant, tool, result, agent, note, meta, error
    time: str
    text: str
    title: str = ""
    summary: str = ""
    error: bool = False


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str) -> str:
    return _clip(" ".join(text.split()), SUMMARY_MAX)


def items(entries: list[dict[str, Any]]) -> list[Item]:
    out: list[Item] = []
    for entry in entries:
        out.extend(entry_items(entry))
    return out


def entry_items(entry: dict[str, Any]) -> list[Item]:
    kind = entry.get("type")
    stamp = str(entry.get("timestamp") or "")[11:19]
    if kind == "custom_message" and entry.get("customType") == CUSTOM_TYPE:
        details = entry.get("details") or {}
        heading = details.get("title") or title(
            str(details.get("kind") or "message"), details.get("from"),
            str(details.get("relation") or "?"))
        return [Item("agent", stamp, _clip(content_text(entry.get("content")), BODY_MAX),
                     title=str(heading))]
    if kind == "custom_message" and entry.get("customType") == NOTE_TYPE:
        return [Item("note", stamp, _clip(content_text(entry.get("content")), BODY_MAX),
                     title="roost")]
    if kind == "compaction":
        return [Item("meta", stamp, "compacted")]
    if kind == "model_change":
        return [Item("meta", stamp, f"model {entry.get('provider', '')}/{entry.get('modelId', '')}")]
    if kind != "message":
        return []
    message = entry.get("message") or {}
    role, content = message.get("role"), message.get("content")
    if role == "user":
        return [Item("user", stamp, _clip(content_text(content), BODY_MAX), title="user")]
    if role == "toolResult":
        text = content_text(content)
        return [Item("result", stamp, _clip(text, BODY_MAX), title=str(message.get("toolName") or "tool"),
                     summary=_one_line(text), error=bool(message.get("isError")))]
    if role == "assistant":
        return _assistant(stamp, content, message)
    return []


def _assistant(stamp: str, content: Any, message: dict[str, Any]) -> list[Item]:
    out: list[Item] = []
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and str(part.get("text", "")).strip():
            out.append(Item("assistant", stamp, _clip(str(part["text"]), BODY_MAX), title="assistant"))
        elif part.get("type") == "toolCall":
            args = json.dumps(part.get("arguments", {}), ensure_ascii=False, indent=1)
            out.append(Item("tool", stamp, _clip(args, BODY_MAX), title=str(part.get("name") or "tool"),
                            summary=_one_line(args)))
    if message.get("stopReason") in ("error", "aborted"):
        detail = str(message.get("errorMessage") or "")
        out.append(Item("error", stamp, f"{message['stopReason']} {detail}".strip(), error=True))
    return out
