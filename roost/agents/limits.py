"""Sliding-window rate limits and the spawn limits of the tree (pure logic)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roost.config import Settings


class RateLimiter:
    """At most `limit` events per `window` seconds per key. The key is the sender's
    identity (a job, a session, a pid: handlers/agents.py), never its connection."""

    def __init__(self, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self._events: dict[str, deque[float]] = {}

    def hit(self, key: str, limit: int) -> bool:
        """Count one event for `key`; False when that exceeds the limit (still counted)."""
        now = self.clock()
        if len(self._events) > 1000:  # keys (senders) come and go: forget the quiet ones
            self._events = {k: v for k, v in self._events.items() if v and now - v[-1] < self.window}
        events = self._events.setdefault(key, deque())
        while events and now - events[0] >= self.window:
            events.popleft()
        events.append(now)
        return len(events) <= limit

    def allowed(self, key: str, limit: int) -> bool:
        """Would one more event for `key` stay within the limit? (Does not count.)"""
        now = self.clock()
        events = self._events.get(key, deque())
        return sum(1 for t in events if now - t < self.window) < limit


@dataclass(frozen=True)
class SpawnCounts:
    parent_depth: int
    live_children: int
    live_in_tree: int
    live_spawned: int


def spawn_refusal(counts: SpawnCounts, settings: Settings, tree_rate_ok: bool) -> str | None:
    """The limit a spawn would break, as the tool error text; None when allowed."""
    max_depth = settings.agentMaxDepth
    max_children = settings.agentMaxChildren
    max_tree = settings.agentMaxTreeSessions
    max_spawned = settings.agentMaxSpawned
    per_minute = settings.agentSpawnsPerMinute
    if counts.parent_depth + 1 > max_depth:
        return (
            f"depth limit: a child here would be at depth {counts.parent_depth + 1}, "
            f"agentMaxDepth is {max_depth}"
        )
    if counts.live_children >= max_children:
        return (
            f"children limit: this session already has {counts.live_children} live children "
            f"(max {max_children})"
        )
    if counts.live_in_tree >= max_tree:
        return f"tree limit: this tree already has {counts.live_in_tree} live sessions (max {max_tree})"
    if counts.live_spawned >= max_spawned:
        return f"global limit: {counts.live_spawned} live spawned sessions (max {max_spawned})"
    if not tree_rate_ok:
        return f"rate limit: at most {per_minute} spawns per tree per minute"
    return None
