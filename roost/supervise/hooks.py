"""Hooks: commands that roostd runs on events (README: Events and hooks).

The user-level roost.json key `hooks` maps an event type to a command (a list: program
and arguments, no shell). For each matching event roostd runs the command with the
event's JSON on stdin and `ROOST_EVENT_TYPE`, `ROOST_EVENT_SEQ` and `ROOST_JOB` in the
environment.

Hooks never hold up roostd: `on_event` only appends to a bounded backlog (past it the
event's hook is dropped with a log line) and starts a runner task when fewer than
`hookMaxConcurrent` run. Each run is an asyncio subprocess in its own process group,
killed (the whole group) after `hookTimeoutSeconds`. Its exit code and the tail of its
stderr go to roostd's log. Its stderr is read as it comes and only STDERR_KEEP bytes of it
are kept (its head and its tail): a hook that writes 300 MB costs roostd nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections import deque
from collections.abc import Callable
from typing import Any

from roost.config import Settings
from roost.tasks import Tasks

log = logging.getLogger("roostd.hooks")

STDERR_TAIL = 400
"""Characters of a hook's stderr quoted in roostd's log."""
STDERR_KEEP = 8 * 1024
"""Bytes of a hook's stderr roostd holds: the first and the last half of it."""


class OutputTail:
    """A stream's head and tail up to `keep` bytes; the middle is counted, not kept."""

    def __init__(self, keep: int = STDERR_KEEP) -> None:
        self.half = keep // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        excess = len(self.tail) - self.half
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        cut = f"\n[… {self.dropped} bytes left out …]\n" if self.dropped else ""
        return bytes(self.head).decode("utf-8", "replace") + cut + bytes(self.tail).decode("utf-8", "replace")


async def _read_bounded(stream: asyncio.StreamReader | None, into: OutputTail) -> None:
    while stream is not None:
        chunk = await stream.read(64 * 1024)
        if not chunk:
            return
        into.add(chunk)


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    if stdin is None:
        return
    with contextlib.suppress(ConnectionError, BrokenPipeError):  # a hook may not read it
        stdin.write(data)
        await stdin.drain()
        stdin.close()


async def _run(proc: asyncio.subprocess.Process, data: bytes, err: OutputTail) -> None:
    await asyncio.gather(_feed(proc.stdin, data), _read_bounded(proc.stderr, err))
    await proc.wait()


class HookRunner:
    def __init__(self, settings: Callable[[], Settings]) -> None:
        self._settings = settings
        self.backlog: deque[tuple[list[str], dict[str, Any]]] = deque()
        self.running = 0
        self._tasks = Tasks(log)  # the runners (`_drain`)

    def on_event(self, event: dict[str, Any]) -> None:
        """An EventLog listener: queue the event's hook, if it has one. Never blocks."""
        settings = self._settings()
        command = settings.hooks.get(str(event["type"]))
        if not command:
            return
        if len(self.backlog) >= settings.hookMaxBacklog:
            log.warning(
                "hook for %s (seq %s) dropped: %d hooks already wait",
                event["type"],
                event["seq"],
                len(self.backlog),
            )
            return
        self.backlog.append((list(command), event))
        if self.running < max(1, settings.hookMaxConcurrent):
            self.running += 1
            self._tasks.spawn(self._drain(), "running hooks")

    async def _drain(self) -> None:
        try:
            while self.backlog:
                command, event = self.backlog.popleft()
                try:
                    await self.run_one(command, event)
                except Exception:
                    log.exception("hook %s failed", command[0])
        finally:
            self.running -= 1

    async def run_one(self, command: list[str], event: dict[str, Any]) -> int | None:
        """Run one hook to its end (or its kill); its exit code, None if it never ran."""
        timeout = self._settings().hookTimeoutSeconds
        argv = [os.path.expanduser(command[0]), *command[1:]]
        job = event.get("job") or {}
        env = dict(
            os.environ,
            ROOST_EVENT_TYPE=str(event["type"]),
            ROOST_EVENT_SEQ=str(event["seq"]),
            ROOST_JOB=str(job.get("id") or ""),
        )
        data = json.dumps(event, ensure_ascii=False).encode("utf-8") + b"\n"
        what = f"hook {argv[0]} for {event['type']} (seq {event['seq']})"
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            log.error("%s could not start: %s", what, exc)
            return None
        err = OutputTail()
        try:
            await asyncio.wait_for(_run(proc, data, err), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the hook and anything it started
            await proc.wait()
            log.warning("%s killed after %gs", what, timeout)
            return proc.returncode
        tail = err.text().strip()[-STDERR_TAIL:]
        level = logging.INFO if proc.returncode == 0 else logging.WARNING
        log.log(level, "%s exited %s%s", what, proc.returncode, f"; stderr: {tail}" if tail else "")
        return proc.returncode

    def close(self) -> None:
        self._tasks.cancel()
