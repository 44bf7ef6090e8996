"""Recorded model requests and helpers that read text out of them.

A request is the parsed JSON body pi POSTed to `/v1/chat/completions`, in OpenAI
chat-completions shape: `messages` (`system` | `user` | `assistant` | `tool`), `tools`,
`stream`, ... . pi sends custom extension messages as `role: "user"` and tool results as
`role: "tool"` (with `tool_call_id`, no tool name).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any


class Request(dict[str, Any]):
    """A parsed request body (a plain dict) plus where and when it was received.

    `index` is its position in `FakeLLM.requests`, `t` the `time.monotonic()` of receipt,
    `rule` the name of the rule that answered it (None for the default reply), `path` the
    HTTP path, `authorization` its Authorization header (never logged), `completed` whether
    the whole answer was written (False while held, or when the client hung up first).
    """

    def __init__(
        self,
        body: Mapping[str, Any],
        *,
        index: int = 0,
        t: float = 0.0,
        rule: str | None = None,
        path: str = "/v1/chat/completions",
        authorization: str | None = None,
    ) -> None:
        super().__init__(body)
        self.index = index
        self.t = t
        self.rule = rule
        self.path = path
        self.authorization = authorization  # the Authorization header (pi's API key)
        self.completed = False

    def record(self) -> dict[str, Any]:
        """The JSON-lines log form: metadata plus the untouched body."""
        return {
            "index": self.index,
            "t": self.t,
            "rule": self.rule,
            "path": self.path,
            "body": dict(self),
        }

    def __repr__(self) -> str:
        return f"Request(index={self.index}, rule={self.rule!r}, last_user={last_user_text(self)[:60]!r})"


def content_text(content: Any) -> str:
    """Text of an OpenAI message `content`: a string, a list of parts, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)


def message_text(message: Mapping[str, Any]) -> str:
    """Text of one message, including the name and arguments of any tool calls."""
    text = content_text(message.get("content"))
    calls = message.get("tool_calls") or []
    extra = []
    for call in calls:
        fn = call.get("function") or {}
        extra.append(f"{fn.get('name', '')}({fn.get('arguments', '')})")
    if extra:
        text = "\n".join([text, *extra]) if text else "\n".join(extra)
    return text


def messages(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    msgs = request.get("messages")
    return list(msgs) if isinstance(msgs, list) else []


def messages_text(request: Mapping[str, Any]) -> str:
    """All message texts of a request, system prompt included, one per line."""
    return "\n".join(message_text(m) for m in messages(request))


def _nth_with_role(request: Mapping[str, Any], role: str, last: bool) -> dict[str, Any] | None:
    msgs = messages(request)
    if last:
        msgs = list(reversed(msgs))
    for m in msgs:
        if m.get("role") == role:
            return m
    return None


def last_user_text(request: Mapping[str, Any]) -> str:
    """Text of the last `role: "user"` message (extension custom messages count), or ""."""
    m = _nth_with_role(request, "user", last=True)
    return message_text(m) if m else ""


def first_user_text(request: Mapping[str, Any]) -> str:
    """Text of the first user message: the task that started the conversation."""
    m = _nth_with_role(request, "user", last=False)
    return message_text(m) if m else ""


def system_text(request: Mapping[str, Any]) -> str:
    parts = [message_text(m) for m in messages(request) if m.get("role") in ("system", "developer")]
    return "\n".join(parts)


def last_message(request: Mapping[str, Any]) -> dict[str, Any] | None:
    msgs = messages(request)
    return msgs[-1] if msgs else None


def tool_name_for_call(request: Mapping[str, Any], tool_call_id: str) -> str | None:
    """The function name of the assistant tool call with this id, if the request holds it."""
    for m in messages(request):
        for call in m.get("tool_calls") or []:
            if call.get("id") == tool_call_id:
                return (call.get("function") or {}).get("name")
    return None


def tool_results(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every `role: "tool"` message, each with `name` filled in from the matching call."""
    out = []
    for m in messages(request):
        if m.get("role") == "tool":
            item = dict(m)
            item.setdefault("name", tool_name_for_call(request, str(m.get("tool_call_id"))))
            out.append(item)
    return out


def tool_names(request: Mapping[str, Any]) -> list[str]:
    """Names of the tools offered to the model in this request."""
    names = []
    for tool in request.get("tools") or []:
        fn = tool.get("function") or {}
        if fn.get("name"):
            names.append(fn["name"])
    return names


def new_user_texts(request: Mapping[str, Any]) -> list[str]:
    """The texts of the user messages since the model last spoke (what a request adds)."""
    tail = []
    for message in reversed(messages(request)):
        if message.get("role") != "user":
            break
        tail.append(message_text(message))
    return tail[::-1]


def all_tool_results(requests: Iterable[Mapping[str, Any]], tool: str | None = None) -> list[dict[str, Any]]:
    """Tool results across requests, once each (by tool_call_id), oldest first; each with
    `name` and `text`."""
    seen: set[str] = set()
    out = []
    for request in requests:
        for result in tool_results(request):
            call_id = str(result.get("tool_call_id"))
            if call_id in seen:
                continue
            seen.add(call_id)
            if tool is not None and result.get("name") != tool:
                continue
            out.append({**result, "text": content_text(result.get("content"))})
    return out


_ENVELOPE = re.compile(r"<agent-message (?P<attrs>[^\n]*)>\n(?P<body>.*?)\n</agent-message>", re.DOTALL)
_ATTR = re.compile(r'(\w+)="([^"]*)"')


def envelopes(text: str) -> list[dict[str, Any]]:
    """Every `<agent-message ...>` frame in `text`: its attributes plus `body` and `raw`."""
    out = []
    for match in _ENVELOPE.finditer(text):
        attrs = dict(_ATTR.findall(match.group("attrs")))
        attrs["body"] = match.group("body")
        attrs["raw"] = match.group(0)
        out.append(attrs)
    return out
