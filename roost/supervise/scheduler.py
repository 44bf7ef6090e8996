"""`Scheduler`: roostd's owner of schedules (README: Schedules). Built by `Daemon.__init__`,
started once the jobs are loaded, closed at shutdown.

No polling: each timed schedule has one loop timer for its next due time (capped at
TIMER_MAX, because the loop's clock stops while the machine sleeps: a wake after a sleep
finds what was missed), and a file trigger one watchdog watch per path. When a timer
fires, the due firings are counted from the last one kept on disk (`timing.When.due`) and
`--catch-up` decides which fire, so a roostd restart and a timer are one rule.

One firing of a schedule at a time (a lock each): a restart's catch-up, the firings queued
behind a run and a timer each decide `--overlap` on the run the one before made. And on the
truth: the last run's worker, adopted by a roostd that has just started, reports first (a
run that ended while roostd was down would otherwise read `running` from its record, and a
catch-up queued behind it would fire twice: `queued`, then `started`).

A firing sends the request `roost run` sends (or, with `--session same`, `roost reply`'s)
through roostd's own op table: a scheduled run is made exactly as a run from the CLI.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from roost.host import paths
from roost.schedules import book
from roost.schedules.book import Schedule
from roost.schedules.timing import CATCH_UP_MAX, ON_TIME, Debounce, firings
from roost.supervise.base import JobTable
from roost.supervise.jobstore import is_settled
from roost.tasks import Tasks
from roost.wire.ops import DAEMON_OPS
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError

if TYPE_CHECKING:
    from roost.job.record import JobRecord
    from roost.supervise.filetrigger import FileTriggers
    from roost.wire.connection import Handler

log = logging.getLogger(__name__)

REPORT_WAIT = 10.0
"""The longest a firing waits for the last run's worker, adopted by a roostd that has just
started, to report where that run is (it reconnects within a second or so): until then its
record is what the killed roostd left, and may call `running` a run that has ended."""

TIMER_MAX = 600.0
"""The longest a timer sleeps before it looks again (seconds): the loop's monotonic clock
does not count a machine's sleep, the wall clock (and the schedule's zone) does."""


class Host(JobTable, Protocol):
    handlers: dict[str, Handler]  # the op table: a firing is a `run` or a `reply` request


class Scheduler:
    def __init__(self, host: Host, clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self.clock = clock
        self.schedules: dict[str, Schedule] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._debounce: dict[str, Debounce] = {}
        self._triggers: FileTriggers | None = None
        self._tasks = Tasks(log)
        self._started = False
        self._by_job: dict[str, dict[str, str]] = {}  # JobRow's `schedule`, by job id
        self._draining: set[str] = set()  # schedules whose next queued firing is starting
        self._locks: dict[str, asyncio.Lock] = {}  # one firing of a schedule at a time
        host.events.listeners.append(self._on_event)

    # -- life ---------------------------------------------------------------------------
    def start(self) -> None:
        """Load the schedules and arm them: what was missed while roostd was down is due
        now (and follows each one's --catch-up)."""
        self.schedules = book.load()
        self._started = True
        for schedule in self.schedules.values():
            for made in schedule.jobs:
                self._by_job[made["id"]] = {"name": schedule.name, "cause": made["cause"], "due": made["due"]}
        for schedule in list(self.schedules.values()):
            if schedule.pending is not None:  # armed once that firing has its run
                self._tasks.spawn(self.finish_pending(schedule), f"schedule {schedule.name}")
                continue
            self.arm(schedule, restarted=True)
            if schedule.queued and schedule.last_job:  # its job may have ended meanwhile
                self._on_event({"type": "job.state", "job": {"id": schedule.last_job}})

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._triggers is not None:
            self._triggers.close()
        await self._tasks.cancel_all()

    def save(self) -> None:
        book.save(self.schedules)

    # -- adding, removing, pausing ------------------------------------------------------
    def add(self, schedule: Schedule) -> None:
        self.schedules[schedule.name] = schedule
        self.save()
        self.arm(schedule)

    def remove(self, schedule: Schedule) -> None:
        self._disarm(schedule)
        for made in schedule.jobs:  # its jobs stay, no longer a schedule's (as after a restart)
            self._by_job.pop(made["id"], None)
        del self.schedules[schedule.name]
        self._locks.pop(schedule.name, None)
        self.save()

    def set_paused(self, schedule: Schedule, paused: bool) -> None:
        """Pause or resume. A resumed schedule fires from now on: what fell due while it
        was paused was not missed, it was not wanted."""
        schedule.paused = paused
        if not paused and schedule.when.kind in ("cron", "every"):
            schedule.last_fired = max(schedule.last_fired or 0.0, self.clock())
        self.save()
        self.arm(schedule)

    def next_firing(self, schedule: Schedule) -> float | None:
        if schedule.paused:
            return None
        since = schedule.last_fired if schedule.last_fired is not None else schedule.created
        return schedule.when.next_after(max(since, self.clock()))

    # -- timers and triggers ------------------------------------------------------------
    def _disarm(self, schedule: Schedule) -> None:
        timer = self._timers.pop(schedule.name, None)
        if timer is not None:
            timer.cancel()
        self._debounce.pop(schedule.name, None)
        if self._triggers is not None:
            self._triggers.unwatch(schedule.name)

    def arm(self, schedule: Schedule, restarted: bool = False) -> None:
        """Set the schedule's timer (or watches) from what is on record; fire what is due
        (`restarted`: all of it was missed while roostd was down)."""
        self._disarm(schedule)
        if schedule.paused or not self._started:
            return
        if schedule.when.kind == "change":
            self._watch(schedule)
            return
        now = self.clock()
        since = schedule.last_fired if schedule.last_fired is not None else schedule.created
        due = schedule.when.due(since, now)
        if due:
            grace = None if restarted else ON_TIME
            self._tasks.spawn(self._fire_due(schedule, due, now, grace), f"schedule {schedule.name}")
            return
        nxt = schedule.when.next_after(max(since, now))
        if nxt is None:
            return  # an --at that has fired
        delay = min(max(nxt - now, 0.0), TIMER_MAX)
        loop = asyncio.get_running_loop()
        self._timers[schedule.name] = loop.call_later(delay, self._wake, schedule.name)

    def _wake(self, name: str) -> None:
        self._timers.pop(name, None)
        schedule = self.schedules.get(name)
        if schedule is not None:
            self.arm(schedule)  # early (the cap, clock drift): it only sets the timer again

    async def _fire_due(self, schedule: Schedule, due: list[float], now: float, grace: float | None) -> None:
        chosen = firings(due, now, schedule.catch_up, grace)
        if not chosen:  # all missed, --catch-up none: on record, so never counted again
            schedule.last_fired, schedule.last_cause = due[-1], "catch-up"
            schedule.last_outcome, schedule.last_detail = (
                "skipped",
                (f"{len(due)} missed firing(s) not caught up (--catch-up none)"),
            )
            self.save()
        for when, cause in chosen:
            if self.schedules.get(schedule.name) is not schedule:
                return  # removed meanwhile
            await self.fire(schedule, cause, when)
        if self.schedules.get(schedule.name) is schedule:
            self.arm(schedule)

    def _watch(self, schedule: Schedule) -> None:
        if self._triggers is None:
            from roost.supervise.filetrigger import FileTriggers

            self._triggers = FileTriggers(asyncio.get_running_loop(), self._changed, self._ignored)
        self._debounce[schedule.name] = Debounce(schedule.debounce, self.clock)
        try:
            self._triggers.watch(schedule.name, schedule.when.expr.split("\n"))
        except OSError as exc:
            schedule.last_outcome, schedule.last_detail = "failed", f"cannot watch: {exc}"
            log.error("schedule %s: cannot watch its paths: %s", schedule.name, exc)

    def _ignored(self, name: str) -> list[str]:
        """What a file trigger never fires on besides `.git/`: ROOST_HOME and the
        worktrees of the jobs the schedule made."""
        out = [str(paths.roost_home())]
        schedule = self.schedules.get(name)
        for made in schedule.jobs if schedule else ():
            record = self.host.jobs.get(made["id"])
            if record is not None and record.worktree and record.worktree.get("path"):
                out.append(str(record.worktree["path"]))
        return out

    def _changed(self, name: str, changed: list[str]) -> None:
        """On the loop: paths changed under a trigger's watch; fire once the burst is over."""
        debounce = self._debounce.get(name)
        if debounce is None:
            return
        deadline = debounce.note(changed)
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()
        loop = asyncio.get_running_loop()
        self._timers[name] = loop.call_later(max(deadline - self.clock(), 0.0), self._burst_over, name)

    def _burst_over(self, name: str) -> None:
        self._timers.pop(name, None)
        debounce, schedule = self._debounce.get(name), self.schedules.get(name)
        if debounce is None or schedule is None:
            return
        taken = debounce.take()
        if taken is None:  # woken early: look again at the deadline
            if debounce.pending:
                self._changed(name, [])
            return
        self._tasks.spawn(self.fire(schedule, "change", self.clock(), taken), f"schedule {name}")

    # -- firing -------------------------------------------------------------------------
    def _last_busy(self, schedule: Schedule) -> JobRecord | None:
        record = self.host.jobs.get(schedule.last_job) if schedule.last_job else None
        return record if record is not None and not is_settled(self.host, record) else None

    async def _last_busy_now(self, schedule: Schedule) -> JobRecord | None:
        """`_last_busy` on the truth: once the last run's worker, if roostd adopted it at
        its start, has reported (a run that ended while roostd was down is no overlap)."""
        record = self.host.jobs.get(schedule.last_job) if schedule.last_job else None
        proc = self.host.procs.get(record.id) if record is not None else None
        if proc is not None and not proc.reported.is_set():
            try:
                await asyncio.wait_for(proc.reported.wait(), REPORT_WAIT)
            except TimeoutError:
                log.warning(
                    "schedule %s: job %s's worker has not reported in %gs: its record decides the overlap",
                    schedule.name,
                    proc.record.id,
                    REPORT_WAIT,
                )
        return self._last_busy(schedule)

    def _lock(self, schedule: Schedule) -> asyncio.Lock:
        return self._locks.setdefault(schedule.name, asyncio.Lock())

    async def fire(
        self, schedule: Schedule, cause: str, due: float, changed: list[str] | None = None
    ) -> dict[str, Any]:
        """One firing: kept on disk first, then its run. Returns what happened, as the
        `schedule.fired` event says it. One firing of a schedule at a time (a restart's
        catch-up, its queued firings and a timer decide one after another, each on the
        run the one before made)."""
        async with self._lock(schedule):
            return await self._fire(schedule, cause, due, changed)

    async def _fire(
        self, schedule: Schedule, cause: str, due: float, changed: list[str] | None
    ) -> dict[str, Any]:
        """`fire`, under the schedule's lock."""
        if cause in ("time", "catch-up"):
            schedule.last_fired = max(schedule.last_fired or 0.0, due)
        schedule.last_cause = cause
        busy = await self._last_busy_now(schedule)
        record: JobRecord | None = busy
        if busy is not None and schedule.overlap == "skip":
            outcome, detail = "skipped", f"job {busy.id} is still running (--overlap skip)"
        elif busy is not None:
            if len(schedule.queued) >= CATCH_UP_MAX:
                outcome, detail = "skipped", f"{CATCH_UP_MAX} firings already wait for job {busy.id}"
            else:
                schedule.queued.append({"cause": cause, "due": due, "paths": changed})
                outcome, detail = "queued", f"runs when job {busy.id} ends (--overlap queue)"
        else:
            schedule.fired += 1
            last = self.host.jobs.get(schedule.last_job) if schedule.last_job else None
            schedule.pending = {
                "cause": cause,
                "due": due,
                "paths": changed,
                "name": self._job_name(schedule),
                "job": last.id if schedule.session == "same" and last else None,
            }
            # On disk before the run: a roostd killed from here on finishes this firing
            # when it starts again (finish_pending), once.
            self.save()
            outcome, detail, record = await self._run(schedule)
        return self._fired(schedule, cause, due, changed, outcome, detail, record)

    def _fired(
        self,
        schedule: Schedule,
        cause: str,
        due: float,
        changed: list[str] | None,
        outcome: str,
        detail: str,
        record: JobRecord | None,
    ) -> dict[str, Any]:
        schedule.pending = None
        schedule.last_outcome, schedule.last_detail = outcome, detail
        self.save()
        return self.host.events.emit(
            "schedule.fired",
            record,
            schedule=schedule.name,
            cause=cause,
            due=book.iso(due),
            outcome=outcome,
            detail=detail,
            paths=changed,
        )

    async def _run(self, schedule: Schedule) -> tuple[str, str, JobRecord | None]:
        """The pending firing's run: (outcome, why it failed, its job)."""
        try:
            outcome, record = await self._start(schedule, **schedule.pending or {})
            return outcome, "", record
        except RequestError as exc:
            return "failed", exc.message, None
        except Exception as exc:  # a bug must not stop the schedule: said, and logged
            log.exception("schedule %s: the firing failed", schedule.name)
            return "failed", f"roostd could not start the run: {exc!r}", None

    async def finish_pending(self, schedule: Schedule) -> None:
        """A firing on record whose end roostd did not note (it was killed meanwhile): its
        job exists (or its reply is in the job's mailbox), or its run starts now; either
        way it runs once. Then the schedule is armed as after any restart."""
        async with self._lock(schedule):
            await self._finish_pending(schedule)
        if self.schedules.get(schedule.name) is schedule:
            self.arm(schedule, restarted=True)

    async def _finish_pending(self, schedule: Schedule) -> None:
        pending = schedule.pending or {}
        cause, due, changed = pending["cause"], pending["due"], pending.get("paths")
        made = self._made_before(schedule, pending)
        record: JobRecord | None = made
        if made is not None:
            log.info(
                "schedule %s: the firing for %s had made its run before roostd stopped",
                schedule.name,
                book.iso(due),
            )
            outcome, detail = ("replied" if pending.get("job") else "started"), ""
            schedule.last_job = made.id
            self._made(schedule, made.id, cause, due)
        else:
            outcome, detail, record = await self._run(schedule)
        self._fired(schedule, cause, due, changed, outcome, detail, record)

    def _made_before(self, schedule: Schedule, pending: dict[str, Any]) -> JobRecord | None:
        if pending.get("job"):  # `same`: the reply is in the job's mailbox, or it is not
            record = self.host.jobs.get(pending["job"])
            if record is None:
                return None
            text = book.firing_task(schedule, pending["cause"], pending["due"], pending.get("paths"))
            box = self.host.mailbox(record)
            return record if any(i.text == text for i in [*box.pending(), *box.acked()]) else None
        return next((r for r in self.host.jobs.values() if r.name == pending["name"]), None)

    async def _start(
        self, schedule: Schedule, cause: str, due: float, paths: list[str] | None, name: str, job: str | None
    ) -> tuple[str, JobRecord]:
        changed = paths
        text = book.firing_task(schedule, cause, due, changed)
        last = self.host.jobs.get(job) if job else None
        if last is not None:
            answer = await self._op("reply", job=last.id, text=text)
            if answer["status"] == "stopped":
                raise RequestError(
                    REFUSED, f"job {last.id} is stopped: `roost start {last.id}` to go on, or remove it"
                )
            self._made(schedule, last.id, cause, due)
            return "replied", last
        request = {**schedule.run, "task": text, "name": name, "env": schedule.env}
        answer = await self._op("run", **request)
        record = self.host.jobs[answer["id"]]
        schedule.last_job = record.id
        self._made(schedule, record.id, cause, due)
        return "started", record

    def _made(self, schedule: Schedule, job_id: str, cause: str, due: float) -> None:
        entry = {"id": job_id, "cause": cause, "due": book.iso(due)}
        schedule.jobs = [*(j for j in schedule.jobs if j["id"] != job_id), entry][-book.JOBS_KEPT :]
        self._by_job[job_id] = {"name": schedule.name, "cause": cause, "due": entry["due"]}

    def job_field(self, job_id: str) -> dict[str, str] | None:
        """A JobRow's `schedule`: the schedule that started the job and its last firing
        into it ({name, cause, due}), None for a job no schedule made."""
        return self._by_job.get(job_id)

    async def _op(self, op: str, /, **request: Any) -> dict[str, Any]:
        """roostd asks itself, as a client would (no connection: these ops use none), its
        request checked as a frame's is (roost.wire.ops): what schedules.json holds was
        checked when the schedule was added, by the roost of that day."""
        wrong = DAEMON_OPS[op].check(request)
        if wrong:
            raise RequestError(BAD_REQUEST, f"{op}: {wrong}")
        answer = await self.host.handlers[op](None, {"op": op, **request})  # type: ignore[arg-type]
        assert answer is not None
        return answer

    def _job_name(self, schedule: Schedule) -> str:
        taken = {r.name for r in self.host.jobs.values()}
        n = schedule.fired
        while f"{schedule.name}-{n}" in taken:
            n += 1
        return f"{schedule.name}-{n}"

    def _on_event(self, event: dict[str, Any]) -> None:
        """An overlap-queued firing runs once the job it waited for has ended."""
        job = event.get("job")
        if event["type"] not in ("job.state", "job.removed") or not isinstance(job, dict):
            return
        for schedule in self.schedules.values():
            if schedule.queued and schedule.last_job == job.get("id") and self._last_busy(schedule) is None:
                self._drain(schedule)

    def _drain(self, schedule: Schedule) -> None:
        """Run the next queued firing, if any waits and none is starting."""
        if schedule.queued and schedule.name not in self._draining and not schedule.paused:
            self._draining.add(schedule.name)
            self._tasks.spawn(self._next_queued(schedule), f"schedule {schedule.name}")

    async def _next_queued(self, schedule: Schedule) -> None:
        """One queued firing at a time: the next waits for the run this one starts. Still
        behind a run (one a firing made meanwhile), it stays first in line: that run's end
        drains it."""
        try:
            async with self._lock(schedule):
                if (
                    not schedule.queued
                    or schedule.paused
                    or self.schedules.get(schedule.name) is not schedule
                    or await self._last_busy_now(schedule) is not None
                ):
                    return
                queued = schedule.queued.pop(0)
                await self._fire(schedule, queued["cause"], queued["due"], queued.get("paths"))
        finally:
            self._draining.discard(schedule.name)

    async def run_now(self, schedule: Schedule) -> dict[str, Any]:
        return await self.fire(schedule, "run-now", self.clock())
