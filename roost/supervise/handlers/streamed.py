"""roostd's live-text ops: a worker's `partial` (what its pi streams now, coalesced by
roost.worker.streaming), kept in memory only, and `follow_partials`, which gives a client
(the web's live link, `roost view`, `roost logs -f`) the current ones and then pushes each
change as a `partial` event. Nothing here is written to disk or to a mailbox: a job's
partial is gone when its message ends, when its worker's connection closes, or with roostd.
"""

from __future__ import annotations

from typing import Any

from roost.supervise.core import Core, bind
from roost.wire import protocol
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import REFUSED, RequestError


class Partials:
    """The latest partial of each job, and who follows them (a job's, or every job's)."""

    def __init__(self) -> None:
        self.latest: dict[str, dict[str, Any]] = {}
        self.followers: dict[Connection, str | None] = {}

    def put(self, job: str, value: dict[str, Any] | None) -> None:
        if value is None:
            if self.latest.pop(job, None) is None:
                return
        else:
            self.latest[job] = value
        if not self.followers:
            return
        frame = protocol.event("partial", job=job, partial=value)
        for conn, only in list(self.followers.items()):
            if only is None or only == job:
                conn.push(frame)  # bounded: a follower that never reads is dropped


async def _until_closed(conn: Connection, then: Any) -> None:
    try:
        await conn.closed.wait()
    finally:  # cancelled with the connection's tasks when it closes
        then()


def handlers(core: Core) -> dict[str, Handler]:
    book = Partials()

    async def partial(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        job = conn.job_id
        assert job is not None
        value = request.get("partial")
        if value is not None and not isinstance(value, dict):
            raise RequestError(REFUSED, "partial must be an object or null")
        if not conn.info.get("streams"):
            conn.info["streams"] = True
            conn.spawn(_until_closed(conn, lambda: book.put(job, None)), "a worker's partial")
        if job in core.jobs:
            book.put(job, value)
        return {}

    async def follow_partials(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        only = core.find_job(str(request["job"])).id if request.get("job") else None
        if conn not in book.followers:
            conn.spawn(_until_closed(conn, lambda: book.followers.pop(conn, None)), "a partials follower")
        book.followers[conn] = only
        conn.info["follows"] = True  # kept when the cap makes room (Daemon._kept)
        return {"partials": {job: value for job, value in book.latest.items() if only is None or job == only}}

    return bind(core, {"partial": partial, "follow_partials": follow_partials})
