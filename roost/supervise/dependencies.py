"""Dependencies between jobs (README: Dependencies): roostd's side of `--after`.

A job made with dependencies is born `waiting`: its task is kept in its record, not yet in
its mailbox, and it has no worker. Whenever a job changes (`Daemon.job_changed`), the jobs
waiting on it are weighed again on the loop's next turn: no polling. The rules are
`roost.agents.depends`; this module keeps them durable across a roostd SIGKILL:

- the wait list lives in the waiting job's record (`after`: jobs, names, mode, results,
  the outcomes seen so far), so a new roostd weighs every waiting job again when it loads
  (`resume`), from the records as they are then;
- letting a job go posts its task (with what its dependencies ended with) into its mailbox,
  then starts its worker through the gate every start passes (`start_worker`: the queue).
  The record says `starting` (or `queued`) before a worker is spawned, so a roostd killed
  after that never lets it go again; one killed between the post and that save finds the
  task already in the mailbox and does not post it twice. A job never starts before its
  dependencies let it go: nothing else starts a waiting job (`roost start` refuses it,
  items to it are refused, a new roostd leaves it to this module).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from roost.agents.depends import (
    DONE,
    REMOVED,
    DependencyError,
    Ended,
    checked_mode,
    checked_refs,
    decide,
    find_cycle,
    outcome_of,
    task_with,
    waiting_on,
)
from roost.job.states import ItemKind, JobKind, JobState, RunCause
from roost.mailbox import MailboxError
from roost.pi.transcript import content_text, read_entries
from roost.supervise.coalesce import Coalesced
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError

if TYPE_CHECKING:
    from roost.job.record import JobRecord
    from roost.supervise.base import JobTable
    from roost.supervise.router import AgentRouter

    class Table(JobTable, Protocol):
        agents: AgentRouter


log = logging.getLogger(__name__)

GO_WHY = "its dependencies let it go"


def final_answer(record: JobRecord) -> str | None:
    """The text of the last answer in the job's session file (None: it has none)."""
    if record.kind != JobKind.PI or not record.session:
        return None
    for entry in reversed(read_entries(record.session)):
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "assistant":
            text = content_text(message.get("content")).strip()
            if text:
                return text
    return None


def _info(record: JobRecord) -> dict[str, Any]:
    return record.after if isinstance(record.after, dict) else {}


def _jobs(record: JobRecord) -> list[str]:
    jobs = _info(record).get("jobs")
    return [j for j in jobs if isinstance(j, str)] if isinstance(jobs, list) else []


def _ended(record: JobRecord) -> dict[str, str]:
    ended = _info(record).get("ended")
    if not isinstance(ended, dict):
        ended = {}
        if isinstance(record.after, dict):
            record.after["ended"] = ended
    return ended


def _names(record: JobRecord) -> dict[str, str]:
    names = _info(record).get("names")
    return names if isinstance(names, dict) else {}


