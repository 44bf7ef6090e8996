"""A session file's entries as searchable rows: the conversation, never pi's system prompt.

A session file grows by whole lines; a scan takes the bytes from a known offset and returns
the rows of its complete lines and the offset just past the last one, so a line still being
written is read whole next time. Kinds: `user` (a person's message or a job's task),
`answer` (a person's message that follows a final answer asking a question), `assistant`
(the model's text), `tool` (a tool's call and its result), `message` and `report` (agent
items roost delivered). pi 1.x writes its system prompt into the session (its `session`
header and a `system` entry): neither is a conversation entry, so neither is indexed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from roost.pi.transcript import content_text, parse_millis
from roost.wire.protocol import CUSTOM_TYPE

KINDS = ("user", "assistant", "tool", "message", "report", "answer", "result")
TEXT_MAX = 200_000
"""A row's text is cut here: a tool result of megabytes is still found by its start."""
MARKS = str.maketrans({"\x02": " ", "\x03": " ", "\x00": " "})
"""The snippet's own markers (ftsquery.START, END) never come from the text itself."""


@dataclass(frozen=True)
class Row:
    kind: str
    text: str
    at: float  # seconds since the epoch (UTC)
    entry: str  # pi's entry id: the anchor of the entry on the job's web page
    pos: int  # the line's byte offset in its file: unique per file


@dataclass
class Scan:
    rows: list[Row]
    end: int  # the offset past the last complete line
    asked: bool  # the last assistant answer asked a question (carried to the next scan)


def _question(text: str) -> bool:
    paragraphs = [p.strip() for p in text.strip().split("\n\n") if p.strip()]
    return bool(paragraphs) and paragraphs[-1].rstrip("*_` ").endswith("?")


def _clean(text: str) -> str:
    return text.translate(MARKS)[:TEXT_MAX]


def _tool_calls(content: Any) -> list[str]:
    calls = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "toolCall":
            args = json.dumps(part.get("arguments", {}), ensure_ascii=False)
            calls.append(f"{part.get('name', '')} {args}")
    return calls


def entry_rows(entry: dict[str, Any], pos: int, asked: bool) -> tuple[list[tuple[str, str]], bool]:
    """(kind, text) pairs of one session entry, and whether a question is now open."""
    kind = entry.get("type")
    if kind == "custom_message" and entry.get("customType") == CUSTOM_TYPE:
        details = entry.get("details") or {}
        item = "report" if details.get("kind") == "report" else "message"
        body = details.get("body") or content_text(entry.get("content"))
        return [(item, f"{details.get('title') or ''}\n{body}")], False
    if kind != "message":
        return [], asked
    message = entry.get("message") or {}
    role, content = message.get("role"), message.get("content")
    if role == "user":
        return [("answer" if asked else "user", content_text(content))], False
    if role == "assistant":
        pairs = [("assistant", content_text(content))]
        pairs += [("tool", call) for call in _tool_calls(content)]
        final = message.get("stopReason") == "stop"
        return pairs, final and _question(content_text(content))
    if role == "toolResult":
        return [("tool", f"{message.get('toolName', '')}: {content_text(content)}")], asked
    return [], asked


def scan(data: bytes, start: int, asked: bool = False) -> Scan:
    """The rows of the complete lines of `data`, the bytes of a file from offset `start`."""
    rows: list[Row] = []
    pos, end = 0, data.rfind(b"\n") + 1
    while pos < end:
        stop = data.index(b"\n", pos)
        line = data[pos:stop]
        here, pos = start + pos, stop + 1
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(entry, dict):
            continue
        pairs, asked = entry_rows(entry, here, asked)
        when = parse_millis(entry.get("timestamp")) or 0.0
        for kind, text in pairs:
            if text.strip():
                rows.append(Row(kind, _clean(text), when / 1000, str(entry.get("id") or ""), here))
    return Scan(rows, start + end, asked)
