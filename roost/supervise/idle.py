"""Idle jobs cost nothing: the warm window and the live-pi cap (`IdleKeeper`).

A `done` pi job with an empty mailbox keeps its worker and pi for `warmSeconds` (a reply in
that window reaches a live pi: milliseconds), then both are stopped and the job is
`reaped` (its session and mailbox stay; the next item starts it again, cold: a worker and a
pi boot, and pi reads the session). Past `maxLivePi` live pis, the least recently used of
those idle jobs are stopped at once, whatever their window. Only such idle jobs are ever
stopped: never a job that runs, starts, waits on a question or a dialog (its dialog lives in
pi), has items waiting, or is attached. README, Configuration, says why the defaults are
what they are (benchmarks/restart_bench.py measures them).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING

from roost.job.states import REAP_REASON, JobKind, JobState, ProcState
from roost.tasks import Tasks

if TYPE_CHECKING:
    from roost.job.record import JobRecord
    from roost.supervise.base import JobTable

log = logging.getLogger(__name__)

LIVE_JOB_BYTES = 150 * 2**20
"""What one live idle pi job holds (its worker and its pi, RSS), measured on pi 1.6.0."""
LIVE_PI_MEMORY_SHARE = 0.25
"""The share of the machine's memory idle pis may hold by default (maxLivePi unset)."""
MIN_LIVE_PI = 4


def default_live_pi_cap(memory_bytes: int | None = None) -> int:
    """maxLivePi when unset: a quarter of the machine's memory in live idle jobs."""
    if memory_bytes is None:
        try:
            memory_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            return MIN_LIVE_PI
    return max(MIN_LIVE_PI, int(memory_bytes * LIVE_PI_MEMORY_SHARE // LIVE_JOB_BYTES))


class IdleKeeper:
    """roostd's warm windows (one timer per idle job) and its live-pi cap."""

    def __init__(self, table: JobTable) -> None:
        self._table = table
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._idle_since: dict[str, float] = {}  # job id -> when it became idle (monotonic)
        self._stopping: set[str] = set()
        self._cap_check: asyncio.Handle | None = None
        self._tasks = Tasks(log)

    def live_pi_cap(self) -> int:
        cap = self._table.settings().maxLivePi
        return default_live_pi_cap() if cap is None else int(cap)

    def idle(self, record: JobRecord) -> bool:
        """Its worker and pi may be stopped: nothing would be cut short or wait on them."""
        proc = self._table.procs.get(record.id)
        return (
            record.kind == JobKind.PI
            and record.state == JobState.DONE
            and not record.busy
            and not record.attached
            and proc is not None
            and proc.state == ProcState.RUNNING
            and record.id not in self._stopping
            and not self._table.mailbox(record).pending()
        )

    def changed(self, record: JobRecord) -> None:
        """After any change of the job: (re)start or cancel its window, check the cap."""
        timer = self._timers.pop(record.id, None)
        if timer is not None:
            timer.cancel()
        if record.id in self._table.jobs and self.idle(record):
            loop = asyncio.get_running_loop()
            since = self._idle_since.setdefault(record.id, time.monotonic())
            delay = max(0.0, since + self._table.settings().warmSeconds - time.monotonic())
            self._timers[record.id] = loop.call_later(delay, self._window_over, record)
        else:
            self._idle_since.pop(record.id, None)
        # Checked once per burst of changes, and only when enough workers were ever made.
        if self._cap_check is None and len(self._table.procs) > self.live_pi_cap():
            self._cap_check = asyncio.get_running_loop().call_soon(self._enforce_cap)

    def _window_over(self, record: JobRecord) -> None:
        self._timers.pop(record.id, None)
        if record.id in self._table.jobs and self.idle(record):
            self._stop(record, f"idle for {self._table.settings().warmSeconds:g}s")

    def _enforce_cap(self) -> None:
        """Past maxLivePi live pis: stop idle ones, least recently used first."""
        self._cap_check = None
        live = [
            r
            for r in self._table.jobs.values()
            if r.kind == JobKind.PI
            and r.id not in self._stopping
            and (p := self._table.procs.get(r.id)) is not None
            and p.alive
        ]
        over = len(live) - self.live_pi_cap()
        if over <= 0:
            return
        idle = sorted((r for r in live if self.idle(r)), key=lambda r: self._idle_since.get(r.id, 0.0))
        for record in idle[:over]:
            self._stop(record, f"over maxLivePi ({len(live)} live pis)")

    def _stop(self, record: JobRecord, why: str) -> None:
        log.info("job %s: %s, stopping its worker and pi", record.id, why)
        self._stopping.add(record.id)
        timer = self._timers.pop(record.id, None)
        if timer is not None:
            timer.cancel()
        self._tasks.spawn(self._stop_now(record), f"stopping job {record.id}'s idle worker")

    async def _stop_now(self, record: JobRecord) -> None:
        proc = self._table.procs.get(record.id)
        try:
            if proc is not None:
                await proc.stop(REAP_REASON, self._table.settings().stopTimeoutSeconds)
        finally:
            self._stopping.discard(record.id)
            self._idle_since.pop(record.id, None)
        if (
            record.id in self._table.jobs
            and record.state == JobState.REAPED
            and self._table.mailbox(record).pending()
        ):
            # An item came while it was being stopped (its worker took it as its own):
            # it would wait for the next one otherwise.
            self._table.start_worker(record, "an item arrived while it was stopped")

    def forget(self, record: JobRecord) -> None:
        timer = self._timers.pop(record.id, None)
        if timer is not None:
            timer.cancel()
        self._idle_since.pop(record.id, None)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._cap_check is not None:
            self._cap_check.cancel()
