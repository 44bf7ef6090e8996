"""A job's conversation as ACP `session/update`s: the session file's entries (what pi saved)
and roostd's partials (what pi streams now), each shown once.

`Shown` remembers, per assistant message (its timestamp) and block, how many characters a
client has been sent, and which tool calls it knows started and ended: a streamed message
arrives first as partials (the text so far) and then whole in the session file, and only
what was not sent yet goes out. Text is made safe to show: no raw terminal control and no
mailbox wire form (`<agent-message` look-alikes), as roost mcp's results.
"""

from __future__ import annotations

import json
import os
from typing import Any

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)

from roost.agents.envelope import neutralize_body, title
from roost.pi.transcript import content_text
from roost.text import escapes
from roost.wire.protocol import CUSTOM_TYPE, NOTE_TYPE, scrub_text

RESULT_MAX = 20_000
"""The most characters of a tool's result sent as its content."""
CLIPPED = 100_000
"""A partial's block longer than this was cut to it with a `…` (roost.worker.streaming's
BLOCK_MAX): the `…` is not the model's, and the rest comes with the saved message."""
KINDS: dict[str, Any] = {
    "read": "read",
    "edit": "edit",
    "write": "edit",
    "bash": "execute",
    "grep": "search",
    "find": "search",
    "ls": "search",
}
"""pi's tools as ACP's tool kinds (the client's icon); any other tool is `other`."""


def safe(text: str) -> str:
    return escapes.shown(neutralize_body(text), escapes.BODY)


def _args_line(args: Any) -> str:
    if isinstance(args, dict):
        for key in ("command", "path", "pattern"):
            if isinstance(args.get(key), str):
                return " ".join(str(args[key]).split())[:200]
    try:
        return json.dumps(args, ensure_ascii=False)[:200]
    except (TypeError, ValueError):
        return ""


def tool_title(name: str, args: Any) -> str:
    line = args if isinstance(args, str) else _args_line(args)
    return safe(f"{name} {line}".strip())


class SessionFile:
    """A session file read from where the last read stopped: complete lines only."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.offset = 0

    def new_entries(self) -> list[dict[str, Any]]:
        if not self.path or not os.path.isfile(self.path):
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        out = []
        for line in data[:end].splitlines():
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(entry, dict):
                out.append(scrub_text(entry))
        return out


class Shown:
    """What one client has been sent of one job's conversation."""

    def __init__(self) -> None:
        self.sent: dict[tuple[Any, int], int] = {}
        self.started: set[str] = set()
        self.running: set[str] = set()
        self.titles: dict[str, str] = {}
        self.ended: set[str] = set()
        self.prompts: list[str] = []
        """The client's own prompts, not yet seen in the file (it shows them itself)."""

    # -- the session file ------------------------------------------------------------------
    def entry(self, entry: dict[str, Any]) -> list[Any]:
        kind = entry.get("type")
        if kind == "custom_message":
            return self._custom(entry)
        if kind != "message":
            return []
        message = entry.get("message") or {}
        role = message.get("role")
        if role == "user":
            text = content_text(message.get("content"))
            if text in self.prompts:
                self.prompts.remove(text)
                return []
            return [update_user_message_text(safe(text))] if text.strip() else []
        if role == "assistant":
            return self._assistant(message)
        if role == "toolResult":
            return self._result(message)
        return []

    def _custom(self, entry: dict[str, Any]) -> list[Any]:
        text = content_text(entry.get("content"))
        if entry.get("customType") == CUSTOM_TYPE:
            details = entry.get("details") or {}
            heading = details.get("title") or title(
                str(details.get("kind") or "message"),
                details.get("from"),
                str(details.get("relation") or "?"),
            )
            return [update_user_message_text(safe(f"**{heading}**\n\n{text}"))]
        if entry.get("customType") == NOTE_TYPE:
            return [update_agent_thought_text(safe(f"roost: {text}"))]
        return []

    def _assistant(self, message: dict[str, Any]) -> list[Any]:
        out = self.blocks(message.get("timestamp"), message.get("content"))
        if message.get("stopReason") == "error":
            detail = message.get("errorMessage") or "the model failed"
            out.append(update_agent_message_text(safe(f"\n\nerror: {detail}")))
        return out

    def _result(self, message: dict[str, Any]) -> list[Any]:
        call = str(message.get("toolCallId") or "")
        if not call or call in self.ended:
            return []
        out: list[Any] = []
        if call not in self.started:
            self.started.add(call)
            out.append(
                start_tool_call(
                    call, safe(str(message.get("toolName") or "tool")), kind="other", status="in_progress"
                )
            )
        self.ended.add(call)
        self.running.discard(call)
        text = content_text(message.get("content"))
        if len(text) > RESULT_MAX:
            text = text[:RESULT_MAX] + "…"
        status: Any = "failed" if message.get("isError") else "completed"
        out.append(update_tool_call(call, status=status, content=[tool_content(text_block(safe(text)))]))
        return out

    # -- a message, streamed or saved ------------------------------------------------------
    def blocks(self, stamp: Any, content: Any, partial: bool = False) -> list[Any]:
        """Updates for what of a message's blocks (a `partial`'s, or saved) was not sent."""
        out: list[Any] = []
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for index, part in enumerate(parts):
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind in ("text", "thinking"):
                text = str(part.get(kind) or "")
                if partial and len(text) >= CLIPPED and text.endswith("…"):
                    text = text[:-1]
                done = self.sent.get((stamp, index), 0)
                if len(text) > done:
                    self.sent[(stamp, index)] = len(text)
                    chunk = safe(text[done:])
                    out.append(
                        update_agent_message_text(chunk)
                        if kind == "text"
                        else update_agent_thought_text(chunk)
                    )
            elif kind == "toolCall" and part.get("id"):
                out += self._call(
                    str(part["id"]),
                    str(part.get("name") or "tool"),
                    part.get("arguments"),
                    part.get("summary"),
                )
        return out

    def _call(self, call: str, name: str, args: Any, summary: Any) -> list[Any]:
        """A tool call seen in a message: started once, its title again when it grew (a
        streamed call's arguments arrive after its name)."""
        title = tool_title(name, summary if args is None else args)
        raw = args if isinstance(args, dict) else None
        if call not in self.started:
            self.started.add(call)
            self.titles[call] = title
            return [
                start_tool_call(call, title, kind=KINDS.get(name, "other"), status="pending", raw_input=raw)
            ]
        if len(title) > len(self.titles.get(call, "")) and call not in self.ended:
            self.titles[call] = title
            return [update_tool_call(call, title=title, raw_input=raw)]
        return []

    def partial(self, value: dict[str, Any] | None) -> list[Any]:
        """Updates for a partial (roost.worker.streaming): the message so far, the tools
        running now."""
        if not value:
            return []
        message = value.get("message") or {}
        out = self.blocks(message.get("timestamp"), message.get("content"), partial=True) if message else []
        for tool in value.get("tools") or []:
            call = str(tool.get("id") or "")
            if not call or call in self.ended or call in self.running:
                continue
            self.running.add(call)
            out += self._call(call, str(tool.get("name") or "tool"), None, tool.get("summary"))
            out.append(update_tool_call(call, status="in_progress"))
        return out


def last_stop(entries: list[dict[str, Any]]) -> str | None:
    """pi's stopReason of the last assistant message among `entries`, if any."""
    for entry in reversed(entries):
        message = entry.get("message") or {}
        if entry.get("type") == "message" and message.get("role") == "assistant":
            return str(message.get("stopReason") or "")
    return None
