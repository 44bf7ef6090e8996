"""Who gets one of roostd's connections (README: Limits).

roostd raises its open-file limit to what the machine allows, then keeps connections well
below it: workers, their pipes, log files and hooks need descriptors too. Past the cap a
new connection takes the place of the oldest idle one (no request in flight, not a worker,
a peer, nor a `subscribe` or `events` client): a client that opens 1,100 connections and
sends nothing loses its oldest ones, never the user's `roost ls`. One process may hold at
most PER_PROCESS of them. A connection that cannot get in is closed at once.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Collection
from typing import IO

import portalocker

from roost.host import procid
from roost.wire import protocol
from roost.wire.connection import READ_CHUNK, Bounds, Connection, InputPool

log = logging.getLogger("roostd")

MAX_CONNECTIONS = 2048
"""The most connections at once, whatever the fd limit: each may hold ~100 KiB of input
(READ_CHUNK twice in asyncio's reader, `free_partial` in its frame), 200 MB in all at
worst; a user's CLIs, workers and pis need a few dozen."""
FD_RESERVE_MIN = 256
"""Descriptors kept out of the connection cap, for jobs, pipes, logs and hooks; a quarter
of the limit when that is more."""
LISTEN_BACKLOG = 128
"""Connections the kernel queues before roostd accepts them."""
PER_PROCESS = 256
"""Connections one client process (SO_PEERCRED pid) may hold; a worker or a CLI uses one."""

DAEMON_BOUNDS = Bounds(
    max_in_flight=64,  # a CLI waits on one request; a worker on a few
    frame_timeout=30.0,  # a local client writes a frame in milliseconds
    free_partial=32 * 1024,  # a `roost ls` or a reply never draws on the pool
    pool=InputPool(32 * 1024 * 1024),  # 8 frames of 4 MiB arriving at once
    max_pending_out=2 * protocol.MAX_FRAME,  # one large answer and the next behind it
    push_high_water=1024 * 1024,  # ~1,000 job rows unread: the client is not reading
)


def raise_fd_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
    return soft


def connection_cap(fd_limit: int) -> int:
    """The connections roostd accepts at once under an fd limit of `fd_limit`."""
    reserve = max(FD_RESERVE_MIN, fd_limit // 4)
    return max(16, min(MAX_CONNECTIONS, fd_limit - reserve))


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _peer_pid(sock: socket.socket) -> int | None:
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid = struct.unpack("3i", raw)[0]
    return pid if pid > 0 else None


class Admission:
    """roostd's listening socket: accepts one connection at a time and applies the cap
    before the next (asyncio's own server accepts a backlog's worth at once, before any
    check could run, and hit the fd limit). `held` counts the sockets accepted and not
    yet released."""

    def __init__(
        self, cap: int, connections: Collection[Connection], kept: Callable[[Connection], bool]
    ) -> None:
        self.cap = cap
        self.connections = connections  # the daemon's registered ones
        self._kept = kept  # the daemon's own: a subscriber, a follower
        self.held = 0
        self.refused = 0
        self.evicted = 0
        self._listener: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    def start(self, path: str, handler: Handler) -> None:
        """Listen on `path` (made with the caller's umask) and serve each admitted
        connection with `handler`."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            listener.listen(LISTEN_BACKLOG)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._task = asyncio.get_running_loop().create_task(self._accept(listener, handler))

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._listener is not None:
            self._listener.close()

    async def _accept(self, listener: socket.socket, handler: Handler) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(listener)
            except OSError as exc:  # descriptors ran out all the same (jobs took them)
                log.error("could not accept a connection: %s", exc)
                await asyncio.sleep(0.1)
                continue
            if not self.admit(_peer_pid(sock)):
                sock.close()
                continue
            self.held += 1
            task = loop.create_task(self._serve(sock, handler))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
            # sock_accept does not yield while the backlog is full: let the new one
            # register and the evicted ones release their descriptors first.
            await asyncio.sleep(0)

    async def _serve(self, sock: socket.socket, handler: Handler) -> None:
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock, limit=READ_CHUNK)
            await handler(reader, writer)
        except OSError:
            sock.close()
        finally:
            self.held -= 1

    def _idle(self, conn: Connection) -> bool:
        return (
            not conn.closed.is_set()
            and conn.in_flight == 0
            and conn.job_id is None
            and conn.peer_id is None
            and not self._kept(conn)
        )

    def admit(self, pid: int | None) -> bool:
        """Make room for a new connection from `pid`; False when there is none."""
        open_ = [c for c in self.connections if not c.closed.is_set()]
        if pid is not None:
            mine = [c for c in open_ if c.peer is not None and c.peer.pid == pid]
            if len(mine) >= PER_PROCESS and not self._evict(mine, f"pid {pid}'s"):
                return self._refuse(f"pid {pid} already holds {len(mine)} connections")
        if self.held >= self.cap and not self._evict(open_, "the"):
            return self._refuse(f"{self.held} connections are open (the cap), none idle")
        return True

    def _evict(self, among: list[Connection], whose: str) -> bool:
        idle = [c for c in among if self._idle(c)]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.last_active)
        self.evicted += 1
        log.warning("closing %s oldest idle connection to make room (%d so far)", whose, self.evicted)
        oldest.close()
        return True

    def _refuse(self, why: str) -> bool:
        self.refused += 1
        log.warning("refusing a connection: %s (%d refused so far)", why, self.refused)
        return False


DYING_WAIT = 5.0
"""How long a new roostd waits for the daemon lock of one killed a moment ago."""


def take_daemon_lock(handle: IO[str], holder: Callable[[], int | None]) -> bool:
    """Lock roostd.lock's `handle`; False when a live roostd holds it. A roostd killed a
    moment ago can hold it a little longer: its main thread gone (a zombie, not alive) while
    another of its threads (the search index's writer in a write) still holds its files,
    the lock and the listening socket among them. For such a holder (`holder()`: the pid
    file's pid) it waits up to DYING_WAIT seconds; a live one is refused at once."""
    deadline = time.monotonic() + DYING_WAIT
    while True:
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
            return True
        except portalocker.LockException:
            pid = holder()
            if (pid is not None and procid.alive(pid)) or time.monotonic() >= deadline:
                return False
        time.sleep(0.05)  # start-up only: the dying process's last thread exits in ms
