"""roostd's event log: `$ROOST_HOME/events.jsonl`, one JSON object per line (README:
Events and hooks — the format is stable).

This module owns the log: appending (one `os.write` of one line per event: no fsync, so
the delivery path pays one buffered write and a power cut may lose the last events),
rotation by size, recovery of the last `seq` at start-up (so seq continues across
restarts with no gap and no duplicate), and the subscribers that `roost events --follow`
and the hooks hang off. The file's format and reading it are `roost.events.log`'s, which the
CLI shares.

Why the follower cannot miss an event: a subscription is made in one synchronous step on
the daemon's loop — read the log after `since`, then register — and the log is only
appended on that same loop, so nothing can be appended between the read and the
registration.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roost.events.log import KEEP, LOG_NAME, last_seq, log_path, read_events
from roost.host.fsutil import utc_now
from roost.wire.protocol import EVENT_TYPES

log = logging.getLogger(__name__)

MAX_BYTES = 8 * 1024 * 1024
"""The live file is rotated once it is this large..."""
SUBSCRIBER_BACKLOG = 10_000
"""A follower this far behind is dropped (it resumes from its last seq when it reconnects)."""


class Subscription:
    """One follower's queue: history after its `since`, then every new event, in order."""

    def __init__(self, accept: Callable[[dict[str, Any]], bool]) -> None:
        import asyncio

        self.accept = accept
        self.queue: deque[dict[str, Any]] = deque()
        self.wake = asyncio.Event()
        self.closed = False
        # Called once when the follower falls SUBSCRIBER_BACKLOG behind (the `events` op
        # drops its connection then: a pump stuck on a client that never reads would not).
        self.on_overflow: Callable[[], None] | None = None

    def push(self, event: dict[str, Any]) -> None:
        if self.closed or not self.accept(event):
            return
        if len(self.queue) >= SUBSCRIBER_BACKLOG:
            log.warning("an event follower is %d events behind: dropping it", len(self.queue))
            self.queue.clear()
            self.close()
            if self.on_overflow is not None:
                self.on_overflow()
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

    def __init__(
        self,
        home: Path,
        enabled: Callable[[], bool] = lambda: True,
        max_bytes: int = MAX_BYTES,
        keep: int = KEEP,
    ) -> None:
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
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
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
            "seq": self.seq,
            "time": utc_now(),
            "type": kind,
            "job": {"id": job.id, "name": job.name} if job is not None else None,
            **fields,
        }
        if self._fd is not None and self._enabled():
            try:
                self._write(
                    json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
                )
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

    def subscribe(self, since: int | None, accept: Callable[[dict[str, Any]], bool]) -> Subscription:
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
