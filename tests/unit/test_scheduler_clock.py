"""roostd's Scheduler with an injected clock and a stand-in daemon: what a restart fires
(from the last firing on disk, in the schedule's zone, across a DST change), and that a
firing is on disk before its run starts."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from roost.job.states import JobKind, JobState, ProcState
from roost.schedules import book
from roost.schedules.book import Schedule
from roost.schedules.timing import When
from roost.supervise import scheduler as scheduler_module
from roost.supervise.scheduler import Scheduler

BERLIN = ZoneInfo("Europe/Berlin")


class Events:
    def __init__(self) -> None:
        self.listeners: list[Any] = []
        self.emitted: list[dict[str, Any]] = []

    def emit(self, kind: str, job: Any = None, /, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "job": {"id": job.id} if job else None, **fields}
        self.emitted.append(event)
        return event


class Job:
    def __init__(self, job_id: str) -> None:
        self.id, self.name, self.worktree = job_id, job_id, None
        self.state = JobState.STOPPED  # its run is over: the next firing is no overlap


class Host:
    """The part of roostd the Scheduler uses; `run` records what it was asked and what
    schedules.json held at that moment."""

    def __init__(self) -> None:
        self.jobs: dict[str, Any] = {}
        self.procs: dict[str, Any] = {}
        self.events = Events()
        self.runs: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.handlers = {"run": self._run}

    async def _run(self, conn: Any, request: dict[str, Any]) -> dict[str, Any]:
        on_disk = json.loads(Path(book.paths.schedules_file()).read_text())
        job = Job(f"job{len(self.runs) + 1}")
        self.jobs[job.id] = job
        self.runs.append((request, on_disk["schedules"][0]))
        return {"id": job.id}


def at(*parts: int, fold: int = 0) -> float:
    return datetime(*parts, tzinfo=BERLIN, fold=fold).timestamp()  # type: ignore[misc]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path))
    return tmp_path


def restart(schedule: Schedule, now: float) -> Host:
    """A roostd that starts at `now` with `schedule` on disk."""
    book.save({schedule.name: schedule})
    host = Host()

    async def main() -> None:
        scheduler = Scheduler(host, clock=lambda: now)  # type: ignore[arg-type]
        scheduler.start()
        for _ in range(20):  # the firings are tasks: let them run
            await asyncio.sleep(0)
        await scheduler.close()

    asyncio.run(main())
    return host


def nightly(last_fired: float, catch_up: str) -> Schedule:
    return Schedule(
        name="nightly",
        when=When("cron", "30 2 * * *", "Europe/Berlin", 0.0),
        run={"task": "scout", "cwd": "/"},
        created=0.0,
        last_fired=last_fired,
        catch_up=catch_up,
    )


def test_a_restart_across_the_dst_night_catches_up_once(home: Path) -> None:
    # Last fired on Saturday 02:30; roostd was down until Monday noon, across the night
    # when 02:30 does not exist (fired at 03:00 instead).
    host = restart(nightly(at(2026, 3, 28, 2, 30), "one"), at(2026, 3, 30, 12, 0))
    assert len(host.runs) == 1
    request, on_disk = host.runs[0]
    assert on_disk["last_fired"] == at(2026, 3, 30, 2, 30)  # on disk before the run began
    assert on_disk["fired"] == 1
    assert request["name"] == "nightly-1" and request["task"].startswith("scout\n\n[roost]")
    (event,) = host.events.emitted
    assert event["cause"] == "catch-up" and event["outcome"] == "started"
    assert event["due"] == "2026-03-30T00:30:00.000Z"


def test_a_restart_with_catch_up_all_fires_each_night_in_order(home: Path) -> None:
    host = restart(nightly(at(2026, 3, 28, 2, 30), "all"), at(2026, 3, 30, 12, 0))
    dues = [e["due"] for e in host.events.emitted]
    # Sunday's 02:30 did not exist: that night fired at 03:00 CEST (01:00 UTC)
    assert dues == ["2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z"]
    assert all(e["cause"] == "catch-up" for e in host.events.emitted)


def test_a_restart_with_catch_up_none_runs_nothing_and_moves_on(home: Path) -> None:
    host = restart(nightly(at(2026, 3, 28, 2, 30), "none"), at(2026, 3, 30, 12, 0))
    assert host.runs == [] and host.events.emitted == []
    kept = book.load()["nightly"]
    assert kept.last_fired == at(2026, 3, 30, 2, 30) and kept.last_outcome == "skipped"


def test_a_restart_before_the_due_time_fires_nothing(home: Path) -> None:
    host = restart(nightly(at(2026, 3, 30, 2, 30), "all"), at(2026, 3, 30, 12, 0))
    assert host.runs == []


def test_a_firing_whose_request_is_not_a_run_fails_by_name_and_runs_nothing(home: Path) -> None:
    # What schedules.json holds was checked when the schedule was added, by the roost of
    # that day: a firing checks it again, as roostd checks every frame.
    schedule = nightly(at(2026, 3, 28, 2, 30), "one")
    schedule.run = {**schedule.run, "priority": "high"}
    host = restart(schedule, at(2026, 3, 30, 12, 0))
    assert host.runs == []
    (event,) = host.events.emitted
    assert event["outcome"] == "failed"
    assert event["detail"] == "run: priority must be a whole number, got a string"
    assert book.load()["nightly"].last_outcome == "failed"


# -- a restart decides the overlap on the truth, one firing at a time ---------------------


class Proc:
    """The worker of a job a restarted roostd adopted: it has not reported yet."""

    def __init__(self, record: Job) -> None:
        self.record, self.state = record, ProcState.RUNNING
        self.reported = asyncio.Event()


def running(job: Job) -> Job:
    job.state, job.kind, job.busy, job.dialog = JobState.RUNNING, JobKind.PI, True, None
    return job


class SlowHost(Host):
    """Its `run` takes a turn of the loop, as roostd's does, and its jobs are running."""

    async def _run(self, conn: Any, request: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        answer = await super()._run(conn, request)
        running(self.jobs[answer["id"]])
        return answer

    queue = SimpleNamespace(granted=set())  # no run granted by `turn` is pending a report

    def mailbox(self, record: Job) -> Any:
        return SimpleNamespace(pending=list)  # nothing waits in any


def queueing(last_job: str, queued: list[dict[str, Any]] | None = None) -> Schedule:
    schedule = nightly(at(2026, 3, 28, 2, 30), "one")
    schedule.overlap, schedule.last_job = "queue", last_job
    schedule.queued = queued or []
    return schedule


async def turns(n: int = 50) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_restart_weighs_the_overlap_once_the_last_runs_worker_reported(home: Path) -> None:
    """The last run ended while roostd was down: its record still says running until its
    adopted worker reports. The catch-up waits for that, then runs: one event, one job
    (it was queued behind the ended run, then run: two catch-up events)."""
    book.save({"nightly": queueing("job0")})
    host = SlowHost()
    last = host.jobs["job0"] = running(Job("job0"))

    async def main() -> None:
        proc = host.procs["job0"] = Proc(last)
        scheduler = Scheduler(host, clock=lambda: at(2026, 3, 30, 12, 0))  # type: ignore[arg-type]
        scheduler.start()
        await turns()
        assert host.events.emitted == []  # not decided on what the killed roostd left
        last.state = JobState.DONE  # the worker's snapshot: that run is over
        last.busy = False
        proc.reported.set()
        await turns()
        await scheduler.close()

    asyncio.run(main())
    assert [(e["cause"], e["outcome"]) for e in host.events.emitted] == [("catch-up", "started")]
    assert len(host.runs) == 1


def test_a_worker_that_never_reports_leaves_the_overlap_to_its_record(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler_module, "REPORT_WAIT", 0.05)
    book.save({"nightly": queueing("job0")})
    host = SlowHost()
    last = host.jobs["job0"] = running(Job("job0"))

    async def main() -> None:
        host.procs["job0"] = Proc(last)
        scheduler = Scheduler(host, clock=lambda: at(2026, 3, 30, 12, 0))  # type: ignore[arg-type]
        scheduler.start()
        for _ in range(200):
            if host.events.emitted:
                break
            await asyncio.sleep(0.01)
        await scheduler.close()

    asyncio.run(main())
    assert [(e["cause"], e["outcome"]) for e in host.events.emitted] == [("catch-up", "queued")]
    assert host.runs == []


def test_a_restarts_catch_up_and_its_queued_firing_start_one_run_not_two(home: Path) -> None:
    """On disk: a firing queued behind job0, which has ended since. The restart's catch-up
    and that queued firing both want to run: one at a time, the second behind the run the
    first made (both at once overlapped, and `pending` held only one of them)."""
    queued = [{"cause": "time", "due": at(2026, 3, 28, 2, 30), "paths": None}]
    book.save({"nightly": queueing("job0", queued)})
    host = SlowHost()
    host.jobs["job0"] = Job("job0")  # stopped

    async def main() -> None:
        scheduler = Scheduler(host, clock=lambda: at(2026, 3, 30, 12, 0))  # type: ignore[arg-type]
        scheduler.start()
        await turns()
        assert len(host.runs) == 1  # the catch-up; the queued one waits for its run
        assert [(e["cause"], e["outcome"]) for e in host.events.emitted] == [("catch-up", "started")]
        assert len(book.load()["nightly"].queued) == 1
        host.jobs["job1"].state = JobState.STOPPED  # that run ends: the queued one runs
        scheduler._on_event({"type": "job.state", "job": {"id": "job1"}})
        await turns()
        await scheduler.close()

    asyncio.run(main())
    assert [(e["cause"], e["outcome"]) for e in host.events.emitted] == [
        ("catch-up", "started"),
        ("time", "started"),
    ]
    assert [r[0]["name"] for r in host.runs] == ["nightly-1", "nightly-2"]
    assert book.load()["nightly"].queued == []
