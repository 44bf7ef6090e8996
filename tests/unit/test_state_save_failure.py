"""A state move whose save fails (a full disk; docs/security.md, door 5): the move still happens
in memory and is shown (rows, waits, events, the parent's `ended`), the failure is logged and
announced once, and the save is retried until the record on disk agrees."""

from __future__ import annotations

import asyncio
import errno
import json
from pathlib import Path
from typing import Any

import pytest

from roost.host import paths
from roost.job import record as jobs_module
from roost.job.record import JobRecord
from roost.job.states import JobKind, JobState, ProcState, WorkerExit
from roost.supervise import daemon as daemon_module
from roost.supervise import jobstore

pytestmark = pytest.mark.usefixtures("home")


class FakeProc:
    def __init__(self, record: JobRecord) -> None:
        self.record = record
        self.alive = True
        self.state = ProcState.RUNNING


class Disk:
    """atomic_write_json of job records, with a switch for "the disk is full"."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        real = jobs_module.atomic_write_json

        def write(path: Path, data: Any, mode: int = 0o600) -> None:
            if self.full:
                raise OSError(errno.ENOSPC, "No space left on device")
            real(path, data, mode)

        monkeypatch.setattr(jobs_module, "atomic_write_json", write)


def test_a_failed_job_shows_failed_while_the_disk_is_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jobstore, "SAVE_RETRY_SECONDS", 0.05, raising=False)
    disk = Disk(monkeypatch)

    async def scenario() -> None:
        daemon = daemon_module.Daemon()
        events: list[dict[str, Any]] = []
        daemon.events.listeners.append(events.append)
        ended: list[str] = []
        monkeypatch.setattr(daemon.agents, "job_ended", lambda record, why: ended.append(why))
        record = JobRecord(
            id="0000000a", name="n", kind=JobKind.PI, cwd="/", state=JobState.RUNNING, session=None
        )
        paths.ensure_dir(record.dir)
        record.save()
        daemon.jobs[record.id] = record
        daemon.procs[record.id] = FakeProc(record)  # type: ignore[assignment]
        waiter = asyncio.ensure_future(daemon.wait_change(record, 5))
        await asyncio.sleep(0)

        disk.full = True
        daemon._worker_event(daemon.procs[record.id], WorkerExit.GAVE_UP, "gave up")
        # The truth is shown at once, though job.json still says running.
        assert daemon.row(record)["state"] == "failed"
        assert await waiter  # `roost wait` woke
        assert [e["type"] for e in events if e["type"] != "worker.crashed"] == [
            "worker.gave_up",
            "job.save_failed",
            "job.state",
            "job.failed",
        ]
        assert "No space left" in events[2]["error"]
        assert ended == ["crashed repeatedly"]  # the parent hears of it
        assert json.loads(record.file.read_text())["state"] == "running"

        await asyncio.sleep(0.2)  # still full: retried, announced once
        assert [e["type"] for e in events].count("job.save_failed") == 1
        disk.full = False
        for _ in range(100):
            if json.loads(record.file.read_text())["state"] == "failed":
                break
            await asyncio.sleep(0.02)
        assert json.loads(record.file.read_text())["state"] == "failed"
        assert not daemon._saver.unsaved
        daemon.events.close()

    asyncio.run(scenario())
