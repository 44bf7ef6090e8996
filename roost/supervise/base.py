"""The job table as the services below the handlers see it (`table`, `usage`, `router`,
`worktrees`): the part of `Daemon` they may use, as a `typing.Protocol`.

A leaf of `roost.supervise`: it imports no service, so they can all be typed against it
without a cycle. The handlers' wider view (this plus the router, rows, waiting) is
`roost.supervise.core.Core`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Unpack

if TYPE_CHECKING:
    from roost.config import Settings
    from roost.events.writer import EventLog
    from roost.job.record import Facts, JobRecord
    from roost.job.states import JobState
    from roost.mailbox import Mailbox
    from roost.supervise.jobqueue import JobQueue
    from roost.supervise.usagebook import UsageBook
    from roost.supervise.workers import WorkerProcess


class JobTable(Protocol):
    jobs: dict[str, JobRecord]
    procs: dict[str, WorkerProcess]
    events: EventLog
    usage_book: UsageBook
    queue: JobQueue

    def settings(self) -> Settings: ...

    def mailbox(self, record: JobRecord) -> Mailbox: ...

    def set_state(
        self, record: JobRecord, target: JobState, reason: str | None = None, **facts: Unpack[Facts]
    ) -> None: ...

    def job_changed(self, record: JobRecord, persist: bool = True) -> None: ...

    def start_worker(self, record: JobRecord, why: str) -> None: ...
