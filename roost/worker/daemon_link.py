"""The worker's connection to roostd, kept up across roostd restarts.

roostd may be killed at any moment; the worker keeps pi running and reconnects (with a
growing delay, only while roostd is away), proves itself with the job token and sends its
full snapshot, so the new roostd knows everything the old one did.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable
from typing import Any

from roost.host import paths
from roost.job.record import JobRecord
from roost.tasks import Tasks
from roost.wire import protocol
from roost.wire.connection import Connection
from roost.wire.protocol import ProtocolError, RequestError

log = logging.getLogger(__name__)

RECONNECT_MAX_DELAY = 1.0


class DaemonLink:
    def __init__(
        self,
        record: JobRecord,
        on_event: Callable[[dict[str, Any]], None],
        snapshot: Callable[[], dict[str, Any]],
        tasks: Tasks | None = None,
    ) -> None:
        self.record = record
        self._tasks = tasks if tasks is not None else Tasks(log)  # the sends nothing awaits (the worker's)
        self._on_event = on_event
        self._snapshot = snapshot
        self._conn: Connection | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._last_sent: dict[str, Any] | None = None
        self._bound = asyncio.Event()
        self._outbox: list[tuple[str, dict[str, Any], Callable[[], None] | None]] = []
        self._flushing = False
        self._partial: dict[str, Any] | None = None  # what pi streams now (worker.streaming)
        # The states this worker went through before its first hello was answered, each
        # snapshot that changed it: roostd hears them in order (a run that started and
        # opened a dialog by then is `starting -> running -> needs_input`, not a jump).
        self._trail: list[dict[str, Any]] | None = []

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._bound.is_set()

    async def _open(self) -> Connection:
        reader, writer = await asyncio.open_unix_connection(
            str(paths.socket_path()), limit=protocol.MAX_FRAME + 1
        )
        conn = Connection(reader, writer)
        greeting = await conn.read_frame()
        if greeting is None:
            raise ConnectionError("roostd closed the connection")
        protocol.check_greeting(greeting)
        return conn

    async def run(self) -> None:
        delay = 0.02
        while True:
            try:
                conn = await self._open()
            except (OSError, ProtocolError) as exc:
                log.debug("roostd not reachable: %s", exc)
                await asyncio.sleep(delay)  # only while roostd is away
                delay = min(delay * 2, RECONNECT_MAX_DELAY)
                continue
            delay = 0.02
            self._conn = conn
            reader = asyncio.create_task(self._read(conn))
            try:
                await self._call(
                    conn, "worker_hello", job=self.record.id, token=self.record.token, pid=os.getpid()
                )
                self._bound.set()
                self._last_sent = None
                trail, self._trail = self._trail or [], None
                for earlier in trail:
                    self.update(earlier)
                self.update(self._snapshot())
                if self._partial is not None:  # a new roostd knows nothing of it
                    self.partial(self._partial)
                self._flush()
                await reader
            except RequestError as exc:
                log.error("roostd refused this worker: %s", exc.message)
                reader.cancel()
                await asyncio.sleep(RECONNECT_MAX_DELAY)
            except (OSError, ProtocolError):
                pass
            finally:
                self._bound.clear()
                self._conn = None
                conn.close()
                for future in self._pending.values():
                    if not future.done():
                        future.set_exception(ConnectionError("roostd went away"))
                self._pending.clear()

    async def _read(self, conn: Connection) -> None:
        try:
            while True:
                try:
                    frame = await conn.read_frame()
                except (ConnectionError, OSError):
                    # roostd killed with our frames unread: the end of this connection,
                    # as an EOF is (raised, it went unseen when the hello failed first).
                    return
                if frame is None:
                    return
                if frame.get("type") == "response":
                    future = self._pending.pop(frame.get("id"), None)  # type: ignore[arg-type]
                    if future is not None and not future.done():
                        future.set_result(frame)
                elif frame.get("type") == "event":
                    self._on_event(frame)
        finally:
            # The connection is gone: no answer will come. Without this, a roostd killed
            # between taking a request and answering it (the worker_hello, a hand-back)
            # left its caller waiting forever, and the worker never reconnected.
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("roostd went away"))
            self._pending.clear()

    async def _call(self, conn: Connection, op: str, **args: Any) -> dict[str, Any]:
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        if not await conn.send({"id": request_id, "op": op, **args}):
            self._pending.pop(request_id, None)
            raise ConnectionError("roostd went away")
        frame = await future
        if not frame.get("ok"):
            error = frame.get("error") or {}
            raise RequestError(str(error.get("code")), str(error.get("message")))
        return frame.get("result") or {}

    async def request(self, op: str, **args: Any) -> dict[str, Any]:
        """A request on the bound connection (tool calls forwarded by the worker)."""
        if self._conn is None or not self._bound.is_set():
            raise RequestError(protocol.REFUSED, "roostd is not reachable right now")
        try:
            return await self._call(self._conn, op, **args)
        except ConnectionError as exc:
            raise RequestError(protocol.REFUSED, f"roostd went away: {exc}") from None

    async def turn(self) -> bool:
        """Ask roostd for a slot for a run from idle; True: go. Granted, the next snapshot
        is sent even if unchanged, so roostd hears what became of it (a run, or none)."""
        go = bool((await self.request("turn")).get("go"))
        if go:
            self._last_sent = None
        return go

    async def wait_bound(self, timeout: float) -> bool:
        """True once the link is bound to a roostd (at once when it is), False when it was
        not within `timeout` seconds."""
        if not self.connected:
            try:
                await asyncio.wait_for(self._bound.wait(), timeout)
            except TimeoutError:
                return False
        return self.connected

    async def after_hello(self, then: Callable[[], None]) -> None:
        """Call `then` once the link is bound to a roostd (at once when it is)."""
        await self._bound.wait()
        then()

    def send_reliably(self, op: str, then: Callable[[], None] | None = None, **args: Any) -> None:
        """A request that must reach roostd (a hand-back): retried after reconnects;
        `then` is called once roostd has answered it (or refused it)."""
        self._outbox.append((op, args, then))
        self._flush()

    def _flush(self) -> None:
        if self._flushing or not self._outbox or not self.connected:
            return
        self._flushing = True

        async def run() -> None:
            try:
                while self._outbox and self._conn is not None:
                    op, args, then = self._outbox[0]
                    try:
                        await self._call(self._conn, op, **args)
                    except RequestError as exc:
                        log.error("roostd refused %s: %s", op, exc.message)
                    self._outbox.pop(0)
                    if then is not None:
                        then()
            except (ConnectionError, OSError):
                pass  # sent again after the next hello
            finally:
                self._flushing = False

        self._tasks.spawn(run(), "sending to roostd")

    def update(self, snapshot: dict[str, Any]) -> None:
        """Send the snapshot if it changed; a disconnected link sends it on reconnect (the
        latest only, but before the first hello each state it went through)."""
        if self._conn is None or not self._bound.is_set():
            trail = self._trail
            if trail is not None and (not trail or trail[-1].get("state") != snapshot.get("state")):
                trail.append(dict(snapshot))
            return
        if snapshot == self._last_sent:
            return
        self._last_sent = dict(snapshot)
        conn = self._conn
        request_id = next(self._ids)
        self._tasks.spawn(
            conn.send({"id": request_id, "op": "worker_update", **snapshot}), "sending worker_update"
        )

    def partial(self, value: dict[str, Any] | None) -> None:
        """What pi streams now (null: nothing), for roostd's memory only; not retried: a
        roostd that was away gets the latest after the next hello."""
        self._partial = value
        if self._conn is None or not self._bound.is_set():
            return
        self._tasks.spawn(
            self._conn.send({"id": next(self._ids), "op": "partial", "partial": value}), "sending a partial"
        )

    async def exiting(self, reason: str, fatal: bool = False) -> None:
        if self._conn is None or not self._bound.is_set():
            return
        try:
            await asyncio.wait_for(self._call(self._conn, "worker_exiting", reason=reason, fatal=fatal), 5)
        except (RequestError, ConnectionError, TimeoutError):
            pass

    async def tell_fatal(self, reason: str) -> None:
        """Say why this worker gives up, on a fresh connection (the loop never ran)."""
        try:
            conn = await asyncio.wait_for(self._open(), 5)
        except (OSError, ProtocolError, TimeoutError):
            return
        reader = asyncio.create_task(self._read(conn))
        try:
            await asyncio.wait_for(
                self._call(
                    conn, "worker_hello", job=self.record.id, token=self.record.token, pid=os.getpid()
                ),
                5,
            )
            await asyncio.wait_for(self._call(conn, "worker_exiting", reason=reason, fatal=True), 5)
        except (RequestError, ConnectionError, TimeoutError, OSError):
            pass
        finally:
            reader.cancel()
            conn.close()
