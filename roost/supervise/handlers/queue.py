"""roostd's queue operations: run_each, queue, queue_move, group_add, group_ls, group_rm.

The rules (what holds a slot, the order) are `roost.supervise.jobqueue`'s; these ops only
check a request and call it."""

from __future__ import annotations

from typing import Any

from roost.host.fsutil import one_sync
from roost.job.states import JobState
from roost.supervise import budget
from roost.supervise.core import Core, bind
from roost.supervise.jobqueue import checked_priority
from roost.supervise.jobs import create_job, launch, request_env
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError

EACH_MAX = 10_000
"""The most tasks one `run_each` takes."""
_EACH_KEYS = ("task", "name", "group", "priority")


def _each_requests(request: dict[str, Any]) -> list[dict[str, Any]]:
    """One run request per task: the shared arguments, then the task's own."""
    tasks = request["tasks"]
    if not isinstance(tasks, list) or not tasks:
        raise RequestError(BAD_REQUEST, "tasks must be a non-empty list")
    if len(tasks) > EACH_MAX:
        raise RequestError(BAD_REQUEST, f"at most {EACH_MAX:,} tasks in one request")
    if request.get("worktree") or request.get("shell"):
        raise RequestError(BAD_REQUEST, "run_each starts pi jobs without a worktree")
    shared = {k: v for k, v in request.items() if k not in ("tasks", "id", "op", "task", "name")}
    out = []
    for n, task in enumerate(tasks, 1):
        if isinstance(task, str):
            task = {"task": task}
        if not isinstance(task, dict) or not isinstance(task.get("task"), str):
            raise RequestError(BAD_REQUEST, f"task {n}: a string, or an object with `task`")
        unknown = set(task) - set(_EACH_KEYS)
        if unknown:
            raise RequestError(
                BAD_REQUEST, f"task {n}: unknown keys {sorted(unknown)} (it may have {', '.join(_EACH_KEYS)})"
            )
        out.append({**shared, **task})
    return out


async def run_each(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    """Every job checked and made first, then launched: a bad task refuses the whole request."""
    env = request_env(request)
    made = []
    names: set[str] = set()
    for n, each in enumerate(_each_requests(request), 1):
        try:
            record = create_job(core, each)
            if each.get("name"):
                if record.name in names:
                    raise RequestError(REFUSED, f"the name {record.name!r} is given twice")
                names.add(record.name)
            core.queue.place(record, each.get("group"), checked_priority(each.get("priority")))
            budget.apply_budget(core, record, each)
        except RequestError as exc:
            raise RequestError(exc.code, f"task {n}: {exc.message} (no job was started)") from None
        made.append(record)
    jobs = []
    with one_sync():  # durable once, before the answer, not ~9 fsyncs a job
        for record in made:
            launch(core, record, env=env)
    for record in made:
        jobs.append(
            {
                "id": record.id,
                "name": record.name,
                "state": record.state.value,
                "position": core.queue.position(record),
            }
        )
    return {"jobs": jobs}


async def queue(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    core.queue.schedule()  # a maxRunning raised in roost.json applies now
    return {
        **core.queue.summary(),
        "jobs": [core.row(r) for r in core.queue.queued()],
        "groups": core.queue.group_rows(),
    }


async def queue_move(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    record = core.find_job(str(request["job"]))
    first = bool(request.get("first"))
    if first == ("priority" in request and request["priority"] is not None):
        raise RequestError(BAD_REQUEST, "give a priority or first, one of them")
    if record.state != JobState.QUEUED:
        raise RequestError(
            REFUSED,
            f"job {record.id} is {record.state.value}, not queued: only a queued job has a place to move",
        )
    core.queue.move(record, request.get("priority"), first)
    return {"id": record.id, "queue": core.row(record)["queue"]}


async def group_add(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    core.queue.set_group(request["name"], request["parallel"])
    return {"groups": core.queue.group_rows()}


async def group_ls(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    return {"groups": core.queue.group_rows()}


async def group_rm(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    core.queue.set_group(request["name"], None)
    return {"groups": core.queue.group_rows()}


def handlers(core: Core) -> dict[str, Handler]:
    return bind(
        core,
        {
            "run_each": run_each,
            "queue": queue,
            "queue_move": queue_move,
            "group_add": group_add,
            "group_ls": group_ls,
            "group_rm": group_rm,
        },
    )
