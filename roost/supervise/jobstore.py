"""The job table's rules: loading every job record (quarantining unreadable ones),
choosing new job ids, accepting an item for a job (the one place its outcome is decided),
and whether a job is settled.

Only roostd uses it; a single record is `roost.job.record.JobRecord`, and the daemon
(`Daemon.set_state`) is the one writer of a job's state."""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from roost.host import paths
from roost.host.fsutil import utc_now
from roost.job.record import BAD_SUFFIX, BadRecord, JobRecord, Links, load_record
from roost.job.states import ItemDecision, ItemKind, JobKind, JobState, Outcome, ProcState, item_outcome
from roost.locks.holding import Held, other_writer
from roost.mailbox import MailboxError, MailboxFull
from roost.supervise import budget as budgets
from roost.supervise.coalesce import Coalesced
from roost.wire.protocol import REFUSED, RequestError

if TYPE_CHECKING:
    from roost.events.writer import EventLog
    from roost.supervise.base import JobTable

log = logging.getLogger(__name__)


SAVE_RETRY_SECONDS = 1.0
"""How often a job record whose save failed (a full disk) is written again."""


class Saved(Protocol):
    """What the saver uses of the daemon: the jobs, and the event log."""

    jobs: dict[str, JobRecord]
    events: EventLog


class RecordSaver:
    """Persists changed records. A failed save (a full disk) never stops the change: the
    record in memory is the truth that rows, waits and events show; the failure is logged
    and announced once (job.save_failed), and the save is retried until it succeeds, so
    job.json never keeps an old state for longer than the disk is full."""

    def __init__(self, table: Saved) -> None:
        self.table = table  # its jobs and events, as they are when a save happens
        self.unsaved: dict[str, str] = {}  # job id -> why its last change is not on disk
        self._retry_soon = Coalesced(self._retry_all, SAVE_RETRY_SECONDS)

    def save(self, record: JobRecord) -> None:
        try:
            record.save()
        except OSError as exc:
            if record.id not in self.unsaved:
                log.error(
                    "job %s: its record could not be saved (%s): retrying every %gs",
                    record.id,
                    exc,
                    SAVE_RETRY_SECONDS,
                )
                self.table.events.emit("job.save_failed", record, error=str(exc))
            self.unsaved[record.id] = str(exc)
            self._retry_soon()  # in SAVE_RETRY_SECONDS (roostd not serving: at the next change)
            return
        if self.unsaved.pop(record.id, None) is not None:
            log.info("job %s: its record is saved again", record.id)

    def _retry_all(self) -> None:
        for job_id in list(self.unsaved):
            record = self.table.jobs.get(job_id)
            if record is None:
                self.unsaved.pop(job_id, None)
            else:
                self.save(record)


def new_job_id(taken: set[str] | frozenset[str] = frozenset()) -> str:
    while True:
        job_id = secrets.token_hex(4)
        # A directory (or a planted symlink) of that name is never reused.
        if job_id not in taken and not os.path.lexists(paths.job_dir(job_id)):
            return job_id


def load_all() -> tuple[dict[str, JobRecord], list[JobRecord]]:
    """Every job record, and the jobs whose record could not be read.

    One bad job.json must not take down every job (nor roostd): it is moved aside to
    `job.json.bad` with the reason in `job.json.why` (as the mailbox quarantines an
    unreadable item), and the job is listed as `failed` with that reason under a
    stand-in record, so nothing disappears silently; its mailbox stays where it is.
    """
    records: dict[str, JobRecord] = {}
    recovered: list[JobRecord] = []
    root = paths.jobs_dir()
    if not root.is_dir():
        return records, recovered
    for job_dir in sorted(root.iterdir()):
        job_json = job_dir / "job.json"
        job_id = job_dir.name
        if job_dir.is_symlink() or not job_dir.is_dir():
            log.error("ignoring %s: not a job directory roost made", job_dir)
            continue
        if not os.path.lexists(job_json):
            bad = job_dir / f"job.json{BAD_SUFFIX}"
            if bad.is_file() and not bad.is_symlink():  # quarantined by an earlier roostd
                recovered.append(stand_in(job_dir, _salvage(bad), _why(job_dir)))
            continue
        try:
            if job_json.is_symlink():
                raise BadRecord("a symlink, not a file roost wrote")
            record = load_record(job_json)
            if record.id != job_id:
                raise BadRecord(f"its id {record.id!r} is not its directory's name")
        except (OSError, ValueError, TypeError, KeyError) as exc:
            recovered.append(quarantine_record(job_json, f"{type(exc).__name__}: {exc}"))
            continue
        records[record.id] = record
    return records, recovered


