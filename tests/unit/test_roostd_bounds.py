"""The bounds of door 4 (docs/security.md, door 4) on their own: a connection's frame
timeout, the shared pool of unfinished frames, backpressure on pipelined requests, the
push high-water mark, a hook's stderr, the repeat summariser, log rotation."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roost.agents.limits import RateLimiter
from roost.supervise.admission import connection_cap
from roost.supervise.hooks import OutputTail
from roost.supervise.logsetup import RepeatFilter
from roost.wire import protocol
from roost.wire.connection import Bounds, Connection, InputPool, serve_connection
from roost.wire.protocol import Op


async def pair(bounds: Bounds) -> tuple[Connection, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    reader, writer = await asyncio.open_unix_connection(sock=ours, limit=64 * 1024)
    return Connection(reader, writer, bounds), theirs


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_first_frame_and_an_unfinished_frame_time_out() -> None:
    async def go() -> None:
        conn, peer = await pair(Bounds(frame_timeout=0.2))
        with pytest.raises(protocol.ProtocolError, match="a first frame"):
            await conn.read_frame()
        conn, peer = await pair(Bounds(frame_timeout=0.2))
        peer.sendall(b'{"op": "list"}\n{"op": "li')
        assert (await conn.read_frame()) == {"op": "list"}
        with pytest.raises(protocol.ProtocolError, match="an unfinished frame"):
            await conn.read_frame()
        conn, peer = await pair(Bounds(frame_timeout=0.2))
        peer.sendall(b'{"op": "list"}\n')
        await conn.read_frame()
        # Idle between frames is no fault: only a started frame has a deadline.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(conn.read_frame(), 0.5)

    run(go())


def test_unfinished_frames_share_one_pool() -> None:
    async def go() -> None:
        pool = InputPool(300_000)
        bounds = Bounds(free_partial=1000, pool=pool)
        first, a = await pair(bounds)
        second, b = await pair(bounds)
        a.sendall(b"{" + b"x" * 200_000)
        task = asyncio.ensure_future(first.read_frame())
        await asyncio.sleep(0.1)
        assert pool.used > 150_000
        b.sendall(b"{" + b"y" * 200_000)
        with pytest.raises(protocol.ProtocolError, match="buffers for unfinished frames"):
            await second.read_frame()
        a.sendall(b"\n")
        with pytest.raises(protocol.ProtocolError):  # not JSON: but it was read whole
            await task
        assert pool.used == 0

    run(go())


def test_an_oversize_line_is_skipped_to_its_newline() -> None:
    async def go() -> None:
        conn, peer = await pair(Bounds())
        big = b"x" * (protocol.MAX_FRAME + 10) + b"\n" + b'{"op": "ok"}\n'

        def send() -> None:
            peer.sendall(big)

        sender = asyncio.get_running_loop().run_in_executor(None, send)
        with pytest.raises(protocol.FrameTooLarge):
            await conn.read_frame()
        assert (await conn.read_frame()) == {"op": "ok"}
        await sender

    run(go())


def test_pipelined_requests_stop_the_reading_at_the_in_flight_bound() -> None:
    async def go() -> None:
        conn, peer = await pair(Bounds(max_in_flight=4))
        gate = asyncio.Event()
        seen = 0

        async def slow(_conn: Connection, _request: dict[str, Any]) -> dict[str, Any]:
            nonlocal seen
            seen += 1
            await gate.wait()
            return {}

        ops = {"slow": Op("slow", "any", (), "")}
        server = asyncio.ensure_future(serve_connection(conn, {"slow": slow}, ops, lambda c, o: None))
        peer.sendall(protocol.encode({"id": 1, "op": "slow"}) * 50)
        await asyncio.sleep(0.2)
        assert seen == 4 and conn.in_flight == 4
        gate.set()
        await asyncio.sleep(0.2)
        assert seen == 50
        peer.close()
        await server

    run(go())


def test_a_peer_that_does_not_read_pushes_is_dropped_with_a_final_frame() -> None:
    async def go() -> None:
        conn, peer = await pair(Bounds(push_high_water=64 * 1024))
        row = {"x": "y" * 1000}
        for _ in range(5000):
            if not conn.push(protocol.event("job", row=row)):
                break
            await asyncio.sleep(0)
        assert conn.closed.is_set()
        assert conn.pending_out < 2 * 1024 * 1024
        peer.setblocking(False)
        data = b""
        for _ in range(200):
            try:
                chunk = peer.recv(1 << 20)
            except BlockingIOError:
                await asyncio.sleep(0.01)
                continue
            if not chunk:
                break
            data += chunk
        last = protocol.decode(data.rstrip(b"\n").rsplit(b"\n", 1)[-1])
        assert last["event"] == "dropped"

    run(go())


def test_a_hooks_output_keeps_its_head_and_tail_only() -> None:
    tail = OutputTail(keep=100)
    tail.add(b"HEAD" + b"x" * 10_000)
    for _ in range(1000):
        tail.add(b"y" * 1000)
    tail.add(b"TAIL")
    text = tail.text()
    assert text.startswith("HEAD") and text.endswith("TAIL") and len(text) < 200
    assert "bytes left out" in text


def test_repeated_warnings_become_one_line_with_a_count() -> None:
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Keep()
    repeats = RepeatFilter(handler, window=0.2)
    handler.addFilter(repeats)
    log = logging.getLogger("test.repeats")
    log.propagate = False
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        for n in range(500):
            log.warning("could not accept: %s", n)
        assert lines == ["could not accept: 0"]
        import time

        time.sleep(0.25)
        log.info("something else")
        assert lines[1:] == ["could not accept: %s [… repeated 499 more times in 0.2s]", "something else"]
    finally:
        log.removeHandler(handler)


def test_roostd_log_is_rotated(tmp_path: Path) -> None:
    """When stderr is roostd.log, logging rotates it and fds 1 and 2 follow the new file."""
    log = tmp_path / "roostd.log"
    script = (
        "import logging, os, sys\n"
        "from pathlib import Path\n"
        "from roost.supervise import logsetup\n"
        "logsetup.LOG_MAX_BYTES = 10_000\n"
        "logsetup.setup(Path(sys.argv[1]), 'INFO')\n"
        "for n in range(2000):\n"
        "    logging.getLogger('roostd').info('line %d %s', n, 'x' * 50)\n"
        "print('stray', flush=True)\n"
    )
    with open(log, "ab") as out:
        subprocess.run(
            [sys.executable, "-c", script, str(log)], stdout=out, stderr=subprocess.STDOUT, check=True
        )
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["roostd.log", "roostd.log.1", "roostd.log.2", "roostd.log.3"]
    assert all(p.stat().st_size < 20_000 for p in tmp_path.iterdir())
    assert log.read_text().rstrip().endswith("stray")
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    assert os.path.getsize(log) > 0


def test_the_connection_cap_keeps_a_reserve() -> None:
    assert connection_cap(1024) == 768
    assert connection_cap(20_000) == 2048
    assert connection_cap(64) == 16


def test_the_rate_limiter_forgets_quiet_senders() -> None:
    now = [0.0]
    limiter = RateLimiter(window=60, clock=lambda: now[0])
    for n in range(5000):
        limiter.hit(f"pid:{n}", 30)
        now[0] += 0.1
    assert len(limiter._events) < 1700


def test_an_event_follower_that_falls_behind_is_dropped_at_once() -> None:
    from roost.events import writer as eventwriter

    async def go() -> None:
        sub = eventwriter.Subscription(lambda event: True)
        dropped: list[bool] = []
        sub.on_overflow = lambda: dropped.append(True)
        for seq in range(eventwriter.SUBSCRIBER_BACKLOG + 5):
            sub.push({"seq": seq})
        assert dropped == [True] and sub.closed and not sub.queue

    run(go())
