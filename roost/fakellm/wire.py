"""OpenAI chat-completions wire format: SSE chunks and plain JSON bodies for a `Reply`.

The streamed shape is what pi-ai's `openai-completions` provider parses (docs/pi-notes.md):
a role delta, content deltas, one `tool_calls` delta carrying id/name per call followed by
its arguments, a chunk with `finish_reason`, a usage chunk with `"choices": []`, then
`data: [DONE]`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from roost.fakellm.replies import Reply, ToolCall, new_call_id


def _estimate_tokens(n_chars: int) -> int:
    return max(1, n_chars // 4)


def resolve_calls(reply: Reply) -> list[ToolCall]:
    """The reply's tool calls with ids filled in (fresh ids for each response)."""
    return [c if c.id else ToolCall(c.name, c.arguments, new_call_id()) for c in reply.tool_calls]


def usage_for(reply: Reply, request_chars: int) -> dict[str, Any]:
    cached = cache_write = 0
    if reply.usage is not None:
        prompt, completion, cached, cache_write = (*reply.usage, 0, 0)[:4]
    else:
        out_chars = len(reply.text) + sum(len(c.name) + len(c.arguments_json()) for c in reply.tool_calls)
        prompt, completion = _estimate_tokens(request_chars), _estimate_tokens(out_chars)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached or cache_write:
        usage["prompt_tokens_details"] = {"cached_tokens": cached, "cache_write_tokens": cache_write}
    return usage


def _split(s: str, size: int) -> list[str]:
    size = max(1, size)
    return [s[i : i + size] for i in range(0, len(s), size)]


def sse_chunks(
    reply: Reply, calls: list[ToolCall], *, model: str, completion_id: str, request_chars: int
) -> Iterator[bytes]:
    """Every SSE event (`data: ...\\n\\n`) for a streamed reply, in order."""
    created = int(time.time())

    def chunk(delta: Mapping[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
        obj: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        if delta is None:
            obj["choices"] = []
        else:
            obj["choices"] = [{"index": 0, "delta": dict(delta), "finish_reason": finish}]
        obj.update(extra)
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for piece in _split(reply.text, reply.chunk_size):
        yield chunk({"content": piece})
    for index, call in enumerate(calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in _split(call.arguments_json(), max(reply.chunk_size, 1)):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, reply.computed_finish_reason())
    yield chunk(None, usage=usage_for(reply, request_chars))
    yield b"data: [DONE]\n\n"


def completion_body(
    reply: Reply, calls: list[ToolCall], *, model: str, completion_id: str, request_chars: int
) -> dict[str, Any]:
    """The non-streamed (`stream: false`) JSON response."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json()},
            }
            for c in calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.computed_finish_reason()}],
        "usage": usage_for(reply, request_chars),
    }


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = "rate_limit_error" if status == 429 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
