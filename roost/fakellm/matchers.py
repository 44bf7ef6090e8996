"""Composable request matchers: `a & b`, `a | b`, `~a`.

Each matcher is a predicate over the parsed request body (see `requests.py`). Its `desc`
names it in rule names, logs and error messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import roost.fakellm.requests as rq

Pred = Callable[[Mapping[str, Any]], bool]


class Matcher:
    """A named predicate over a request."""

    __slots__ = ("fn", "desc")

    def __init__(self, fn: Pred, desc: str) -> None:
        self.fn = fn
        self.desc = desc

    def __call__(self, request: Mapping[str, Any]) -> bool:
        return bool(self.fn(request))

    def __and__(self, other: Matcher | Pred) -> Matcher:
        b = as_matcher(other)
        return Matcher(lambda r: self(r) and b(r), f"({self.desc} & {b.desc})")

    def __or__(self, other: Matcher | Pred) -> Matcher:
        b = as_matcher(other)
        return Matcher(lambda r: self(r) or b(r), f"({self.desc} | {b.desc})")

    def __invert__(self) -> Matcher:
        return Matcher(lambda r: not self(r), f"~{self.desc}")

    def __repr__(self) -> str:
        return f"Matcher({self.desc})"


def as_matcher(m: Matcher | Pred | None) -> Matcher:
    if m is None:
        return always()
    if isinstance(m, Matcher):
        return m
    return predicate(m)


def always() -> Matcher:
    return Matcher(lambda r: True, "always")


def predicate(fn: Pred, desc: str | None = None) -> Matcher:
    """Any callable over the parsed request."""
    return Matcher(fn, desc or str(getattr(fn, "__name__", "predicate")))


def all_of(*ms: Matcher | Pred) -> Matcher:
    parts = [as_matcher(m) for m in ms]
    return Matcher(lambda r: all(m(r) for m in parts), "all(" + ", ".join(m.desc for m in parts) + ")")


def any_of(*ms: Matcher | Pred) -> Matcher:
    parts = [as_matcher(m) for m in ms]
    return Matcher(lambda r: any(m(r) for m in parts), "any(" + ", ".join(m.desc for m in parts) + ")")


def last_user_contains(s: str) -> Matcher:
    """The last `role: "user"` message contains `s` (extension messages are role user)."""
    return Matcher(lambda r: s in rq.last_user_text(r), f"last_user_contains({s!r})")


def first_user_contains(s: str) -> Matcher:
    """The first user message (the task) contains `s`: tells agents/jobs apart."""
    return Matcher(lambda r: s in rq.first_user_text(r), f"first_user_contains({s!r})")


def any_message_contains(s: str) -> Matcher:
    """Any message (system, user, assistant incl. tool-call arguments, tool) contains `s`."""
    return Matcher(lambda r: s in rq.messages_text(r), f"any_message_contains({s!r})")


def system_contains(s: str) -> Matcher:
    return Matcher(lambda r: s in rq.system_text(r), f"system_contains({s!r})")


def last_is_tool_result(name: str | None = None) -> Matcher:
    """The last message is a tool result (`role: "tool"`), optionally of tool `name`."""

    def fn(r: Mapping[str, Any]) -> bool:
        last = rq.last_message(r)
        if not last or last.get("role") != "tool":
            return False
        if name is None:
            return True
        return rq.tool_name_for_call(r, str(last.get("tool_call_id"))) == name

    return Matcher(fn, f"last_is_tool_result({name!r})" if name else "last_is_tool_result()")


def last_tool_result_contains(s: str) -> Matcher:
    """The last message is a tool result whose text contains `s`."""

    def fn(r: Mapping[str, Any]) -> bool:
        last = rq.last_message(r)
        return bool(last and last.get("role") == "tool" and s in rq.message_text(last))

    return Matcher(fn, f"last_tool_result_contains({s!r})")


def has_tool(name: str) -> Matcher:
    """The request offers a tool called `name` to the model."""
    return Matcher(lambda r: name in rq.tool_names(r), f"has_tool({name!r})")
