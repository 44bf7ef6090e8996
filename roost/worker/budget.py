"""The worker's budget guard: its job's usage meter, and what the worker does at a limit.

- every assistant message pi reports is counted (`on_message`), so the row's figures move
  live; crossing `budgetWarnAt` sends one framed note to the job (and, through roostd, the
  same line to its parent); crossing the limit aborts the run at once, which pi applies at
  the next tool boundary, before another model request;
- a settled run of a job over its budget leaves the job `failed` with the reason as its
  error and status, roostd sends the parent `ended: <reason>`, and the worker starts no run
  until `roost budget` lifts the limit (the `budget` event), which continues the stopped run.

`BudgetGuard` is owned by the worker and given only what it acts on: the meter, the
worker's `RunTracker`, and `Ports` (callables: report, wake the pump, tell the extension or
roostd, a pi command, a background task). So it is tested with fakes, no process. No
`roost.supervise` import.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roost.config import load_settings
from roost.host.fsutil import atomic_write_json
from roost.job.states import JobState, RunCause
from roost.usage import budget
from roost.usage.budget import Limits
from roost.usage.meter import Meter
from roost.wire import protocol
from roost.worker.pi_process import PiError

if TYPE_CHECKING:
    from roost.job.record import JobRecord
    from roost.worker.runs import Run, RunTracker

log = logging.getLogger("roost.worker")


STOP_NOTE = "budget-stop.json"  # in the job's dir: the cause of the run a budget stopped


@dataclass(frozen=True)
class Ports:
    """What the guard may do beyond its meter and the run tracker (the worker's, as
    callables)."""

    report: Callable[[], None]  # send the row's snapshot to roostd
    wake: Callable[[], None]  # wake the delivery pump
    to_extension: Callable[[dict[str, Any]], bool]  # an event for pi's extension; False: none
    to_roostd: Callable[[str, str], None]  # a usage_note (kind, text) that must reach roostd
    pi_command: Callable[..., Awaitable[Any]]  # an RPC command to pi (PiError, TimeoutError)
    spawn: Callable[[Coroutine[Any, Any, None], str], object]  # a background task (roost.tasks)


class BudgetGuard:
    def __init__(
        self,
        meter: Meter,
        runs: RunTracker,
        ports: Ports,
        *,
        stop_note: Path,
        spawned: bool,
        stats_from_pi: bool,
    ) -> None:
        self.meter = meter
        self.runs = runs
        self.ports = ports
        self.stop_note = stop_note  # where the cause of a stopped run survives a restart
        self.spawned = spawned  # a child: its parent hears the warning
        self.stats_from_pi = stats_from_pi  # pi 1.x: get_session_stats sums the whole file

    @classmethod
    def of(cls, record: JobRecord, runs: RunTracker, ports: Ports, *, stats_from_pi: bool) -> BudgetGuard:
        """The guard of `record`'s job, with its limits and the stopped run's kept cause."""
        meter = Meter(Limits.of(record.limits), warn_at=load_settings().budgetWarnAt)
        stop_note = record.dir / STOP_NOTE
        # A restarted worker still continues the stopped run (with its cause) once raised.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            cause = json.loads(stop_note.read_text(encoding="utf-8")).get("cause")
            if cause in {c.value for c in RunCause}:
                meter.stopped_cause = cause
        return cls(
            meter, runs, ports, stop_note=stop_note, spawned=record.links.spawned, stats_from_pi=stats_from_pi
        )

    @property
    def blocked(self) -> str | None:
        """Why no new run may start now (over a limit), or None."""
        return self.meter.blocked

    def load(self, entries: list[dict[str, Any]]) -> None:
        """The session's figures so far (at start-up: they survive any restart)."""
        self.meter.load(entries)

    def add_to_snapshot(self, snap: dict[str, Any]) -> None:
        usage = self.meter.snapshot()
        if usage is not None:
            snap["usage"] = usage
        if self.meter.blocked is not None:
            snap["error"] = self.meter.blocked
        elif self.meter.error_shown:
            snap["error"] = None  # lifted: clear what the row showed

    def gate_resume(self, resume: str | None) -> str | None:
        """At start-up: a job already over its budget starts nothing (not even a resume)."""
        meter, runs = self.meter, self.runs
        if meter.blocked is None:
            return resume
        log.info("over budget (%s): no run starts until it is raised", meter.blocked)
        if runs.next_cause is not None and meter.stopped_cause is None:
            meter.stopped_cause = runs.next_cause.value
        runs.next_cause = None
        self._block()
        return None

    def on_message(self, message: dict[str, Any]) -> None:
        meter = self.meter
        verdict = meter.on_message(message)
        if meter.usage.requests == 1 and meter.limits.budget is not None and not meter.usage.priced:
            log.warning(
                "the model has no prices: a cost budget never stops this job "
                "(use a token budget, roost budget JOB --budget-tokens N)"
            )
        if message.get("role") == "assistant":
            self.ports.report()  # the row's figures move live
        if verdict == "warn":
            self._warn()
        elif verdict == "stop":
            self._stop_run()

    def on_settled(self, run: Run | None) -> None:
        meter = self.meter
        if meter.blocked is not None:
            if run is not None and meter.stopped_cause is None:
                meter.stopped_cause = run.cause.value
            self._save_stop()
            self._block()
            self._tell_ended()
        if self.stats_from_pi:
            self.ports.spawn(self._refresh_stats(), "get_session_stats")

    def on_budget_event(self, event: dict[str, Any]) -> None:
        """roostd says the limits changed (`roost budget`) or the tree's budget ran out."""
        meter, runs = self.meter, self.runs
        was_blocked = meter.blocked
        warning = event.get("treeWarning")
        if warning and self.ports.to_extension(
            protocol.event("budget_note", content=budget.note_text(str(warning)[:300]), steer=runs.streaming)
        ):
            log.info("tree budget warning: %s", warning)

        def opt(key: str) -> Any:
            value = event.get(key)
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None

        tokens, turns = opt("budgetTokens"), opt("maxTurns")
        lifted = meter.set_limits(
            Limits(opt("budget"), int(tokens) if tokens else None, int(turns) if turns else None)
        )
        tree = event.get("treeExhausted")
        meter.tree_exhausted = str(tree) if tree else None
        if meter.blocked is None and was_blocked is not None:
            lifted = True
        if meter.blocked is not None and was_blocked is None:
            self._stop_run()
            return
        if not lifted:
            self.ports.report()
            return
        log.info("budget raised: the job may run again")
        meter.ended_sent = False
        runs.enter(JobState.DONE)
        runs.status = ""
        cause, meter.stopped_cause = meter.stopped_cause, None
        self._save_stop()
        if cause is not None and self.ports.to_extension(
            protocol.event("note", content=budget.raised_note(meter.limits))
        ):
            runs.next_cause = RunCause(cause)  # the continuation keeps the run's cause
        # error_shown stays set: every later snapshot clears the row's error, so the clearing
        # is not lost when this report falls before the link is bound (a raise heard on
        # reconnect).
        self.ports.report()
        self.ports.wake()

    # -- its own steps -----------------------------------------------------------------
    def _save_stop(self) -> None:
        path = self.stop_note
        try:
            if self.meter.stopped_cause is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write_json(path, {"cause": self.meter.stopped_cause})
        except OSError as exc:
            log.warning("could not write %s: %s", path, exc)

    def _block(self) -> None:
        """The job is over a limit and no run is in progress: it shows why and waits."""
        reason = self.meter.blocked
        assert reason is not None
        self.runs.enter(JobState.FAILED)
        self.runs.status, self.runs.question = reason, None
        self.meter.error_shown = True

    def _warn(self) -> None:
        line = self.meter.warning_line()
        if not line:
            return
        log.info("budget warning: %s", line)
        self.ports.to_extension(
            protocol.event("budget_note", content=budget.note_text(line), steer=self.runs.streaming)
        )
        if self.spawned:
            self.ports.to_roostd("warn", line)

    def _stop_run(self) -> None:
        runs = self.runs
        log.info("%s: stopping the run", self.meter.blocked)
        if runs.run is not None:
            self.meter.stopped_cause = runs.run.cause.value
        if runs.streaming:
            self.ports.spawn(self._abort(), "abort at the budget")
        elif runs.run is None:
            self._block()
            self._tell_ended()
            self.ports.report()

    async def _abort(self) -> None:
        with contextlib.suppress(PiError, TimeoutError):
            await self.ports.pi_command("abort", timeout=30)

    def _tell_ended(self) -> None:
        reason = self.meter.blocked
        if reason and not self.meter.ended_sent:
            self.meter.ended_sent = True
            self.ports.to_roostd("exhausted", reason)

    async def _refresh_stats(self) -> None:
        """pi 1.x: take get_session_stats (the same sum over the whole file, plus compaction
        and cache-warming usage that no message event carries). Off the model path: after a
        settle."""
        try:
            stats = await self.ports.pi_command("get_session_stats", timeout=10)
        except (PiError, TimeoutError) as exc:
            log.debug("get_session_stats: %s", exc)
            return
        self.meter.usage.apply_stats(stats)
        self.ports.report()
