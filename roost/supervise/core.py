"""What a handler (`roost.supervise.handlers.*`) may use of roostd: `Core`, a
`typing.Protocol` that `Daemon` satisfies. Handlers are typed against it and never import
`daemon.py` (nor each other): a feature plugs in by adding a handler module and its ops to
`protocol.DAEMON_OPS`; `Daemon` checks at start-up that the two lists agree."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from roost.supervise.base import JobTable

if TYPE_CHECKING:
    from roost.job.record import JobRecord
    from roost.supervise.dependencies import Dependencies
    from roost.supervise.router import AgentRouter
    from roost.supervise.scheduler import Scheduler
    from roost.supervise.searchkeeper import SearchKeeper
    from roost.supervise.workers import WorkerProcess
    from roost.wire.connection import Connection, Handler


class Core(JobTable, Protocol):
    agents: AgentRouter
    deps: Dependencies  # jobs waiting on others
    subscribers: set[Connection]  # `roost view` and the like: pushed every changed row
    schedules: Scheduler
    search: SearchKeeper  # the search index's writer

    def find_job(self, ref: str) -> JobRecord: ...

    def row(self, record: JobRecord) -> dict[str, Any]: ...

    def add_job(self, record: JobRecord) -> None: ...

    def forget_job(self, record: JobRecord) -> None: ...

    def proc(self, record: JobRecord) -> WorkerProcess: ...

    async def wait_change(self, record: JobRecord, timeout: float | None) -> bool: ...

    async def wait_any_change(self, timeout: float | None) -> bool: ...

    def request_shutdown(self) -> None: ...


Op = Callable[["Core", "Connection", dict[str, Any]], Awaitable[dict[str, Any]]]


def bind(core: Core, ops: dict[str, Op]) -> dict[str, Handler]:
    """A handler module's op table: one module-level function per op, given the core."""
    return {name: partial(fn, core) for name, fn in ops.items()}
