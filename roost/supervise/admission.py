"""Who gets one of roostd's connections (README: Limits).

roostd raises its open-file limit to what the machine allows, then keeps connections well
below it: workers, their pipes, log files and hooks need descriptors too. Past the cap a
new connection takes the place of the oldest idle one (no request in flight, not a worker,
a peer, nor a `subscribe` or `events` client): a client that opens 1,100 connections and
sends nothing loses its oldest ones, never the user's `roost ls`. One process may hold at
most PER_PROCESS of them. A connection that cannot get in is closed at once.
"""

from __future__ import annotations

import logging
import resource
from collections.abc import Callable, Collection

from roost import protocol
from roost.jsonlines import Bounds, Connection, InputPool

log = logging.getLogger("roostd")

MAX_CONNECTIONS = 4096
"""The most connections at once, whatever the fd limit (each costs a little memory)."""
FD_RESERVE_MIN = 256
"""Descriptors kept out of the connection cap, for jobs, pipes, logs and hooks; a quarter
of the limit when that is more."""
PER_PROCESS = 256
"""Connections one client process (SO_PEERCRED pid) may hold; a worker or a CLI uses one."""

DAEMON_BOUNDS = Bounds(
    max_in_flight=64,  # a CLI waits on one request; a worker on a few
    frame_timeout=30.0,  # a local client writes a frame in milliseconds
    free_partial=64 * 1024,  # a `roost ls` or a reply never draws on the pool
    pool=InputPool(64 * 1024 * 1024),  # 16 frames of 4 MiB arriving at once
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
            log.warning("could not raise the open-file limit from %d to %d: %s",
                        soft, target, exc)
    return soft


def connection_cap(fd_limit: int) -> int:
    """The connections roostd accepts at once under an fd limit of `fd_limit`."""
    reserve = max(FD_RESERVE_MIN, fd_limit // 4)
    return max(16, min(MAX_CONNECTIONS, fd_limit - reserve))


class Admission:
    """Applies the cap to each new connection (see the module docstring)."""

    def __init__(self, cap: int, kept: Callable[[Connection], bool]) -> None:
        self.cap = cap
        self._kept = kept  # the daemon's own: a subscriber, a follower
        self.refused = 0
        self.evicted = 0

    def _idle(self, conn: Connection) -> bool:
        return (not conn.closed.is_set() and conn.in_flight == 0 and conn.job_id is None
                and conn.peer_id is None and not self._kept(conn))

    def admit(self, new: Connection, connections: Collection[Connection]) -> bool:
        """Make room for `new` (not yet in `connections`); False when there is none."""
        open_ = [c for c in connections if not c.closed.is_set()]
        pid = new.peer.pid if new.peer else None
        if pid is not None:
            mine = [c for c in open_ if c.peer is not None and c.peer.pid == pid]
            if len(mine) >= PER_PROCESS and not self._evict(mine, f"pid {pid}'s"):
                return self._refuse(new, f"pid {pid} already holds {len(mine)} connections")
        if len(open_) >= self.cap and not self._evict(open_, "the"):
            return self._refuse(new, f"{len(open_)} connections are open (the cap), none idle")
        return True

    def _evict(self, among: list[Connection], whose: str) -> bool:
        idle = [c for c in among if self._idle(c)]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.last_active)
        self.evicted += 1
        log.warning("closing %s oldest idle connection to make room (%d so far)",
                    whose, self.evicted)
        oldest.close()
        return True

    def _refuse(self, conn: Connection, why: str) -> bool:
        self.refused += 1
        log.warning("refusing a connection: %s (%d refused so far)", why, self.refused)
        conn.close()
        return False
