"""roostd's worktree operations: `merge` and `gc` (`rm` is the job's own op, which asks
`roost.supervise.worktrees` before and after removing a job with a worktree)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.jsonlines import Connection
from roost.supervise import worktrees as manage

if TYPE_CHECKING:
    from roost.supervise.daemon import Daemon


def handlers(daemon: Daemon) -> dict[str, Any]:
    async def merge(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        return await manage.merge(daemon, record, request.get("into") or None,
                                  bool(request.get("squash")))

    async def gc(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        return await manage.gc(daemon, bool(request.get("force")))

    return {"merge": merge, "gc": gc}
