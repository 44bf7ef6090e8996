"""The worker's hook-ins for usage and budgets (called from roost.worker.main).

Kept here so the worker's own module only calls in; no `roost.supervise` import.

- every assistant message pi reports is counted (`on_message`), so the row's figures move
  live; crossing `budgetWarnAt` sends one framed note to the job (and, through roostd, the
  same line to its parent); crossing the limit aborts the run at once, which pi applies at
  the next tool boundary, before another model request;
- a settled run of a job over its budget leaves the job `failed` with the reason as its
  error and status, roostd sends the parent `ended: <reason>`, and the worker starts no run
  until `roost budget` lifts the limit (the `budget` event), which continues the stopped run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from roost import protocol
from roost.config import load_settings
from roost.fsutil import atomic_write_json
from roost.states import JobState, RunCause
from roost.usage import budget
from roost.usage.budget import Limits
from roost.usage.meter import Meter

if TYPE_CHECKING:
    from roost.jobs import JobRecord
    from roost.worker.main import Worker
    from roost.worker.runs import Run

log = logging.getLogger("roost.worker")


STOP_NOTE = "budget-stop.json"  # in the job's dir: the cause of the run a budget stopped


def new_meter(record: JobRecord) -> Meter:
    meter = Meter(Limits.of(record), warn_at=load_settings().budgetWarnAt)
    # A restarted worker still continues the stopped run (with its cause) once raised.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        cause = json.loads((record.dir / STOP_NOTE).read_text(encoding="utf-8")).get("cause")
        if cause in {c.value for c in RunCause}:
            meter.stopped_cause = cause
    return meter


def _save_stop(worker: Worker) -> None:
    path = worker.record.dir / STOP_NOTE
    try:
        if worker.meter.stopped_cause is None:
            path.unlink(missing_ok=True)
        else:
            atomic_write_json(path, {"cause": worker.meter.stopped_cause})
    except OSError as exc:
        log.warning("could not write %s: %s", path, exc)


def add_to_snapshot(worker: Worker, snap: dict[str, Any]) -> None:
    usage = worker.meter.snapshot()
    if usage is not None:
        snap["usage"] = usage
    if worker.meter.blocked is not None:
        snap["error"] = worker.meter.blocked
    elif worker.meter.error_shown:
        snap["error"] = None  # lifted: clear what the row showed


def _block(worker: Worker) -> None:
    """The job is over a limit and no run is in progress: it shows why and waits."""
    reason = worker.meter.blocked
    assert reason is not None
    worker.runs.enter(JobState.FAILED)
    worker.runs.status, worker.runs.question = reason, None
    worker.meter.error_shown = True


def gate_resume(worker: Worker, resume: str | None) -> str | None:
    """At start-up: a job already over its budget starts nothing (not even a resume)."""
    if worker.meter.blocked is None:
        return resume
    log.info("over budget (%s): no run starts until it is raised", worker.meter.blocked)
    if worker.runs.next_cause is not None and worker.meter.stopped_cause is None:
        worker.meter.stopped_cause = worker.runs.next_cause.value
    worker.runs.next_cause = None
    _block(worker)
    return None


def on_message(worker: Worker, message: dict[str, Any]) -> None:
    verdict = worker.meter.on_message(message)
    meter = worker.meter
    if meter.usage.requests == 1 and meter.limits.budget is not None and not meter.usage.priced:
        log.warning("the model has no prices: a cost budget never stops this job "
                    "(use a token budget, roost budget JOB --budget-tokens N)")
    if message.get("role") == "assistant":
        worker.report()  # the row's figures move live
    if verdict == "warn":
        _warn(worker)
    elif verdict == "stop":
        _stop_run(worker)


def _warn(worker: Worker) -> None:
    line = worker.meter.warning_line()
    if not line:
        return
    log.info("budget warning: %s", line)
    if worker.ext is not None:
        asyncio.ensure_future(worker.ext.send(protocol.event(
            "budget_note", content=budget.note_text(line), steer=worker.runs.streaming)))
    if worker.record.spawned:
        worker.link.send_reliably("usage_note", kind="warn", text=line)


def _stop_run(worker: Worker) -> None:
    log.info("%s: stopping the run", worker.meter.blocked)
    if worker.runs.run is not None:
        worker.meter.stopped_cause = worker.runs.run.cause.value
    if worker.runs.streaming:
        async def abort() -> None:
            from roost.worker.pi_process import PiError

            with contextlib.suppress(PiError, TimeoutError):
                await worker.pi.command("abort", timeout=30)

        asyncio.ensure_future(abort())
    elif worker.runs.run is None:
        _block(worker)
        _tell_ended(worker)
        worker.report()


def _tell_ended(worker: Worker) -> None:
    reason = worker.meter.blocked
    if reason and not worker.meter.ended_sent:
        worker.meter.ended_sent = True
        worker.link.send_reliably("usage_note", kind="exhausted", text=reason)


def on_settled(worker: Worker, run: Run | None) -> None:
    if worker.meter.blocked is not None:
        if run is not None and worker.meter.stopped_cause is None:
            worker.meter.stopped_cause = run.cause.value
        _save_stop(worker)
        _block(worker)
        _tell_ended(worker)
    if worker.features is not None and worker.features.session_stats_whole_file:
        asyncio.ensure_future(_refresh_stats(worker))


async def _refresh_stats(worker: Worker) -> None:
    """pi 1.x: take get_session_stats (the same sum over the whole file, plus compaction and
    cache-warming usage that no message event carries). Off the model path: after a settle."""
    from roost.worker.pi_process import PiError

    try:
        stats = await worker.pi.command("get_session_stats", timeout=10)
    except (PiError, TimeoutError) as exc:
        log.debug("get_session_stats: %s", exc)
        return
    worker.meter.usage.apply_stats(stats)
    worker.report()


def on_budget_event(worker: Worker, event: dict[str, Any]) -> None:
    """roostd says the limits changed (`roost budget`) or the tree's budget ran out."""
    meter = worker.meter
    was_blocked = meter.blocked
    warning = event.get("treeWarning")
    if warning and worker.ext is not None:
        log.info("tree budget warning: %s", warning)
        asyncio.ensure_future(worker.ext.send(protocol.event(
            "budget_note", content=budget.note_text(str(warning)[:300]),
            steer=worker.runs.streaming)))

    def opt(key: str) -> Any:
        value = event.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    tokens, turns = opt("budgetTokens"), opt("maxTurns")
    lifted = meter.set_limits(Limits(opt("budget"), int(tokens) if tokens else None,
                                     int(turns) if turns else None))
    tree = event.get("treeExhausted")
    meter.tree_exhausted = str(tree) if tree else None
    if meter.blocked is None and was_blocked is not None:
        lifted = True
    if meter.blocked is not None and was_blocked is None:
        _stop_run(worker)
        return
    if not lifted:
        worker.report()
        return
    log.info("budget raised: the job may run again")
    worker.meter.ended_sent = False
    worker.runs.enter(JobState.DONE)
    worker.runs.status = ""
    cause, meter.stopped_cause = meter.stopped_cause, None
    _save_stop(worker)
    if cause is not None and worker.ext is not None:
        worker.runs.next_cause = RunCause(cause)  # the continuation keeps the run's cause
        asyncio.ensure_future(worker.ext.send(protocol.event(
            "note", content=budget.raised_note(meter.limits))))
    # error_shown stays set: every later snapshot clears the row's error, so the clearing is
    # not lost when this report falls before the link is bound (a raise heard on reconnect).
    worker.report()
    worker.wake.set()
