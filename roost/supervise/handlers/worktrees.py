"""roostd's worktree operations: `merge` and `gc` (`rm` is the job's own op, which asks
`roost.supervise.worktrees` before and after removing a job with a worktree)."""

from __future__ import annotations

from typing import Any

from roost.supervise import attention
from roost.supervise import worktrees as worktree_jobs
from roost.supervise.core import Core, bind
from roost.wire.connection import Connection, Handler


async def merge(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    record = core.find_job(str(request["job"]))
    try:
        result = await worktree_jobs.merge(
            core, record, request.get("into") or None, bool(request.get("squash"))
        )
    except worktree_jobs.MergeRefused as exc:
        attention.note_conflict(record.id, exc.message)  # the inbox shows it until a merge
        raise
    attention.clear_conflict(record.id)
    return result


async def gc(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    return await worktree_jobs.gc(core, bool(request.get("force")))


def handlers(core: Core) -> dict[str, Handler]:
    return bind(core, {"merge": merge, "gc": gc})
