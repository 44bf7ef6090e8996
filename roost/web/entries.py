"""A pi session file as the web shows it: one item a line of the transcript.

The same reading as `roost logs` (roost.pi.transcript), as data for the templates rather than
text: every string here is agent-, model- or user-written and goes to the page only
through Jinja's autoescape. Agent messages and reports (and roost's own notes) are their
own kinds, so the page frames them as coming from an agent, never as the user's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from roost.agents.envelope import sanitize_name, title
from roost.pi.transcript import content_text, tool_outcome
from roost.wire.protocol import CUSTOM_TYPE, NOTE_TYPE

SUMMARY_MAX = 160
"""The characters of a tool call's arguments or result shown before it is expanded."""
_FRAME = re.compile(r"\A<agent-message [^\n]*>\n(.*)\n</agent-message>\n", re.S)
"""An envelope's body, for an item recorded without its `details.body`."""
BODY_MAX = 20_000
"""The most characters of one item's expanded text (a page stays quick to render)."""


@dataclass(frozen=True)
class Item:
    kind: str  # user, assistant, tool, result, agent, note, meta, error
    time: str
    text: str
    title: str = ""
    summary: str = ""
    outcome: str = ""  # a tool result's: `exit 2 · 1.4 s` (transcript.tool_outcome)
    error: bool = False
    anchor: str = ""  # the session entry's id, on its first item: a search result's link


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str) -> str:
    return _clip(" ".join(text.split()), SUMMARY_MAX)


def items(entries: list[dict[str, Any]]) -> list[Item]:
    out: list[Item] = []
    for entry in entries:
        made = entry_items(entry)
        if made and entry.get("id"):
            made[0] = replace(made[0], anchor=str(entry["id"]))
        out.extend(made)
    return out


def window(all_items: list[Item], size: int, at: str | None) -> list[Item]:
    """The last `size` items, or (`at`: a search result's entry) `size` items from a few
    before that entry's first item."""
    index = next((n for n, item in enumerate(all_items) if at and item.anchor == at), None)
    if index is None or index >= len(all_items) - size:
        return all_items[-size:]
    start = max(0, index - 3)
    return all_items[start : start + size]


def entry_items(entry: dict[str, Any]) -> list[Item]:
    kind = entry.get("type")
    stamp = str(entry.get("timestamp") or "")[11:19]
    if kind == "custom_message" and entry.get("customType") == CUSTOM_TYPE:
        return [_agent_item(stamp, entry)]
    if kind == "custom_message" and entry.get("customType") == NOTE_TYPE:
        return [Item("note", stamp, _clip(content_text(entry.get("content")), BODY_MAX), title="roost")]
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
        return [
            Item(
                "result",
                stamp,
                _clip(text, BODY_MAX),
                title=str(message.get("toolName") or "tool"),
                summary=_one_line(text),
                outcome=tool_outcome(message),
                error=bool(message.get("isError")),
            )
        ]
    if role == "assistant":
        return _assistant(stamp, content, message)
    return []


def _agent_item(stamp: str, entry: dict[str, Any]) -> Item:
    """An agent message as a badge and its body: the wire tags and the closing paragraph
    the model reads are left out (the body roost recorded beside them, or the text between
    the tags); a report as `report from NAME: state` and its text."""
    details = entry.get("details") or {}
    content = content_text(entry.get("content"))
    body = details.get("body")
    if not isinstance(body, str):
        framed = _FRAME.search(content)
        body = framed.group(1) if framed else content
    item_kind = str(details.get("kind") or "message")
    sender = details.get("from") if isinstance(details.get("from"), dict) else None
    heading = str(details.get("title") or title(item_kind, sender, str(details.get("relation") or "?")))
    heading = heading.removeprefix("✉").strip()
    state = re.match(r"state: (\S+)\n?", body)
    if item_kind == "report" and state:
        name = sanitize_name((sender or {}).get("name") or (sender or {}).get("id"))
        heading = f"report from {name}: {state.group(1)}"
        body = body[state.end() :].lstrip("\n")
    elif item_kind == "report" and body.startswith("ended: "):
        name = sanitize_name((sender or {}).get("name") or (sender or {}).get("id"))
        heading, body = f"report from {name}: ended", body.removeprefix("ended: ")
    return Item("agent", stamp, _clip(body, BODY_MAX), title=heading, summary=item_kind)


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
            out.append(
                Item(
                    "tool",
                    stamp,
                    _clip(args, BODY_MAX),
                    title=str(part.get("name") or "tool"),
                    summary=_one_line(args),
                )
            )
    if message.get("stopReason") in ("error", "aborted"):
        detail = str(message.get("errorMessage") or "")
        out.append(Item("error", stamp, f"{message['stopReason']} {detail}".strip(), error=True))
    return out
