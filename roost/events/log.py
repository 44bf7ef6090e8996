"""The event log's file, `$ROOST_HOME/events.jsonl` (README: Events and hooks — the format
is stable): its files, rotated ones included, and reading events since a seq or a time.
Standard library only: the CLI reads history with it without talking to roostd, and
roostd's writer (`roost.events.writer`) recovers its last seq with it."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

LOG_NAME = "events.jsonl"
KEEP = 5
"""Rotated into events.jsonl.1 (newest) .. events.jsonl.5 (oldest); older ones are deleted."""
TAIL_BYTES = 64 * 1024


def log_path(home: Path) -> Path:
    return home / LOG_NAME


def log_files(home: Path, keep: int = KEEP) -> list[Path]:
    """The log's files that exist, oldest first."""
    rotated = [home / f"{LOG_NAME}.{n}" for n in range(keep + 10, 0, -1)]
    return [p for p in [*rotated, log_path(home)] if p.exists()]


def parse_line(line: bytes | str) -> dict[str, Any] | None:
    """One event, or None for a line that is not one (a torn last line after a crash)."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("seq"), int):
        return None
    return obj


def read_events(home: Path, since: int = 0, since_time: str | None = None) -> Iterator[dict[str, Any]]:
    """Every event with seq > `since` (and time >= `since_time`), in seq order.

    Every file is opened before any is read: a rotation meanwhile renames files, but an
    open file keeps its contents, so nothing is skipped.
    """
    handles = []
    for path in log_files(home):
        with contextlib.suppress(FileNotFoundError):
            handles.append(open(path, "rb"))  # noqa: SIM115 - closed below
    last = since
    try:
        for handle in handles:
            for line in handle:
                if since_time is None and _quick_seq(line) <= last:
                    continue  # history before `since`: skipped without parsing it
                event = parse_line(line)
                if event is None or event["seq"] <= last:
                    continue
                if since_time is not None and str(event.get("time", "")) < since_time:
                    continue
                last = event["seq"]
                yield event
    finally:
        for handle in handles:
            handle.close()


def _quick_seq(line: bytes) -> int:
    """The seq of a line as roostd writes it (`{"seq":N,...`) without parsing the JSON;
    a large number for anything else (which then gets parsed)."""
    if line.startswith(b'{"seq":'):
        end = line.find(b",", 7)
        with contextlib.suppress(ValueError):
            return int(line[7:end])
    return 1 << 62


def last_seq(home: Path) -> int:
    """The highest seq in the log (0 for none): from the tail of the newest file with one."""
    for path in reversed(log_files(home)):
        try:
            with open(path, "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(0, size - TAIL_BYTES))
                tail = handle.read()
        except FileNotFoundError:
            continue
        for line in reversed(tail.splitlines()):
            event = parse_line(line)
            if event is not None:
                return int(event["seq"])
        if size > TAIL_BYTES:  # one huge torn line at the end: read the whole file
            found = [e["seq"] for e in read_events_in(path)]
            if found:
                return int(max(found))
    return 0


def read_events_in(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as handle:
        for line in handle:
            event = parse_line(line)
            if event is not None:
                yield event


def matches(event: dict[str, Any], types: Iterable[str] | None, job: str | None) -> bool:
    """`types`: exact types or a prefix ending in `.` (`job.`); `job`: an id or a name,
    matched against the event's job and a message's sender and receiver."""
    if types:
        kind = str(event.get("type"))
        if not any(kind == t or (t.endswith(".") and kind.startswith(t)) for t in types):
            return False
    if job:
        refs = [event.get("job"), event.get("from"), event.get("to")]
        if not any(isinstance(r, dict) and job in (r.get("id"), r.get("name")) for r in refs):
            return False
    return True
