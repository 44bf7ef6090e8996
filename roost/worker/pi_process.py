"""pi in RPC mode as an asyncio child: commands with ids, events to a callback.

Framing per pi's rpc.md: split stdout on b"\\n" only (a line may contain U+2028), strip a
trailing \\r. stdin stays open for pi's whole life (closing it makes pi exit).
"""

from __future__ import annotations

import asyncio
import ctypes
import itertools
import json
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

STREAM_LIMIT = 256 * 1024 * 1024  # agent_end carries every message of the run
PR_SET_PDEATHSIG = 1


class PiError(Exception):
    """pi answered a command with success: false, or went away."""


def _die_with_parent() -> None:
    # If the worker is killed (even with SIGKILL) pi gets SIGTERM instead of writing on
    # as an orphan: the restarted worker must be the only writer of the session file.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class PiProcess:
    def __init__(self, on_event: Callable[[dict[str, Any]], None]) -> None:
        self._on_event = on_event
        self._proc: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.exited = asyncio.Event()
        self.returncode: int | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def start(self, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,  # pi's stderr goes to the worker log
            cwd=cwd,
            env=env,
            limit=STREAM_LIMIT,
            preexec_fn=_die_with_parent,
        )
        self._reader = asyncio.create_task(self._read_loop())

    async def _read_loop(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
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
            self.returncode = await self._proc.wait()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(PiError(f"pi exited ({self.returncode})"))
            self._pending.clear()
            self.exited.set()

    async def command(self, kind: str, timeout: float | None = 60.0, **fields: Any) -> Any:
        """Send a command; its `data` on success, PiError on failure."""
        if self._proc is None or self._proc.stdin is None or self.exited.is_set():
            raise PiError("pi is not running")
        request_id = f"r{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        data = json.dumps({"id": request_id, "type": kind, **fields}, ensure_ascii=False)
        self._proc.stdin.write(data.encode("utf-8") + b"\n")
        await self._proc.stdin.drain()
        response = await asyncio.wait_for(future, timeout)
        if not response.get("success"):
            raise PiError(f"{kind}: {response.get('error') or 'failed'}")
        return response.get("data")

    async def send_raw(self, frame: dict[str, Any]) -> None:
        """A frame that gets no response (extension_ui_response)."""
        if self._proc is None or self._proc.stdin is None or self.exited.is_set():
            raise PiError("pi is not running")
        self._proc.stdin.write(json.dumps(frame, ensure_ascii=False).encode("utf-8") + b"\n")
        await self._proc.stdin.drain()

    async def shutdown(self, timeout: float = 10.0) -> int | None:
        """Close stdin (pi exits 0 by itself), then SIGTERM, then SIGKILL."""
        if self._proc is None or self.exited.is_set():
            return self.returncode
        if self._proc.stdin is not None:
            try:
                self._proc.stdin.close()
            except (OSError, RuntimeError):
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                await asyncio.wait_for(self.exited.wait(), timeout)
                return self.returncode
            except TimeoutError:
                try:
                    os.kill(self._proc.pid, sig)
                except ProcessLookupError:
                    pass
        await self.exited.wait()
        return self.returncode
