"""Reading pi session files (JSONL, version 3): what was delivered, and a readable transcript.

A session file is appended entry by entry by its one writer; a reader may see a last line
that is still being written, so an undecodable line is skipped, never fatal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from roost.agents.envelope import title
from roost.wire.protocol import CUSTOM_TYPE, NOTE_TYPE, scrub_text


def read_entries(path: str | Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except (ValueError, RecursionError):  # cut short, garbled, not UTF-8, too deep
                    continue
                if isinstance(entry, dict):
                    if b"\\ud" in line or b"\\uD" in line:  # a model's text cut mid-pair
                        entry = scrub_text(entry)
                    entries.append(entry)
    except FileNotFoundError:
        pass
    return entries


def content_text(content: Any) -> str:
    """Text of a message's content: a string, or a list of parts (text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
        return "\n".join(parts)
    return ""


def parse_millis(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class UserMessage:
    text: str
    millis: float | None  # when pi took it


@dataclass(frozen=True)
class Delivered:
    """What a session file already holds: agent item seqs and user messages."""

    agent_seqs: frozenset[int]
    user_messages: tuple[UserMessage, ...]


def delivered(entries: list[dict[str, Any]]) -> Delivered:
    """What a session's entries (read_entries) already hold."""
    seqs: set[int] = set()
    users: list[UserMessage] = []
    for entry in entries:
        kind = entry.get("type")
        if kind == "custom_message" and entry.get("customType") == CUSTOM_TYPE:
            seq = (entry.get("details") or {}).get("seq")
            if isinstance(seq, int):
                seqs.add(seq)
        elif kind == "message":
            message = entry.get("message") or {}
            if message.get("role") == "user":
                when = parse_millis(message.get("timestamp")) or parse_millis(entry.get("timestamp"))
                users.append(UserMessage(content_text(message.get("content")), when))
    return Delivered(frozenset(seqs), tuple(users))


INPUT_ROLES = frozenset({"user", "toolResult", "custom"})


def interrupted(entries: list[dict[str, Any]]) -> bool:
    """Does the session end inside a run: input the model has not answered yet?

    That is input last (a user message, a tool result, an injected message), or an answer
    that was cut short (`toolUse` with its tools never finished, or `aborted`: pi 1.x, shut
    down in the middle of a run, records the aborted tool results, its queued steers and an
    empty aborted answer). Whether an abort was a crash or the user's own doing is not in
    the session: the worker's run note (roost.worker.runnote) says.
    """
    for entry in reversed(entries):
        kind = entry.get("type")
        if kind == "custom_message":
            return True
        if kind == "message":
            message = entry.get("message") or {}
            role = message.get("role")
            if role == "assistant":
                return message.get("stopReason") in ("toolUse", "aborted")
            if role in INPUT_ROLES:
                return True
            # anything else (pi 1.x's "system" entry, a bash execution) is not a turn
    return False


def _clip(text: str, limit: int) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


EXIT_LINE = "Command exited with code "
"""How pi's bash tool ends the text of a command that failed (both pi lines)."""


def tool_outcome(message: dict[str, Any]) -> str:
    """A tool result's outcome in a few words: for bash its exit code (pi writes it at the
    end of a failed command's text; a result that is no error exited 0), and how long the
    tool ran when pi recorded it (`durationMs`, pi 1.x): `exit 2 · 1.4 s`."""
    parts = []
    if message.get("toolName") == "bash":
        text = content_text(message.get("content")).rstrip()
        tail = text.rpartition(EXIT_LINE)[2] if EXIT_LINE in text else ""
        if tail.isdigit():
            parts.append(f"exit {tail}")
        elif not message.get("isError"):
            parts.append("exit 0")
    duration = message.get("durationMs")
    if isinstance(duration, (int, float)) and not isinstance(duration, bool) and duration >= 0:
        parts.append(f"{duration:.0f} ms" if duration < 1000 else f"{duration / 1000:.1f} s")
    return " · ".join(parts)


def render(entries: list[dict[str, Any]], verbose: bool = False) -> Iterator[str]:
    """Readable transcript lines. Agent messages and reports are framed as their own entries."""
    for entry in entries:
        kind = entry.get("type")
        stamp = str(entry.get("timestamp") or "")[11:19]
        if kind == "session":
            yield f"── session {entry.get('id', '')} in {entry.get('cwd', '')}"
        elif kind == "custom_message" and entry.get("customType") == CUSTOM_TYPE:
            details = entry.get("details") or {}
            heading = details.get("title") or title(  # sessions older than the title
                str(details.get("kind") or "message"),
                details.get("from"),
                str(details.get("relation") or "?"),
            )
            yield f"{stamp} {heading} [seq {details.get('seq')}]"
            for line in content_text(entry.get("content")).splitlines():
                yield f"    │ {line}"
        elif kind == "custom_message" and entry.get("customType") == NOTE_TYPE:
            yield f"{stamp} ⟳ roost: {content_text(entry.get('content'))}"
        elif kind == "message":
            message = entry.get("message") or {}
            role = message.get("role")
            content = message.get("content")
            if role == "user":
                yield f"{stamp} user: {content_text(content)}"
            elif role == "assistant":
                yield from _render_assistant(stamp, content, message, verbose)
            elif role == "toolResult":
                text = content_text(content)
                flag = " (error)" if message.get("isError") else ""
                outcome = tool_outcome(message)
                flag += f" ({outcome})" if outcome else ""
                yield f"{stamp}   ⎿ {message.get('toolName', 'tool')}{flag}: " + _clip(
                    text.replace("\n", " ⏎ "), 10_000 if verbose else 200
                )
        elif kind == "compaction":
            yield f"{stamp} ── compacted"
        elif kind == "model_change":
            yield f"{stamp} ── model {entry.get('provider', '')}/{entry.get('modelId', '')}"


def _render_assistant(stamp: str, content: Any, message: dict[str, Any], verbose: bool) -> Iterator[str]:
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and str(part.get("text", "")).strip():
            yield f"{stamp} assistant: {part['text']}"
        elif part.get("type") == "toolCall":
            args = json.dumps(part.get("arguments", {}), ensure_ascii=False)
            yield f"{stamp}   ⚙ {part.get('name')} {_clip(args, 10_000 if verbose else 200)}"
    if message.get("stopReason") in ("error", "aborted"):
        detail = message.get("errorMessage") or ""
        yield f"{stamp}   ✗ {message['stopReason']} {detail}".rstrip()
