"""A JSON-lines connection over an asyncio stream, shared by roostd and the worker.

Reading splits on b"\\n" only and enforces protocol.MAX_FRAME; requests are dispatched
through one table; responses, errors and pushed events share one writer.

A connection holds only bounded memory (`Bounds`; roostd passes DAEMON_BOUNDS, README:
Limits): the socket is read in chunks into one frame buffer, and reading stops (the
kernel then holds the peer back) while `max_in_flight` of its requests are unanswered;
an unfinished frame and a connection's first frame must arrive within `frame_timeout`;
unfinished frames above a small free part draw on one `InputPool` for all connections;
answers waiting for a peer that does not read are bounded by `max_pending_out`, pushed
events by `push_high_water` (past it the peer gets a final `dropped` event and is
closed: it resumes from what it has, the event log's seq or a new `subscribe`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from roost.tasks import Tasks
from roost.wire import protocol
from roost.wire.protocol import FrameTooLarge, Op, ProtocolError, RequestError

log = logging.getLogger(__name__)

Handler = Callable[["Connection", dict[str, Any]], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class PeerCred:
    """Who is at the other end of a Unix socket, as the kernel says (SO_PEERCRED): the
    process that connected, not what it claims. Identity checks use this, never a pid or
    token from the request alone."""

    pid: int
    uid: int
    gid: int


def peer_credentials(writer: asyncio.StreamWriter) -> PeerCred | None:
    sock = writer.get_extra_info("socket")
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, gid = struct.unpack("3i", raw)
    return PeerCred(pid, uid, gid) if pid > 0 else None


def _unencodable(frame: dict[str, Any], exc: Exception) -> bytes | None:
    """What is sent instead of a frame that cannot be encoded: for a response, an `internal`
    error for the same request (its id, when that encodes); None (nothing) otherwise."""
    what = f"{frame.get('type') or 'request'} {frame.get('event') or frame.get('op') or ''}"
    log.error("cannot send a %s frame: %s", what.strip(), str(exc)[:200])
    if frame.get("type") != "response":
        return None
    message = (
        str(exc)
        if isinstance(exc, FrameTooLarge)
        else f"the answer could not be encoded ({type(exc).__name__})"
    )
    for request_id in (frame.get("id"), None):
        try:
            return protocol.encode(protocol.fail(request_id, protocol.INTERNAL, message))
        except (ProtocolError, ValueError, TypeError):
            continue
    return None


DROP_GRACE = 5.0
"""Seconds a dropped peer has to read its final frame before its socket is aborted."""
READ_CHUNK = 32 * 1024
"""Bytes read from the socket at a time (also the StreamReader limit roostd passes: its
own buffer pauses the socket past twice that, so it never holds a frame's worth)."""


class InputPool:
    """The bytes of unfinished frames, above each connection's free part, that all
    connections may hold at once: 60 unfinished 4 MiB frames must not cost 240 MB."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0

    def take(self, amount: int) -> bool:
        if amount > 0 and self.used + amount > self.capacity:
            return False
        self.used += amount
        return True


@dataclass(frozen=True)
class Bounds:
    """What one connection may hold (None: no bound; the worker's own sockets, which only
    its pi and roostd reach, use the default)."""

    max_in_flight: int = 64
    """Requests of one connection answered at once; past it its socket is not read."""
    frame_timeout: float | None = None
    """Seconds an unfinished frame (or a connection's first frame) may take to arrive."""
    free_partial: int = protocol.MAX_FRAME + 1
    """Bytes of an unfinished frame a connection holds without drawing on `pool`."""
    pool: InputPool | None = None
    max_pending_out: int | None = None
    """Bytes of answers and events waiting for a peer that does not read: past it the
    connection is dropped (a reading peer never gets near it: one frame at a time)."""
    push_high_water: int | None = None
    """The same for a pushed event (rows of `subscribe`, the event log of `events`)."""


class FrameTimeout(ProtocolError):
    """A connection's frame did not arrive within its `frame_timeout`."""


class InputFull(ProtocolError):
    """The shared InputPool could not hold more of this connection's unfinished frame."""


class Connection:
    """One peer of a JSON-lines socket. `bound` says who it proved to be (worker, peer)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, bounds: Bounds | None = None
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.bounds = bounds or Bounds()
        self.closed = asyncio.Event()
        self.job_id: str | None = None  # set once a worker proved its token
        self.peer_id: str | None = None  # set for a bound worker or foreground peer
        self.info: dict[str, Any] = {}
        self._write_lock = asyncio.Lock()
        self.peer = peer_credentials(writer)
        self.in_flight = 0  # requests read and not yet answered
        self.frames = 0  # complete frames read
        self.last_active = time.monotonic()  # a frame read or an answer sent
        self.pending_out = 0  # bytes of frames waiting to be written (and not yet drained)
        self._buf = bytearray()
        self._scanned = 0  # the part of _buf known to hold no newline
        self._skipping = False  # inside an oversize line: dropping it up to its newline
        self._frame_started = self.last_active
        self._reserved = 0  # bytes taken from bounds.pool
        self._tasks = Tasks(log)  # what runs for this peer and nothing awaits (`spawn`)

    def _pending_limit(self, push: bool) -> int | None:
        return self.bounds.push_high_water if push else self.bounds.max_pending_out

    def push(self, frame: dict[str, Any]) -> bool:
        """Queue a pushed event without waiting; False (and the peer dropped) when it has
        already this connection's `push_high_water` of frames unread."""
        limit = self._pending_limit(True)
        if self.closed.is_set():
            return False
        if limit is not None and self.pending_out > limit:
            self.drop(f"it did not read {self.pending_out} bytes of events")
            return False
        self.spawn(self.send(frame, push=True), "pushing an event")
        return True

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> None:
        """Run `coro` for this peer in the background (a frame sent without waiting, an
        event-log follow): kept until done, its failure logged, cancelled when the
        connection closes."""
        self._tasks.spawn(coro, what)

    def drop(self, why: str) -> None:
        """Close a peer that takes more than its share, with one final `dropped` event
        written after what it has not read yet (it may still read them), then abort the
        socket if it does not read that either."""
        if self.closed.is_set():
            return
        log.warning("dropping a connection (pid %s): %s", self.peer.pid if self.peer else "?", why)
        try:
            self.writer.write(
                protocol.encode(protocol.event("dropped", reason=f"roostd dropped this connection: {why}"))
            )
        except (ConnectionError, RuntimeError, OSError):
            pass
        self.close()
        transport = self.writer.transport
        asyncio.get_running_loop().call_later(DROP_GRACE, transport.abort)

    async def send(self, frame: dict[str, Any], push: bool = False) -> bool:
        """Write one frame; False when the peer is gone, or when this frame could not be
        encoded and was dropped (logged; `closed` tells the two apart). Never raises.

        A peer that does not read holds at most its bound of frames waiting here: past
        it the connection is dropped, rather than keeping every answer in memory."""
        if self.closed.is_set():
            return False
        try:
            data = protocol.encode(frame)
        except (ProtocolError, ValueError, TypeError) as exc:
            # Too large, or not encodable (a lone surrogate): this frame only. A response
            # becomes an `internal` error for its request; anything else is dropped. The
            # connection and every other request go on.
            fallback = _unencodable(frame, exc)
            if fallback is None:
                return False
            data = fallback
        limit = self._pending_limit(push)
        if limit is not None and self.pending_out + len(data) > limit + protocol.MAX_FRAME:
            self.drop(f"it did not read {self.pending_out} bytes of answers")
            return False
        self.pending_out += len(data)
        try:
            async with self._write_lock:
                if self.closed.is_set():
                    return False
                self.writer.write(data)
                await self.writer.drain()
            self.last_active = time.monotonic()
            return True
        except (ConnectionError, RuntimeError, OSError):
            self.close()
            return False
        finally:
            self.pending_out -= len(data)

    def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            self._tasks.cancel()  # a send left has nobody to write to
            self._release(0)
            self._buf = bytearray()
            try:
                self.writer.close()
            except (OSError, RuntimeError):
                pass

    def _release(self, keep: int) -> bool:
        """Hold exactly what an unfinished frame of `keep` bytes needs from the pool;
        False when the pool cannot give it."""
        pool = self.bounds.pool
        if pool is None:
            return True
        want = max(0, keep - self.bounds.free_partial)
        if not pool.take(want - self._reserved):
            return False
        self._reserved = want
        return True

    async def read_frame(self) -> dict[str, Any] | None:
        """Next frame, None at end of stream. Raises ProtocolError for bad input.

        An oversize line is consumed up to its newline before raising, so the
        stream stays aligned on frame boundaries.
        """
        while True:
            newline = self._buf.find(b"\n", self._scanned)
            if newline >= 0:
                line = bytes(self._buf[: newline + 1])
                del self._buf[: newline + 1]
                self._scanned = 0
                self._release(len(self._buf))
                self._frame_started = time.monotonic()
                if self._skipping:
                    self._skipping = False
                    raise FrameTooLarge()
                if line.strip():  # blank lines between frames are skipped, not answered
                    self.frames += 1
                    self.last_active = time.monotonic()
                    return protocol.decode(line)
                continue
            if self._skipping or len(self._buf) > protocol.MAX_FRAME:
                self._skipping = True  # the rest of the line is read and dropped
                self._buf.clear()
                self._release(0)
            self._scanned = len(self._buf)
            chunk = await self._read_chunk()
            if not chunk:
                rest, self._buf = bytes(self._buf), bytearray()
                self._release(0)
                if self._skipping or not rest.strip():
                    return None
                return protocol.decode(rest)
            if not self._buf:
                self._frame_started = time.monotonic()
            self._buf += chunk
            if not self._release(len(self._buf)):
                self._buf.clear()
                self._release(0)
                raise InputFull("roostd's buffers for unfinished frames are full")

    async def _read_chunk(self) -> bytes:
        """Up to READ_CHUNK bytes; within the frame timeout while a frame is unfinished or
        none came yet (an idle connection between frames may wait)."""
        timeout = self.bounds.frame_timeout
        if timeout is None or (self.frames and not self._buf):
            return await self.reader.read(READ_CHUNK)
        left = self._frame_started + timeout - time.monotonic()
        try:
            return await asyncio.wait_for(self.reader.read(READ_CHUNK), max(0.0, left))
        except TimeoutError:
            what = "an unfinished frame" if self._buf else "a first frame"
            raise FrameTimeout(f"{what} did not arrive within {timeout:g}s") from None


async def serve_connection(
    conn: Connection,
    handlers: dict[str, Handler],
    ops: dict[str, Op],
    authorize: Callable[[Connection, Op], str | None],
) -> None:
    """Read requests until EOF; answer each through `handlers`. Never raises.

    Requests are handled concurrently (a `wait` must not block the next request), each
    in its own task; `authorize` returns an error text when the caller may not use an op.
    """
    tasks: set[asyncio.Task[None]] = set()
    try:
        while not conn.closed.is_set():
            if len(tasks) >= conn.bounds.max_in_flight:
                # Backpressure: the socket is not read until an answer went out, so a
                # client that pipelines and never reads holds a bounded number of them.
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                continue
            try:
                frame = await conn.read_frame()
            except (FrameTimeout, InputFull) as exc:
                log.warning("closing a connection (pid %s): %s", conn.peer.pid if conn.peer else "?", exc)
                break
            except ProtocolError as exc:
                code = protocol.FRAME_TOO_LARGE if isinstance(exc, FrameTooLarge) else protocol.BAD_FRAME
                await conn.send(protocol.fail(None, code, str(exc)))
                continue
            except (ConnectionError, OSError):
                break
            if frame is None:
                break
            task = asyncio.create_task(_answer(conn, frame, handlers, ops, authorize))
            tasks.add(task)
            conn.in_flight = len(tasks)
            task.add_done_callback(partial(_done, conn, tasks))
    finally:
        conn.close()
        for task in list(tasks):
            task.cancel()


def _done(conn: Connection, tasks: set[asyncio.Task[None]], task: asyncio.Task[None]) -> None:
    tasks.discard(task)
    conn.in_flight = len(tasks)


async def _answer(
    conn: Connection,
    frame: dict[str, Any],
    handlers: dict[str, Handler],
    ops: dict[str, Op],
    authorize: Callable[[Connection, Op], str | None],
) -> None:
    request_id = frame.get("id")
    name = frame.get("op")
    if frame.get("type") == "response" or frame.get("type") == "event":
        return  # a client's answer to something we pushed; nothing to dispatch
    where = protocol.invalid_text(frame)
    if where is not None:  # refused before any handler keeps it (README: the socket)
        if protocol.invalid_text(request_id) is not None:
            request_id = None
        await conn.send(
            protocol.fail(request_id, protocol.BAD_REQUEST, f"{where}: not valid Unicode (a lone surrogate)")
        )
        return
    if not isinstance(name, str):
        await conn.send(protocol.fail(request_id, protocol.BAD_REQUEST, "missing field 'op'"))
        return
    op = ops.get(name)
    handler = handlers.get(name)
    if op is None or handler is None:
        await conn.send(protocol.fail(request_id, protocol.UNKNOWN_OP, f"unknown op {name!r}"))
        return
    denied = authorize(conn, op)
    if denied:
        await conn.send(protocol.fail(request_id, protocol.UNAUTHORIZED, denied))
        return
    missing = protocol.missing_arguments(op, frame)
    if missing:
        await conn.send(
            protocol.fail(request_id, protocol.BAD_REQUEST, f"{name}: missing {', '.join(missing)}")
        )
        return
    try:
        result = await handler(conn, frame)
    except RequestError as exc:
        await conn.send(protocol.fail(request_id, exc.code, exc.message))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a handler bug must not take the daemon down
        log.exception("op %s failed", name)
        await conn.send(protocol.fail(request_id, protocol.INTERNAL, f"{name}: {exc}"))
    else:
        await conn.send(protocol.ok(request_id, result))
