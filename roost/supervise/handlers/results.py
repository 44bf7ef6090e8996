"""roostd's structured-result operation: result (a worker's checked answer).

The worker checks each answer against the job's output schema (roost.worker.answers, by
roost.job.results); roostd keeps the valid one as the job's result (its record, rows, `roost
result`) and announces it (`job.result`: the value, or only its size when it is large)."""

from __future__ import annotations

from typing import Any

from roost.job import results
from roost.supervise.core import Core, bind
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import NOT_FOUND, REFUSED, RequestError


async def result(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    assert conn.job_id is not None
    record = core.jobs.get(conn.job_id)
    if record is None:
        raise RequestError(NOT_FOUND, f"job {conn.job_id} was removed")
    if record.output_schema is None:
        raise RequestError(REFUSED, f"job {record.id} has no output schema")
    value = request.get("value")
    record.result = value
    core.job_changed(record)  # saved before the worker's report of the run's end is read
    core.events.emit("job.result", record, **results.event_fields(value))
    return {}


def handlers(core: Core) -> dict[str, Handler]:
    return bind(core, {"result": result})
