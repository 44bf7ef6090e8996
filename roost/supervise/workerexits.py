"""What a worker's end means to its job: one handler per `WorkerExit`, in a table.

`WorkerProcess` classifies how its process ended (or that its scheduled restart happened)
and reports it; `Daemon._worker_event` hands the report to `WorkerExits.report`, which
looks the handler up by the `WorkerExit` and moves the job (`set_state`), starts it again,
or tells its parent (`agents.job_ended`). A removed job's report is dropped."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, Unpack

from roost.job.states import JobState, WorkerExit

if TYPE_CHECKING:
    from roost.events.writer import EventLog
    from roost.job.record import Facts, JobRecord
    from roost.mailbox import Mailbox
    from roost.supervise.router import AgentRouter

log = logging.getLogger("roostd")


class ExitHost(Protocol):
    """What the handlers use of the daemon."""

    jobs: dict[str, JobRecord]
    events: EventLog
    agents: AgentRouter  # a job that failed for good: its parent hears it (`job_ended`)

    def mailbox(self, record: JobRecord) -> Mailbox: ...

    def set_state(
        self, record: JobRecord, target: JobState, reason: str | None = None, **facts: Unpack[Facts]
    ) -> None: ...

    def job_changed(self, record: JobRecord, persist: bool = True) -> None: ...

    def start_worker(self, record: JobRecord, why: str) -> None: ...


class WorkerExits:
    """Built once by `Daemon.__init__`; `save` writes a record (the daemon's `RecordSaver`)."""

    def __init__(self, host: ExitHost, save: Callable[[JobRecord], None]) -> None:
        self.host = host
        self._save = save
        self._handlers: dict[WorkerExit, Callable[[JobRecord, WorkerExit, str], None]] = {
            WorkerExit.RESTARTED: self._restarted,
            WorkerExit.REAPED: self._reaped,
            WorkerExit.RELEASED: self._released,
            WorkerExit.STOPPED: self._stopped,
            WorkerExit.SHELL: self._shell,
            WorkerExit.FATAL: self._failed,
            WorkerExit.GAVE_UP: self._failed,
            WorkerExit.CRASHED: self._crashed,
        }
        assert set(self._handlers) == set(WorkerExit), "a WorkerExit without a handler"

    def report(self, record: JobRecord, how: WorkerExit, detail: str) -> None:
        if record.id not in self.host.jobs:
            return  # removed
        if how != WorkerExit.RESTARTED:
            log.info("job %s worker exit: %s %s", record.id, how.value, detail)
        self._handlers[how](record, how, detail)

    def _restarted(self, record: JobRecord, how: WorkerExit, detail: str) -> None:
        self._save(record)  # its new worker's pid and start time

    def _reaped(self, record: JobRecord, how: WorkerExit, detail: str) -> None:
        self.host.set_state(record, JobState.REAPED, "idle", busy=False, status="")

    def _released(self, record: JobRecord, how: WorkerExit, detail: str) -> None:
        if not record.attached and self.host.mailbox(record).pending():
            # The attach was given up while the worker waited for a safe point:
            # what arrived meanwhile would wait for the next item otherwise.
            self.host.start_worker(record, "an item is waiting (attach given up)")
        self.host.job_changed(record)

    def _stopped(self, record: JobRecord, how: WorkerExit, detail: str) -> None:
        if record.state != JobState.STOPPED:
            self.host.set_state(record, JobState.STOPPED, detail, busy=False, status="")
        else:
            self.host.job_changed(record)

    def _shell(self, record: JobRecord, how: WorkerExit, detail: str) -> None:
        code = int(detail) if detail.lstrip("-").isdigit() else None
        if code == 0:
            self.host.set_state(record, JobState.DONE, exit_code=0, busy=False, status="exit 0")
        else:
            self.host.set_state(
                record,
                JobState.FAILED,
                exit_code=code,
                busy=False,
                status=f"exit {detail}",
                error=f"command exited with {detail}",
            )

    def _failed(self, record: JobRecord, how: WorkerExit, detail: str) -> None:
        """FATAL (restarting cannot help) or GAVE_UP (it crashed too often)."""
        events = self.host.events
        if how == WorkerExit.GAVE_UP:  # the last crash is a crash too, then the give-up
            events.emit("worker.crashed", record, reason=detail, crashes=len(record.process.crashes))
        events.emit("worker.gave_up", record, reason=detail)
        # The reason (pi's words and the fix, for a configuration error) is the row's
        # summary too, so `roost ls` shows it where a failed run shows its error.
        self.host.set_state(
            record,
            JobState.FAILED,
            busy=False,
            status="",
            error=detail,
            summary=detail,
            question=None,
            dialog=False,
        )
        self.host.agents.job_ended(record, "crashed repeatedly" if how == WorkerExit.GAVE_UP else detail)

    def _crashed(self, record: JobRecord, how: WorkerExit, detail: str) -> None:
        """Crashed: its worker restarts after a backoff."""
        self.host.events.emit("worker.crashed", record, reason=detail, crashes=len(record.process.crashes))
        self.host.set_state(record, JobState.STARTING, busy=False, status=detail, dialog=False)

    def shell_ended_meanwhile(self, record: JobRecord) -> None:
        """A shell job whose worker ended while no roostd watched (found when roostd
        starts): its recorded status (`exit.json`)."""
        if record.state in (JobState.DONE, JobState.REAPED):
            return
        try:
            code: int | None = int(json.loads((record.dir / "exit.json").read_text())["code"])
        except (OSError, ValueError, KeyError, TypeError):
            code = None
        if code == 0:
            self.host.set_state(record, JobState.DONE, exit_code=0, status="exit 0")
        else:
            reason = (
                f"command exited with {code}"
                if code is not None
                else ("its worker ended while roostd was down, with no exit status")
            )
            self.host.set_state(record, JobState.FAILED, exit_code=code, error=reason, status="")
