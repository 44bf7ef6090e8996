"""Matchers and readers for scripted-model tests (used with kit.lab.Lab).

The model is scripted per job: every rule is keyed on `first_user_contains(<task marker>)`
so each job (whose task is its first user message) gets its own script. Agent items reach
the model as `role: "user"` messages starting `<agent-message`; tool results are
`role: "tool"` messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from roost.fakellm import Matcher, first_user_contains
from roost.fakellm.requests import (
    all_tool_results,
    content_text,
    envelopes,
    message_text,
    messages,
    new_user_texts,
    tool_results,
)
from roost.wire.protocol import CUSTOM_TYPE

__all__ = [
    "after_tool",
    "agent_messages_in",
    "all_tool_results",
    "entry_text",
    "envelopes",
    "fresh",
    "last_user_has",
    "new_user_has",
    "new_user_texts",
    "session_custom_messages",
    "task",
    "user_messages",
    "user_texts",
    "wait_file_command",
]


# -- matchers -------------------------------------------------------------------------------
def _last(request: Mapping[str, Any]) -> dict[str, Any]:
    msgs = messages(request)
    return msgs[-1] if msgs else {}


def last_user_has(text: str) -> Matcher:
    """The LAST message of the request is a user message containing `text` (so a rule keyed
    on it fires once per arrival, not again after the tool results that follow)."""

    def fn(r: Mapping[str, Any]) -> bool:
        last = _last(r)
        return last.get("role") == "user" and text in message_text(last)

    return Matcher(fn, f"last_user_has({text!r})")


def new_user_has(text: str) -> Matcher:
    """The request ends with user messages (those since the model last spoke) and one of
    them contains `text`: like `last_user_has`, but also when two items arrived together
    (e.g. a user reply and a report at the same tool boundary)."""

    def fn(r: Mapping[str, Any]) -> bool:
        return any(text in line for line in new_user_texts(r))

    return Matcher(fn, f"new_user_has({text!r})")


def task(marker: str) -> Matcher:
    """Requests of the job whose task (first user message) contains `marker`."""
    return first_user_contains(marker)


def fresh(marker: str) -> Matcher:
    """The first model request of that job: its only user message is the task."""

    def fn(r: Mapping[str, Any]) -> bool:
        users = [m for m in messages(r) if m.get("role") == "user"]
        return len(users) == 1 and _last(r).get("role") == "user"

    return first_user_contains(marker) & Matcher(fn, "fresh")


def after_tool(marker: str, tool: str, news: bool = False) -> Matcher:
    """The last message is the result of `tool` in the job of `marker`; with `news`, items
    that arrived at that tool boundary (user messages, e.g. a child's report) may follow it."""

    def fn(r: Mapping[str, Any]) -> bool:
        msgs = messages(r)
        end = len(msgs)
        while news and end and msgs[end - 1].get("role") == "user":
            end -= 1
        if not end or msgs[end - 1].get("role") != "tool":
            return False
        results = tool_results(r)
        return bool(results) and results[-1].get("name") == tool

    return first_user_contains(marker) & Matcher(fn, f"after_tool({tool!r})")


# -- reading requests -----------------------------------------------------------------------
def user_messages(request: Mapping[str, Any]) -> list[str]:
    """The text of every user message of a recorded model request, in order."""
    return [message_text(m) for m in messages(request) if m.get("role") == "user"]


def agent_messages_in(request: Mapping[str, Any]) -> list[str]:
    """User-role messages of a request that are agent envelopes."""
    return [t for t in user_messages(request) if t.startswith("<agent-message")]


def session_custom_messages(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("type") == "custom_message" and e.get("customType") == CUSTOM_TYPE]


def user_texts(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """The text of every user message in a session file's entries, in order."""
    out = []
    for entry in entries:
        message = entry.get("message") or {}
        if entry.get("type") == "message" and message.get("role") == "user":
            out.append(content_text(message.get("content")))
    return out


def entry_text(entry: Mapping[str, Any]) -> str:
    return content_text(entry.get("content"))


def wait_file_command(path: Path, limit: float = 60.0) -> str:
    """A bash command that returns once `path` exists (bounded, so nothing hangs forever)."""
    rounds = int(limit / 0.05)
    return f"for i in $(seq 1 {rounds}); do [ -e '{path}' ] && break; sleep 0.05; done; echo released"
