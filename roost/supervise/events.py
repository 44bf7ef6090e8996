"""roostd's event log: `$ROOST_HOME/events.jsonl`, one JSON object per line (README:
Events and hooks — the format is stable).

This module owns the log: appending (one `os.write` of one line per event: no fsync, so
the delivery path pays one buffered write and a power cut may lose the last events),
rotation by size, recovery of the last `seq` at start-up (so seq continues across
restarts with no gap and no duplicate), reading events since a seq or a time, and the
subscribers that `roost events --follow` and the hooks hang off.

Why the follower cannot miss an event: a subscription is made in one synchronous step on
the daemon's loop — read the log after `since`, then register — and the log is only
appended on that same loop, so nothing can be appended between the read and the
registration. The reading helpers at the bottom use only the standard library: the CLI
reads history with them without talking to roostd.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from roost.fsutil import utc_now
from roost.protocol import EVENT_TYPES

log = logging.getLogger(__name__)

LOG_NAME = "events.jsonl"
MAX_BYTES = 8 * 1024 * 1024
"""The live file is rotated once it is this large..."""
KEEP = 5
"""...into events.jsonl.1 (newest) .. events.jsonl.5 (oldest); older ones are deleted."""
TAIL_BYTES = 64 * 1024
SUBSCRIBER_BACKLOG = 10_000
"""A follower this far behind is dropped (it resumes from its last seq when it reconnects)."""



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


class Subscription:
    """One follower's queue: history after its `since`, then every new event, in order."""

    def __init__(self, accept: Callable[[dict[str, Any]], bool]) -> None:
        import asyncio

        self.accept = accept
        self.queue: deque[dict[str, Any]] = deque()
        self.wake = asyncio.Event()
        self.closed = False

    def push(self, event: dict[str, Any]) -> None:
        if self.closed or not self.accept(event):
            return
        if len(self.queue) >= SUBSCRIBER_BACKLOG:
            log.warning("an event follower is %d events behind: dropping it", len(self.queue))
            self.close()
            return
        self.queue.append(event)
        self.wake.set()

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    async def get(self) -> dict[str, Any] | None:
        """The next event; None once closed."""
        while not self.queue:
            if self.closed:
                return None
            self.wake.clear()
            await self.wake.wait()
        if self.closed:
            return None
        return self.queue.popleft()


class EventLog:
    """The daemon's side: `emit` appends and fans out; `subscribe` starts a follower."""

    def __init__(self, home: Path, enabled: Callable[[], bool] = lambda: True,
                 max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
        self.home = home
        self.path = log_path(home)
        self.max_bytes = max_bytes
        self.keep = keep
        self._enabled = enabled
        self._fd: int | None = None
        self._size = 0
        self.seq = 0
        self.subscriptions: set[Subscription] = set()
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    def open(self) -> None:
        self.seq = last_seq(self.home)
        self._open_file()

    def _open_file(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                           0o600)
        self._size = os.fstat(self._fd).st_size
        if self._size:
            # A crash may have torn the last line: start ours on a line of its own.
            with open(self.path, "rb") as handle:
                handle.seek(self._size - 1)
                if handle.read(1) != b"\n":
                    self._write(b"\n")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        os.write(self._fd, data)
        self._size += len(data)

    def emit(self, kind: str, job: Any = None, /, **fields: Any) -> dict[str, Any]:
        """Append one event (`job`: a record with id and name, or None) and fan it out."""
        assert kind in EVENT_TYPES, kind
        self.seq += 1
        event: dict[str, Any] = {
            "seq": self.seq, "time": utc_now(), "type": kind,
            "job": {"id": job.id, "name": job.name} if job is not None else None,
            **fields,
        }
        if self._fd is not None and self._enabled():
            try:
                self._write(json.dumps(event, ensure_ascii=False, separators=(",", ":"))
                            .encode("utf-8") + b"\n")
                if self._size >= self.max_bytes:
                    self._rotate()
            except OSError as exc:  # a full disk must not stop the daemon
                log.error("could not append to %s: %s", self.path, exc)
        for sub in list(self.subscriptions):
            sub.push(event)
            if sub.closed:
                self.subscriptions.discard(sub)
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # a listener bug must not take the emitter down
                log.exception("event listener failed on %s", kind)
        return event

    def _rotate(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            (self.home / f"{LOG_NAME}.{self.keep}").unlink()
        for n in range(self.keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(self.home / f"{LOG_NAME}.{n}", self.home / f"{LOG_NAME}.{n + 1}")
        os.replace(self.path, self.home / f"{LOG_NAME}.1")
        self._open_file()
        log.info("rotated %s (kept %d older files)", self.path, self.keep)

    def subscribe(self, since: int | None, accept: Callable[[dict[str, Any]], bool]
                  ) -> Subscription:
        """A follower of events after `since` (None: only new ones). Synchronous on
        purpose: see the module docstring."""
        sub = Subscription(accept)
        if since is not None and since < self.seq:
            for event in read_events(self.home, since):
                sub.push(event)
        self.subscriptions.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.close()
        self.subscriptions.discard(sub)
