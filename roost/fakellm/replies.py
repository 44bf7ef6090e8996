"""What the fake model answers: text, tool calls, HTTP errors, and timing options.

A `Reply` is immutable; `reply.with_(delay=0.5)` returns a changed copy. Replies combine
with `+` (text of both, tool calls of both, the larger timing values), so
`text("let me look") + tool_call("bash", {"command": "ls"})` streams text then a call.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_ids = itertools.count(1)


def new_call_id() -> str:
    return f"call_fake_{next(_ids):04d}"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None  # generated when the reply is sent

    def arguments_json(self) -> str:
        return json.dumps(dict(self.arguments), separators=(",", ":"))


@dataclass(frozen=True)
class Reply:
    """One model response.

    - `text`, `tool_calls`: the content (both may be set; text streams first).
    - `delay`: seconds to wait before answering (after the request is logged).
    - `hold`: a `threading.Event` the response waits on before answering; keeps a run in
      flight until the test sets it. Released by `FakeLLM.stop()` too.
    - `chunk_delay`: seconds between SSE chunks; `chunk_size`: characters per text chunk.
    - `status`: an HTTP error status (>= 400) sent instead of a completion, with
      `error_message` in an OpenAI-style error body.
    - `finish_reason`: overrides the computed one ("stop" / "tool_calls"); e.g.
      "network_error" makes pi record an error stop reason mid-stream.
    - `usage`: (prompt_tokens, completion_tokens[, cached_tokens[, cache_write_tokens]])
      reported in the usage chunk (pi counts prompt - cached - cache write as input, the
      cached ones as cache read/write); the default estimates from the sizes (4 characters
      a token). pi prices it with the model's `cost` in models.json (the sandbox
      `make_agent_dir(cost=...)`).
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    delay: float = 0.0
    hold: threading.Event | None = field(default=None, compare=False)
    chunk_delay: float = 0.0
    chunk_size: int = 40
    status: int | None = None
    error_message: str = ""
    finish_reason: str | None = None
    usage: tuple[int, ...] | None = None

    def with_(self, **changes: Any) -> Reply:
        return dataclasses.replace(self, **changes)

    def __add__(self, other: Reply) -> Reply:
        if not isinstance(other, Reply):
            return NotImplemented
        return Reply(
            text=self.text + other.text,
            tool_calls=self.tool_calls + other.tool_calls,
            delay=max(self.delay, other.delay),
            hold=self.hold or other.hold,
            chunk_delay=max(self.chunk_delay, other.chunk_delay),
            chunk_size=min(self.chunk_size, other.chunk_size),
            status=self.status or other.status,
            error_message=self.error_message or other.error_message,
            finish_reason=self.finish_reason or other.finish_reason,
            usage=self.usage or other.usage,
        )

    @property
    def is_error(self) -> bool:
        return self.status is not None and self.status >= 400

    def computed_finish_reason(self) -> str:
        if self.finish_reason:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    def describe(self) -> str:
        if self.is_error:
            return f"error({self.status})"
        bits = []
        if self.text:
            bits.append(f"text({self.text[:30]!r})")
        bits.extend(f"tool_call({c.name})" for c in self.tool_calls)
        return " + ".join(bits) or "text('')"


def text(s: str, **options: Any) -> Reply:
    """A plain text answer (finish_reason "stop")."""
    return Reply(text=s, **options)


def tool_call(name: str, args: Mapping[str, Any] | None = None, **options: Any) -> Reply:
    """One tool call; combine with `+` or use `tool_calls` for several in one response."""
    return Reply(tool_calls=(ToolCall(name, dict(args or {})),), **options)


def tool_calls(*calls: tuple[str, Mapping[str, Any]] | ToolCall, **options: Any) -> Reply:
    """Several tool calls in one response: `tool_calls(("bash", {...}), ("read", {...}))`."""
    out = []
    for c in calls:
        out.append(c if isinstance(c, ToolCall) else ToolCall(c[0], dict(c[1])))
    return Reply(tool_calls=tuple(out), **options)


def error(status: int = 500, message: str = "fake server error", **options: Any) -> Reply:
    """An HTTP error response; pi's auto-retry treats 429/5xx as retryable."""
    return Reply(status=status, error_message=message, **options)


def from_json(obj: Any) -> Reply:
    """A reply from the script format (see docs/pi-notes.md): a string is text."""
    if isinstance(obj, str):
        return text(obj)
    if not isinstance(obj, Mapping):
        raise ValueError(f"reply must be a string or an object, got {obj!r}")
    known = {
        "text",
        "tool_calls",
        "delay",
        "chunk_delay",
        "chunk_size",
        "error",
        "finish_reason",
        "usage",
    }
    unknown = set(obj) - known
    if unknown:
        raise ValueError(f"unknown reply keys {sorted(unknown)}; known: {sorted(known)}")
    calls = []
    for c in obj.get("tool_calls") or []:
        if not isinstance(c, Mapping) or "name" not in c:
            raise ValueError(f"tool call needs a name: {c!r}")
        calls.append(ToolCall(str(c["name"]), dict(c.get("arguments") or {}), c.get("id")))
    status = None
    message = ""
    err = obj.get("error")
    if err is not None:
        if isinstance(err, int):
            status = err
        elif isinstance(err, Mapping):
            status = int(err.get("status", 500))
            message = str(err.get("message", ""))
        else:
            raise ValueError(f"error must be a status or {{status, message}}: {err!r}")
    usage = obj.get("usage")
    usage_t = None
    if usage is not None:
        if not isinstance(usage, Mapping):
            raise ValueError(f"usage must be an object, got {usage!r}")
        unknown_usage = set(usage) - {
            "prompt_tokens",
            "completion_tokens",
            "cached_tokens",
            "cache_write_tokens",
        }
        if unknown_usage:
            raise ValueError(f"unknown usage keys {sorted(unknown_usage)}")
        usage_t = (
            int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)),
            int(usage.get("cached_tokens", 0)),
            int(usage.get("cache_write_tokens", 0)),
        )
    return Reply(
        text=str(obj.get("text", "")),
        tool_calls=tuple(calls),
        delay=float(obj.get("delay", 0.0)),
        chunk_delay=float(obj.get("chunk_delay", 0.0)),
        chunk_size=int(obj.get("chunk_size", 40)),
        status=status,
        error_message=message or ("fake server error" if status else ""),
        finish_reason=obj.get("finish_reason"),
        usage=usage_t,
    )
