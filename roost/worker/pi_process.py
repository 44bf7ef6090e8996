"""pi in RPC mode as seen from the worker's event loop: commands with ids, events out.

pi is spawned early by roost.worker.launch (a plain subprocess.Popen, before the worker's
heavy imports); `attach` wires its pipes into asyncio and watches its exit with a pidfd.
Framing per pi's rpc.md: split stdout on b"\\n" only (a line may contain U+2028), strip a
trailing \\r. stdin stays open for pi's whole life (closing it makes pi exit).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from roost.wire import protocol

log = logging.getLogger(__name__)

STREAM_LIMIT = 256 * 1024 * 1024  # agent_end carries every message of the run
STDERR_TAIL = 40  # lines of pi's stderr kept: why a pi that exited at start-up did


class PiError(Exception):
    """pi answered a command with success: false, or went away."""


class PiProcess:
    def __init__(self, on_event: Callable[[dict[str, Any]], None]) -> None:
        self._on_event = on_event
        self._popen: subprocess.Popen[bytes] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.exited = asyncio.Event()
        self.returncode: int | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    async def attach(self, popen: subprocess.Popen[bytes]) -> None:
        """Take over a pi spawned with stdin and stdout pipes."""
        assert popen.stdin is not None and popen.stdout is not None
        loop = asyncio.get_running_loop()
        self._popen = popen
        reader = asyncio.StreamReader(limit=STREAM_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), popen.stdout)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, popen.stdin)
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        exit_fd = os.pidfd_open(popen.pid)
        process_gone = asyncio.Event()

        def on_exit() -> None:
            loop.remove_reader(exit_fd)
            os.close(exit_fd)
            process_gone.set()

        loop.add_reader(exit_fd, on_exit)
        stderr_done: asyncio.Future[None] | None = None
        if popen.stderr is not None:
            errors = asyncio.StreamReader(limit=STREAM_LIMIT)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(errors), popen.stderr)
            self._stderr_task = asyncio.create_task(self._stderr_loop(errors))
            stderr_done = self._stderr_task
        self._reader = asyncio.create_task(self._read_loop(reader, process_gone, stderr_done))

    async def _stderr_loop(self, stderr: asyncio.StreamReader) -> None:
        """pi's stderr goes on to the worker log; its last lines are kept (start-up errors)."""
        while True:
            line = await stderr.readline()
            if not line:
                return
            with contextlib.suppress(OSError):
                sys.stderr.buffer.write(line)
                sys.stderr.flush()
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip("\r\n"))

    async def _read_loop(
        self,
        stdout: asyncio.StreamReader,
        process_gone: asyncio.Event,
        stderr_done: asyncio.Future[None] | None = None,
    ) -> None:
        assert self._popen is not None
        try:
            while True:
                line = await stdout.readline()
                if not line:
                    break
                try:
                    frame = json.loads(line.rstrip(b"\r\n"))
                except json.JSONDecodeError:
                    log.warning("pi printed a non-JSON line: %r", line[:200])
                    continue
                if b"\\ud" in line or b"\\uD" in line:  # maybe a lone surrogate: never passed on
                    frame = protocol.scrub_text(frame)
                if frame.get("type") == "response":
                    future = self._pending.pop(str(frame.get("id")), None)
                    if future is not None and not future.done():
                        future.set_result(frame)
                    continue
                try:
                    self._on_event(frame)
                except Exception:
                    log.exception("handling pi event %s failed", frame.get("type"))
        finally:
            await process_gone.wait()
            if stderr_done is not None:  # its last words are read before anyone asks why
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(stderr_done), 2)
            self.returncode = self._popen.wait()  # reaps it: the pidfd said it exited
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(PiError(f"pi exited ({self.returncode})"))
            self._pending.clear()
            self.exited.set()

    async def _write(self, frame: dict[str, Any]) -> None:
        if self._writer is None or self.exited.is_set():
            raise PiError("pi is not running")
        self._writer.write(json.dumps(frame, ensure_ascii=False).encode("utf-8") + b"\n")
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise PiError(f"pi went away: {exc}") from None

    async def command(self, kind: str, timeout: float | None = 60.0, **fields: Any) -> Any:
        """Send a command; its `data` on success, PiError on failure."""
        request_id = f"r{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._write({"id": request_id, "type": kind, **fields})
        except PiError:
            self._pending.pop(request_id, None)
            raise
        response = await asyncio.wait_for(future, timeout)
        if not response.get("success"):
            raise PiError(f"{kind}: {response.get('error') or 'failed'}")
        return response.get("data")

    async def send_raw(self, frame: dict[str, Any]) -> None:
        """A frame that gets no response (extension_ui_response)."""
        await self._write(frame)

    async def shutdown(self, timeout: float = 10.0) -> int | None:
        """Close stdin (pi exits 0 by itself), then SIGTERM, then SIGKILL."""
        if self._popen is None or self.exited.is_set():
            return self.returncode
        if self._writer is not None:
            try:
                self._writer.close()
            except (OSError, RuntimeError):
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                await asyncio.wait_for(self.exited.wait(), timeout)
                return self.returncode
            except TimeoutError:
                try:
                    os.kill(self._popen.pid, sig)
                except ProcessLookupError:
                    pass
        await self.exited.wait()
        return self.returncode
