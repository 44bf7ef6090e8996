"""roostd's worktree operations: `merge` and `gc` (`rm` is the job's own op, which asks
`roost.supervise.worktree_jobs` before and after removing a job with a worktree)."""

from __future__ import annotations

from typing import Any

from roost.jsonlines import Connection, Handler
from roost.supervise import worktree_jobs
from roost.supervise.core import Core, bind


async def merge(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    record = core.find_job(str(request["job"]))
    return await worktree_jobs.merge(core, record, request.get("into") or None,
                              bool(request.get("squash")))


async def gc(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    return await worktree_jobs.gc(core, bool(request.get("force")))


def handlers(core: Core) -> dict[str, Handler]:
    return bind(core, {"merge": merge, "gc": gc})
