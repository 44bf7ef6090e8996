"""A JSON-lines connection over an asyncio stream, shared by roostd and the worker.

Reading splits on b"\\n" only and enforces protocol.MAX_FRAME; requests are dispatched
through one table; responses, errors and pushed events share one writer.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from roost import protocol
from roost.protocol import FrameTooLarge, Op, ProtocolError, RequestError

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
    message = (str(exc) if isinstance(exc, FrameTooLarge)
               else f"the answer could not be encoded ({type(exc).__name__})")
    for request_id in (frame.get("id"), None):
        try:
            return protocol.encode(protocol.fail(request_id, protocol.INTERNAL, message))
        except (ProtocolError, ValueError, TypeError):
            continue
    return None


class Connection:
    """One peer of a JSON-lines socket. `bound` says who it proved to be (worker, peer)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.closed = asyncio.Event()
        self.job_id: str | None = None  # set once a worker proved its token
        self.peer_id: str | None = None  # set for a bound worker or foreground peer
        self.info: dict[str, Any] = {}
        self._write_lock = asyncio.Lock()
        self.peer = peer_credentials(writer)


    async def send(self, frame: dict[str, Any]) -> bool:
        """Write one frame; False when the peer is gone, or when this frame could not be
        encoded and was dropped (logged; `closed` tells the two apart). Never raises."""
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
        try:
            async with self._write_lock:
                self.writer.write(data)
                await self.writer.drain()
            return True
        except (ConnectionError, RuntimeError, OSError):
            self.close()
            return False

    def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            try:
                self.writer.close()
            except (OSError, RuntimeError):
                pass

    async def read_frame(self) -> dict[str, Any] | None:
        """Next frame, None at end of stream. Raises ProtocolError for bad input.

        An oversize line is consumed up to its newline before raising, so the
        stream stays aligned on frame boundaries.
        """
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if not exc.partial.strip():
                    return None
                line = exc.partial
            except asyncio.LimitOverrunError:
                await self._skip_line()
                raise FrameTooLarge() from None
            if line.strip():  # blank lines between frames are skipped, not answered
                return protocol.decode(line)

    async def _skip_line(self) -> None:
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return


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
            try:
                frame = await conn.read_frame()
            except ProtocolError as exc:
                code = (
                    protocol.FRAME_TOO_LARGE if isinstance(exc, FrameTooLarge)
                    else protocol.BAD_FRAME
                )
                await conn.send(protocol.fail(None, code, str(exc)))
                continue
            except (ConnectionError, OSError):
                break
            if frame is None:
                break
            task = asyncio.create_task(_answer(conn, frame, handlers, ops, authorize))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    finally:
        conn.close()
        for task in list(tasks):
            task.cancel()


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
        await conn.send(protocol.fail(request_id, protocol.BAD_REQUEST,
                                      f"{where}: not valid Unicode (a lone surrogate)"))
        return
    if not isinstance(name, str):
        await conn.send(protocol.fail(request_id, protocol.BAD_REQUEST, "missing field 'op'"))
        return
    op = ops.get(name)
    handler = handlers.get(name)
    if op is None or handler is None:
        await conn.send(
            protocol.fail(request_id, protocol.UNKNOWN_OP, f"unknown op {name!r}")
        )
        return
    denied = authorize(conn, op)
    if denied:
        await conn.send(protocol.fail(request_id, protocol.UNAUTHORIZED, denied))
        return
    missing = protocol.missing_arguments(op, frame)
    if missing:
        await conn.send(
            protocol.fail(
                request_id, protocol.BAD_REQUEST, f"{name}: missing {', '.join(missing)}"
            )
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
