"""roostd's `events` op: follow the event log (what `roost events --follow` calls).

The answer comes at once (`{"seq": last}`); then every event after `since` that matches
is pushed, oldest first, as `{"type": "event", "event": "log", "entry": EVENT}`, until the
connection closes. History and live events come from one queue (eventwriter.Subscription), so
they arrive in seq order with nothing missed and nothing twice.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from roost.events import log as eventlog
from roost.events.writer import Subscription
from roost.supervise.core import Core, bind
from roost.wire import protocol
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError

MAX_FOLLOWS = 4
"""Event-log follows open on one connection (`roost events -f` uses one): each is a queue."""
OVERFLOW = "it fell too far behind the event log; resume from the last seq read"


async def events(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    since = request.get("since")
    if since is not None and (not isinstance(since, int) or isinstance(since, bool) or since < 0):
        raise RequestError(BAD_REQUEST, "since must be a seq (an integer >= 0) or null")
    types = request.get("types") or None
    if types is not None and (not isinstance(types, list) or not all(isinstance(t, str) for t in types)):
        raise RequestError(BAD_REQUEST, "types must be a list of event types")
    job = request.get("job") or None
    if job is not None:
        job = str(job)
        if job in core.jobs or any(r.name == job for r in core.jobs.values()):
            job = core.find_job(job).id
    following = [s for s in conn.info.get("subscriptions", ()) if not s.closed]
    if len(following) >= MAX_FOLLOWS:
        raise RequestError(
            REFUSED,
            f"this connection already follows the event log {len(following)} times (at most {MAX_FOLLOWS})",
        )
    # Synchronous from here to the registration: no event can slip in between.
    sub = core.events.subscribe(since, partial(eventlog.matches, types=types, job=job))
    sub.on_overflow = partial(conn.drop, OVERFLOW)
    conn.info["subscriptions"] = following
    conn.info.setdefault("subscriptions", []).append(sub)
    conn.spawn(_pump(core, conn, sub), "following the event log")  # ends with the connection
    return {"seq": core.events.seq}


def handlers(core: Core) -> dict[str, Handler]:
    return bind(core, {"events": events})


async def _pump(core: Core, conn: Connection, sub: Subscription) -> None:
    try:
        while True:
            entry = await sub.get()
            sent = entry is not None and await conn.send(protocol.event("log", entry=entry))
            if entry is None or (not sent and conn.closed.is_set()):
                break  # an entry that could not be encoded is dropped (logged), not the stream
    finally:
        core.events.unsubscribe(sub)
        if sub.closed and not conn.closed.is_set():
            # Dropped as too slow: the follower resumes from its last seq.
            conn.drop(OVERFLOW)