class Dependencies:
    """Built once by `Daemon.__init__`: holds new jobs that wait (`hold`, `launched`),
    weighs them when a job changes (`changed`) and after a restart (`resume`)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._waiters: dict[str, set[str]] = {}  # a dependency's id -> the jobs waiting on it
        self._due: set[str] = set()
        self._weigh_soon = Coalesced(self._weigh_due)
        self._ready = False  # until `resume`, the table is still loading

    # -- a new job -------------------------------------------------------------------------
    def hold(self, record: JobRecord, request: dict[str, Any], resolve: Callable[[str], JobRecord]) -> None:
        """Check a run's or spawn's `after` (`afterMode`, `withResults`) and, when it has
        one, make the new job `waiting` (before it is first saved). `resolve` finds a
        dependency by reference (a spawn: within the tree's reach), or raises."""
        after = request.get("after")
        with_results = request.get("withResults")
        if after in (None, "", []):
            if request.get("afterMode") is not None or with_results:
                raise RequestError(BAD_REQUEST, "afterMode and withResults need after (the jobs to wait on)")
            return
        try:
            refs, mode = checked_refs(after), checked_mode(request.get("afterMode"))
        except DependencyError as exc:
            raise RequestError(BAD_REQUEST, str(exc)) from None
        if with_results is not None and not isinstance(with_results, bool):
            raise RequestError(BAD_REQUEST, "withResults must be true or false")
        if record.kind == JobKind.SHELL and (with_results or mode == "settled"):
            raise RequestError(
                BAD_REQUEST,
                "a shell job has no task to tell: --with-results and --after-settled are for pi jobs",
            )
        names: dict[str, str] = {}
        for ref in refs:
            if ref in (record.id, record.name):
                raise RequestError(REFUSED, f"job {ref!r} cannot wait on itself (a cycle)")
            dep = resolve(ref)
            names.setdefault(dep.id, dep.name)
        edges = {r.id: _jobs(r) for r in self.table.jobs.values() if r.after}
        cycle = find_cycle(record.id, list(names), edges)
        if cycle is not None:
            raise RequestError(REFUSED, "these dependencies make a cycle: " + " -> ".join(cycle))
        record.after = {
            "jobs": list(names),
            "names": names,
            "mode": mode,
            "results": bool(with_results),
            "ended": {},
            "given": False,
        }
        record.state = JobState.WAITING
        record.status = self._status(record)

    def launched(self, record: JobRecord) -> None:
        """A new waiting job is in the table and saved: announce it, weigh it at once (its
        dependencies may have ended already)."""
        self.table.events.emit("job.waiting", record, after=_jobs(record), mode=_info(record).get("mode"))
        self._index(record)
        self._weigh(record)

    # -- waking ----------------------------------------------------------------------------
    def changed(self, record: JobRecord) -> None:
        """A job changed (Daemon.job_changed): the jobs waiting on it are weighed soon."""
        if not self._ready:
            return
        waiters = self._waiters.get(record.id)
        if waiters:
            self._due.update(waiters)
            self._schedule()
        if record.id not in self.table.jobs:  # removed: its waiters are due, and weighed
            self._waiters.pop(record.id, None)

    def removing(self, record: JobRecord) -> None:
        """`roost rm` of a job: to the jobs waiting on it, it is removed from now on (its
        worker's stop on the way out is no `stopped` of its own)."""
        for job_id in self._waiters.get(record.id, ()):
            waiter = self.table.jobs.get(job_id)
            if waiter is not None and waiter.state == JobState.WAITING:
                _ended(waiter).setdefault(record.id, REMOVED)
                self._due.add(job_id)
        self._schedule()

    def resume(self) -> None:
        """After roostd's start: every waiting job, weighed again from the records."""
        self._ready = True
        for record in self.table.jobs.values():
            if record.state == JobState.WAITING:
                self._index(record)
                self._due.add(record.id)
        self._schedule()

    def _index(self, record: JobRecord) -> None:
        for job in _jobs(record):
            self._waiters.setdefault(job, set()).add(record.id)

    def _schedule(self) -> None:
        if self._due:
            self._weigh_soon()

    def _weigh_due(self) -> None:
        due, self._due = self._due, set()
        for job_id in sorted(due):
            record = self.table.jobs.get(job_id)
            if record is None or record.state != JobState.WAITING:
                for waiters in self._waiters.values():
                    waiters.discard(job_id)
                continue
            try:
                self._weigh(record)
            except Exception:  # one job must not keep the others waiting for ever
                log.exception("job %s: could not weigh its dependencies", job_id)

    def _weigh(self, record: JobRecord) -> None:
        if record.state != JobState.WAITING or record.id not in self.table.jobs:
            return
        mode = str(_info(record).get("mode") or "all")
        ended, seen = _ended(record), False
        for job in _jobs(record):
            if job not in ended:
                dep = self.table.jobs.get(job)
                outcome = outcome_of(dep.state if dep is not None else None, mode)
                if outcome is not None:
                    ended[job], seen = outcome, True
        verdict = decide(mode, _jobs(record), ended, _names(record))
        if verdict.action == "start":
            self._let_go(record)
        elif verdict.action == "fail":
            self._fail(record, str(verdict.error))
        elif seen:
            record.status = self._status(record)
            self.table.job_changed(record)

    # -- the two ways out ----------------------------------------------------------------
    def _let_go(self, record: JobRecord) -> None:
        info = _info(record)
        if record.kind == JobKind.PI and not self._task_posted(record):
            assert record.task is not None
            text = record.task
            if info.get("results") or info.get("mode") == "settled":
                text = task_with(text, self._described(record), bool(info.get("results")))
            try:
                self.table.mailbox(record).post(
                    kind=ItemKind.REPLY.value, text=text, sender=None, cause=RunCause.TASK.value
                )
            except (OSError, MailboxError) as exc:
                self._fail(record, f"its task could not be given: {exc}")
                return
        info["given"] = True
        self.table.events.emit("job.unblocked", record, ended=dict(_ended(record)))
        self.table.start_worker(record, GO_WHY)  # the queue's gate: starting, or queued

    def _fail(self, record: JobRecord, error: str) -> None:
        self.table.set_state(record, JobState.FAILED, busy=False, status="", error=error)
        self.table.agents.job_ended(record, error)  # a spawned job's parent hears it

    def _task_posted(self, record: JobRecord) -> bool:
        """Its task is in its mailbox already (a roostd was killed right after posting)."""
        try:
            pending = self.table.mailbox(record).pending()
        except (OSError, MailboxError):
            return False
        return any(
            item.kind == ItemKind.REPLY.value and item.extra.get("cause") == RunCause.TASK.value
            for item in pending
        )

    def _described(self, record: JobRecord) -> list[Ended]:
        """Each dependency as the task tells it: how it ended, and with results its answer."""
        ended, names = _ended(record), _names(record)
        results = bool(_info(record).get("results"))
        out = []
        for job in _jobs(record):
            dep = self.table.jobs.get(job)
            outcome = ended.get(job) or (dep.state.value if dep is not None else REMOVED)
            name = str(names.get(job) or (dep.name if dep is not None else job))
            if dep is None:
                out.append(Ended(job, name, outcome))
                continue
            result = dep.result if results else None
            answer = final_answer(dep) if results and result is None else None
            error = dep.error if outcome != DONE else None
            out.append(Ended(job, name, outcome, error, answer, result))
        return out

    # -- rows ------------------------------------------------------------------------------
    def _status(self, record: JobRecord) -> str:
        names = _names(record)
        left = ", ".join(str(names.get(j) or j) for j in waiting_on(_jobs(record), _ended(record)))
        mode = _info(record).get("mode")
        if mode == "any":
            return f"waiting on any of {left}"
        return f"waiting on {left}" + (" to end" if mode == "settled" else "")

    def never_given(self, record: JobRecord) -> bool:
        """A job that waited and was stopped or failed before its task was given: starting
        its worker would run nothing."""
        return bool(record.after) and not _info(record).get("given")

    @staticmethod
    def row_fields(record: JobRecord) -> dict[str, Any]:
        """The row's `after` (README: JSON output): null, or what it waits (or waited) on."""
        if not record.after:
            return {"after": None}
        ended = _ended(record)
        return {
            "after": {
                "jobs": _jobs(record),
                "mode": _info(record).get("mode"),
                "withResults": bool(_info(record).get("results")),
                "ended": dict(ended),
                "waitingOn": waiting_on(_jobs(record), ended),
            }
        }
