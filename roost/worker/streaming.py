"""What pi is streaming right now, sent on to roostd coalesced: the live text.

pi sends a `message_update` event for every delta of the assistant message it streams
(each holds the whole message so far) and `tool_execution_start`/`_end` around each tool.
`Streamer` keeps the latest of them and sends a *partial* (the message so far, the tools
running) at most once every INTERVAL seconds: the first change at once, the rest of a
burst at the end of the interval. The message's end clears it at the next event pi prints
(by then pi saved the message in the session file, where every reader finds it). Nothing
of it is written anywhere: roostd keeps the last one in memory (handlers/streamed.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

INTERVAL = 0.08
"""Seconds between two partials of one job (pi sends a delta every few ms)."""
BLOCK_MAX = 100_000
"""The most characters of one block of a partial (the final message has them all)."""
ARGS_MAX = 200
"""The characters of a running tool's arguments kept (a one-line summary)."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def args_line(args: Any) -> str:
    """A tool call's arguments on one line: a bash command as it is, else compact JSON."""
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        text = args["command"]
    elif isinstance(args, dict) and isinstance(args.get("path"), str):
        text = args["path"]
    else:
        try:
            text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            text = str(args)
    return _clip(" ".join(text.split()), ARGS_MAX)


def compact(message: dict[str, Any]) -> dict[str, Any]:
    """The parts of a streamed assistant message a reader shows (no signatures, no usage)."""
    blocks: list[dict[str, Any]] = []
    content = message.get("content")
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": _clip(str(part.get("text") or ""), BLOCK_MAX)})
        elif kind == "thinking":
            blocks.append({"type": "thinking", "thinking": _clip(str(part.get("thinking") or ""), BLOCK_MAX)})
        elif kind == "toolCall":
            blocks.append(
                {
                    "type": "toolCall",
                    "id": str(part.get("id") or ""),
                    "name": str(part.get("name") or ""),
                    "summary": str(part["summary"])
                    if part.get("arguments") is None and "summary" in part
                    else args_line(part.get("arguments") or {}),
                }
            )
    return {"timestamp": message.get("timestamp"), "content": blocks}


class Blocks:
    """An assistant message rebuilt from pi 1.x's delta-only `message_update` events (its
    RPC sends neither the message so far nor the `partial` snapshot: docs json.md)."""

    def __init__(self, timestamp: Any = None) -> None:
        self.timestamp = timestamp
        self.parts: dict[int, dict[str, Any]] = {}

    def apply(self, update: dict[str, Any]) -> None:
        kind = str(update.get("type") or "")
        index = update.get("contentIndex")
        if not isinstance(index, int):
            return
        family, _, step = kind.rpartition("_")
        if family in ("text", "thinking"):
            part = self.parts.setdefault(index, {"type": family, family: ""})
            if step == "delta":
                part[family] += str(update.get("delta") or "")
            elif step == "end" and isinstance(update.get("content"), str):
                part[family] = update["content"]
        elif family == "toolcall":
            part = self.parts.setdefault(index, {"type": "toolCall", "id": "", "name": "", "args": ""})
            if step == "start":
                part.update(id=str(update.get("id") or ""), name=str(update.get("toolName") or ""))
            elif step == "delta":
                part["args"] += str(update.get("delta") or "")
            elif step == "end" and isinstance(update.get("toolCall"), dict):
                call = update["toolCall"]
                part.update(
                    id=str(call.get("id") or part["id"]),
                    name=str(call.get("name") or part["name"]),
                    arguments=call.get("arguments") or {},
                )

    def message(self) -> dict[str, Any]:
        content = []
        for _, part in sorted(self.parts.items()):
            if part["type"] == "toolCall" and "arguments" not in part:
                content.append(
                    {**part, "arguments": None, "summary": _clip(" ".join(part["args"].split()), ARGS_MAX)}
                )
            else:
                content.append(part)
        return compact({"timestamp": self.timestamp, "content": content})


class Streamer:
    def __init__(self, send: Callable[[dict[str, Any] | None], None], interval: float = INTERVAL) -> None:
        self._send = send
        self.interval = interval
        self._source: dict[str, Any] | Blocks | None = None  # what `message` is made from
        self.tools: dict[str, dict[str, Any]] = {}
        self._ending = False  # message_end seen: cleared at pi's next event
        self._dirty = False
        self._shown = False  # the last partial sent was not null
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def message(self) -> dict[str, Any] | None:
        """The message so far, as a partial carries it (built when one is sent)."""
        source = self._source
        if source is None:
            return None
        message = source.message() if isinstance(source, Blocks) else compact(source)
        return message if message["content"] else None

    def current(self) -> dict[str, Any] | None:
        message = self.message
        if message is None and not self.tools:
            return None
        return {"message": message, "tools": list(self.tools.values())}

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        urgent = False
        if self._ending and kind != "message_end":
            self._ending, self._source, self._dirty, urgent = False, None, True, True
        if kind == "message_start":
            message = event.get("message") or {}
            if message.get("role") == "assistant":
                self._source = Blocks(message.get("timestamp"))
        elif kind == "message_update":
            message = event.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                self._source = message  # pi 0.x: the whole message so far
            else:
                if not isinstance(self._source, Blocks):
                    self._source = Blocks()
                self._source.apply(event.get("assistantMessageEvent") or {})
            self._dirty = True
        elif kind == "message_end":
            self._ending = self._source is not None
        elif kind == "tool_execution_start":
            call = str(event.get("toolCallId") or "")
            self.tools[call] = {
                "id": call,
                "name": str(event.get("toolName") or "tool"),
                "summary": args_line(event.get("args") or {}),
                "started": time.time(),
            }
            self._dirty = urgent = True
        elif kind == "tool_execution_end":
            self._dirty = urgent = self.tools.pop(str(event.get("toolCallId") or ""), None) is not None
        elif kind in ("agent_end", "agent_settled"):
            self._ending, self._source = False, None
            self._dirty = urgent = bool(self.tools) or self._dirty or self._shown
            self.tools.clear()
        if self._dirty:
            self._schedule(urgent)

    def _schedule(self, urgent: bool) -> None:
        wait = self.interval - (time.monotonic() - self._last)
        if urgent or wait <= 0:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(wait, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._dirty:
            return
        self._dirty = False
        self._last = time.monotonic()
        value = self.current()
        if value is None and not self._shown:
            return
        self._shown = value is not None
        self._send(value)