def quarantine_record(job_json: Path, reason: str) -> JobRecord:
    """Move an unreadable job.json aside and return the failed stand-in that replaces it."""
    job_id = job_json.parent.name
    bad = job_json.with_name(job_json.name + BAD_SUFFIX)
    why = job_json.with_name(job_json.name + ".why")
    log.error("job %s: unreadable job record %s (%s): moved to %s", job_id, job_json, reason, bad)
    salvaged = _salvage(job_json)
    try:
        os.replace(job_json, bad)
        fd = os.open(why, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"{utc_now()} {reason}\n")
    except OSError as exc:
        log.error("job %s: could not move its record aside: %s", job_id, exc)
    return stand_in(job_json.parent, salvaged, reason)


def _salvage(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _why(job_dir: Path) -> str:
    try:
        return (job_dir / "job.json.why").read_text(encoding="utf-8").strip()[:500]
    except OSError:
        return "unreadable"


def stand_in(job_dir: Path, salvaged: dict[str, Any], reason: str) -> JobRecord:
    """A failed record standing for a job whose job.json is unreadable (never saved,
    never started; `roost rm` removes the job, its mailbox is kept until then)."""
    job_id = job_dir.name

    def text(key: str, default: str | None) -> str | None:
        links = salvaged.get("links")  # schema 2 keeps them there
        value = salvaged.get(key, links.get(key) if isinstance(links, dict) else None)
        return value if isinstance(value, str) else default

    kind = JobKind.SHELL if text("kind", None) == JobKind.SHELL.value else JobKind.PI
    record = JobRecord(
        id=job_id,
        name=text("name", job_id) or job_id,
        kind=kind,
        cwd=text("cwd", "/") or "/",
        state=JobState.FAILED,
        session=text("session", None),
        task=text("task", None),
        links=Links(parent_session=text("parentSession", None), root_session=text("rootSession", None)),
        error=f"its job record was unreadable ({reason}); moved to job.json{BAD_SUFFIX}",
    )
    record.recovered = True
    return record


def accept_item(
    daemon: JobTable,
    record: JobRecord,
    kind: ItemKind,
    text: str,
    sender: dict[str, Any] | None = None,
    **extra: Any,
) -> Outcome:
    """Queue an item for a job and carry out roostd's decision (`states.item_outcome`, the
    one place it is made): wake the job, or mark its dialog answered. The worker delivers
    what the mailbox holds; a shell job takes no items at all.
    """
    if record.kind == JobKind.SHELL:
        raise RequestError(REFUSED, f"job {record.id} is a shell job: it takes no replies or messages")
    if record.state == JobState.WAITING:  # its task is not given yet: nothing may come first
        raise RequestError(
            REFUSED, f"job {record.id} is {record.status}: it takes replies and messages once it starts"
        )
    proc = daemon.procs.get(record.id)
    decision = item_outcome(
        kind=kind,
        job=record.state,
        attached=record.attached,
        worker=proc.state if proc is not None else None,
        worker_alive=proc is not None and proc.alive,
        dialog=record.dialog,
        busy=record.busy,
        over_budget=budgets.blocked(record),
    )
    if decision.post:
        try:  # a job directory replaced by a symlink is not followed (the mailbox checks the rest)
            paths.check_real_dir(record.dir)
            paths.check_real_dir(record.mailbox_dir)
        except OSError as exc:
            raise RequestError(REFUSED, f"job {record.id}: {exc}") from None
        try:
            daemon.mailbox(record).post(kind=kind.value, text=text, sender=sender, **extra)
        except MailboxFull as exc:
            raise RequestError(REFUSED, str(exc)) from None
        except MailboxError as exc:  # e.g. a directory of it replaced by a symlink
            raise RequestError(REFUSED, f"job {record.id}'s mailbox refused the item: {exc}") from None
    try:
        return _carry_out(daemon, record, kind, decision)
    except Exception as exc:
        if not decision.post:
            raise
        # The item is durably queued: an error now would tell the user it was not, and
        # they would send it again. The job says what went wrong; the answer is `queued`.
        log.exception("job %s: a %s was queued, then roostd failed", record.id, kind.value)
        record.error = f"a {kind.value} was queued, then roostd failed: {exc}"
        return Outcome.QUEUED


def _carry_out(daemon: JobTable, record: JobRecord, kind: ItemKind, decision: ItemDecision) -> Outcome:
    """What happens after the item is queued: wake the job, or mark its dialog answered."""
    if decision.wake and (held := held_by_other(record)) is not None:
        # Another process writes the session (a pi without roost's extension, started from
        # pi's resume hint): no second writer. The item waits; the job says why, as its
        # worker would have (roost.worker.lifecycle.Worker.check_lock), and nothing started.
        daemon.set_state(record, JobState.FAILED, busy=False, status="", error=held.message(record.id))
        return Outcome.QUEUED
    if decision.wake:
        daemon.start_worker(record, f"a {kind.value} arrived")
        daemon.job_changed(record)
        if record.state in (JobState.FAILED, JobState.QUEUED):  # not started: it waits
            return Outcome.QUEUED
    elif decision.answers_dialog:
        # The worker answers an open dialog with the first pending reply: mark it answered
        # now, so a `wait` right after this reply waits for the run instead of seeing the
        # dialog still open (the worker's own update follows and agrees).
        daemon.set_state(record, JobState.RUNNING, dialog=False, question=None, status="thinking")
    elif decision.outcome == Outcome.STARTED and not daemon.queue.has_room(record):
        # Its idle worker would start a run: with no slot free it waits queued (its
        # worker asks roostd for a slot first: roost.supervise.jobqueue.JobQueue.turn).
        daemon.queue.admit(record, f"a {kind.value} arrived")
        return Outcome.QUEUED
    elif decision.post:
        daemon.job_changed(record, persist=False)  # pending counts changed
    return decision.outcome


def held_by_other(record: JobRecord) -> Held | None:
    """Another process writes the job's session (roost.locks.holding: the one rule)."""
    if record.kind != JobKind.PI or not record.session:
        return None
    return other_writer(record.session, record.id)


def is_settled(daemon: JobTable, record: JobRecord) -> bool:
    """No pending item and no run starting or in progress (or nothing ever will run)."""
    proc = daemon.procs.get(record.id)
    if record.state == JobState.STOPPED:
        return True
    if budgets.blocked(record) and not record.busy:
        return True  # over budget: nothing runs (items wait) until the person raises it
    if record.state in (JobState.FAILED, JobState.REAPED) and (proc is None or not proc.alive):
        return record.state == JobState.FAILED or not daemon.mailbox(record).pending()
    if record.kind == JobKind.SHELL:
        return record.state in (JobState.DONE, JobState.FAILED)
    if record.dialog and record.state == JobState.NEEDS_INPUT:
        return True  # blocked on the user (its run is still busy): nothing happens until a reply
    if record.state == JobState.STARTING or record.busy:
        return False
    if record.id in daemon.queue.granted:
        # A run roostd granted (`turn`) that its worker has not reported yet: the worker can
        # take the item out of new/ before roostd reads the update saying the run is busy.
        return False
    if proc is None or proc.state != ProcState.RUNNING:
        return False
    return not daemon.mailbox(record).pending()
