"""The worker's budget guard (roost/worker/budget.py) with fake ports: no pi, no roostd, no
worker. A `RunTracker` fed by hand stands for pi's runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from roost.job.record import JobLimits, JobRecord, Links
from roost.job.states import JobKind, JobState, RunCause
from roost.usage.budget import Limits
from roost.usage.meter import Meter
from roost.worker.budget import STOP_NOTE, BudgetGuard, Ports
from roost.worker.pi_process import PiError
from roost.worker.runs import RunTracker


def costing(cost: float) -> dict[str, Any]:
    """An assistant message (pi's message_end) that cost `cost`."""
    return {
        "role": "assistant",
        "stopReason": "toolUse",
        "content": [],
        "usage": {
            "input": 10,
            "output": 1,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 11,
            "cost": {"total": cost},
        },
    }


class FakeWorker:
    """The worker's side of `Ports`, recording what the guard asked for."""

    def __init__(self, extension: bool = True) -> None:
        self.extension = extension
        self.reports = 0
        self.wakes = 0
        self.to_ext: list[dict[str, Any]] = []
        self.to_roostd: list[tuple[str, str]] = []
        self.commands: list[str] = []
        self.answers: dict[str, Any] = {}  # a command's answer (an exception is raised)
        self.spawned: list[tuple[str, Coroutine[Any, Any, None]]] = []

    def ports(self) -> Ports:
        return Ports(
            report=self.report,
            wake=self.wake,
            to_extension=self.send_ext,
            to_roostd=lambda kind, text: self.to_roostd.append((kind, text)),
            pi_command=self.command,
            spawn=self.spawn,
        )

    def report(self) -> None:
        self.reports += 1

    def wake(self) -> None:
        self.wakes += 1

    def send_ext(self, frame: dict[str, Any]) -> bool:
        if self.extension:
            self.to_ext.append(frame)
        return self.extension

    async def command(self, name: str, timeout: float) -> Any:
        self.commands.append(name)
        answer = self.answers.get(name)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        self.spawned.append((what, coro))

    def run_spawned(self) -> list[str]:
        """Run what the guard put in the background, in order; their names."""
        names = []
        while self.spawned:
            what, coro = self.spawned.pop(0)
            asyncio.run(coro)
            names.append(what)
        return names


def guard_for(
    tmp_path: Path,
    limits: Limits,
    *,
    spawned: bool = False,
    extension: bool = True,
    stats_from_pi: bool = False,
) -> tuple[BudgetGuard, RunTracker, FakeWorker]:
    runs = RunTracker()
    worker = FakeWorker(extension)
    meter = Meter(limits, warn_at=0.8)
    guard = BudgetGuard(
        meter,
        runs,
        worker.ports(),
        stop_note=tmp_path / STOP_NOTE,
        spawned=spawned,
        stats_from_pi=stats_from_pi,
    )
    guard.load([])
    runs.enter(JobState.DONE)
    return guard, runs, worker


def start_run(runs: RunTracker, cause: RunCause = RunCause.TASK) -> None:
    runs.next_cause = cause
    runs.on_event({"type": "agent_start"})


def test_messages_move_the_row_and_one_warning_goes_to_the_job_and_its_parent(tmp_path: Path) -> None:
    guard, runs, worker = guard_for(tmp_path, Limits(budget=1.0), spawned=True)
    start_run(runs)
    guard.on_message(costing(0.5))
    assert worker.reports == 1 and worker.to_ext == [] and worker.to_roostd == []
    guard.on_message({"role": "toolResult", "content": []})  # not the model's: no report
    assert worker.reports == 1
    guard.on_message(costing(0.35))  # $0.85: over 80 %
    (note,) = worker.to_ext
    assert note["event"] == "budget_note" and note["steer"] is True  # the run is streaming
    assert "you have used 80% of your budget ($0.85 of $1.00)" in note["content"]
    assert worker.to_roostd == [("warn", "you have used 80% of your budget ($0.85 of $1.00)")]
    guard.on_message(costing(0.01))
    assert len(worker.to_ext) == 1 and len(worker.to_roostd) == 1  # once


def test_a_root_job_warns_only_itself_and_no_extension_is_no_error(tmp_path: Path) -> None:
    guard, runs, worker = guard_for(tmp_path, Limits(budget=1.0), extension=False)
    start_run(runs)
    guard.on_message(costing(0.9))
    assert worker.to_ext == [] and worker.to_roostd == []


def test_crossing_the_limit_aborts_a_streaming_run_and_its_settle_blocks_the_job(tmp_path: Path) -> None:
    guard, runs, worker = guard_for(tmp_path, Limits(budget=1.0), spawned=True)
    start_run(runs, RunCause.PARENT_MESSAGE)
    guard.on_message(costing(1.2))
    assert guard.blocked == "budget exhausted: $1.20 of $1.00"
    assert guard.meter.stopped_cause == "parent_message"
    worker.answers["abort"] = PiError("pi went away")  # an abort that fails changes nothing
    assert worker.run_spawned() == ["abort at the budget"]
    assert worker.commands == ["abort"]
    assert runs.state == JobState.RUNNING  # nothing decided until the run settles
    runs.on_event({"type": "message_end", "message": {**costing(0), "stopReason": "aborted"}})
    runs.on_event({"type": "agent_end"})
    run = runs.settle()
    guard.on_settled(run)
    assert (runs.state, runs.status) == (JobState.FAILED, "budget exhausted: $1.20 of $1.00")
    assert json.loads((tmp_path / STOP_NOTE).read_text()) == {"cause": "parent_message"}
    assert worker.to_roostd[-1] == ("exhausted", "budget exhausted: $1.20 of $1.00")
    snap: dict[str, Any] = {}
    guard.add_to_snapshot(snap)
    assert snap["error"] == "budget exhausted: $1.20 of $1.00" and snap["usage"]["requests"] == 1
    guard.on_settled(None)  # a later settle (say, a dialog's) tells roostd nothing new
    assert [k for k, _ in worker.to_roostd].count("exhausted") == 1


def test_a_limit_crossed_between_runs_blocks_at_once(tmp_path: Path) -> None:
    guard, runs, worker = guard_for(tmp_path, Limits(budget=1.0))
    guard.on_message(costing(2.0))  # e.g. a compaction's request after the run
    assert worker.spawned == []  # nothing to abort
    assert (runs.state, runs.question) == (JobState.FAILED, None)
    assert worker.to_roostd == [("exhausted", "budget exhausted: $2.00 of $1.00")]


def test_raising_the_budget_continues_the_stopped_run_with_its_cause(tmp_path: Path) -> None:
    guard, runs, worker = guard_for(tmp_path, Limits(budget=1.0))
    start_run(runs, RunCause.REPLY)
    guard.on_message(costing(1.5))
    assert worker.run_spawned() == ["abort at the budget"]
    runs.on_event({"type": "agent_end"})
    guard.on_settled(runs.settle())
    assert (tmp_path / STOP_NOTE).exists()
    worker.reports = worker.wakes = 0
    guard.on_budget_event({"event": "budget", "budget": 0.5})  # still under: nothing lifts
    assert runs.state == JobState.FAILED and worker.reports == 1 and worker.wakes == 0
    guard.on_budget_event({"event": "budget", "budget": 5})
    assert guard.blocked is None
    assert (runs.state, runs.status) == (JobState.DONE, "")
    assert not (tmp_path / STOP_NOTE).exists()
    assert worker.to_ext[-1]["event"] == "note"
    assert worker.to_ext[-1]["content"].startswith("[roost] Your budget was raised to $5.00.")
    assert runs.next_cause == RunCause.REPLY  # the continuation is the same run's
    assert worker.wakes == 1
    snap: dict[str, Any] = {}
    guard.add_to_snapshot(snap)
    assert snap["error"] is None  # the row's error is cleared


def test_a_raise_with_no_extension_starts_nothing_itself(tmp_path: Path) -> None:
    guard, runs, worker = guard_for(tmp_path, Limits(budget=1.0), extension=False)
    guard.on_message(costing(1.5))
    guard.on_budget_event({"event": "budget", "budget": 5})
    assert runs.state == JobState.DONE and runs.next_cause is None and worker.wakes == 1


def test_a_lower_limit_or_an_exhausted_tree_stops_the_run(tmp_path: Path) -> None:
    guard, runs, worker = guard_for(tmp_path, Limits(budget=10.0))
    start_run(runs)
    guard.on_message(costing(1.0))
    guard.on_budget_event({"event": "budget", "budgetTokens": 5})
    assert guard.blocked == "token budget exhausted: 11 of 5 tokens"
    assert worker.run_spawned() == ["abort at the budget"]

    guard, runs, worker = guard_for(tmp_path, Limits())
    guard.on_budget_event(
        {
            "event": "budget",
            "treeExhausted": "tree budget exhausted: x",
            "treeWarning": "you have used 90% of your tree's budget",
        }
    )
    assert worker.to_ext[0]["event"] == "budget_note"
    assert guard.blocked == "tree budget exhausted: x" and runs.state == JobState.FAILED
    guard.on_budget_event({"event": "budget"})  # the root's tree budget was raised
    assert guard.blocked is None and runs.state == JobState.DONE


def test_a_job_over_its_budget_at_start_up_resumes_nothing(tmp_path: Path) -> None:
    guard, runs, worker = guard_for(tmp_path, Limits(budget=1.0))
    assert guard.gate_resume("note") == "note"  # under the budget: the resume goes ahead
    guard.load([{"type": "message", "message": costing(1.5)}])
    runs.next_cause = RunCause.CLI  # the run a restart cut short
    assert guard.gate_resume("note") is None
    assert runs.next_cause is None and guard.meter.stopped_cause == "cli"
    assert runs.state == JobState.FAILED


def test_the_guard_of_a_job_keeps_the_stopped_runs_cause_across_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path))
    record = JobRecord(
        id="abcd1234",
        name="j",
        kind=JobKind.PI,
        cwd="/",
        limits=JobLimits(budget=2.0),
        links=Links(spawned=True),
    )
    record.dir.mkdir(parents=True)
    ports = FakeWorker().ports()
    guard = BudgetGuard.of(record, RunTracker(), ports, stats_from_pi=False)
    assert guard.meter.limits == Limits(budget=2.0) and guard.spawned
    assert guard.meter.stopped_cause is None
    (record.dir / STOP_NOTE).write_text(json.dumps({"cause": "agent_message"}))
    assert (
        BudgetGuard.of(record, RunTracker(), ports, stats_from_pi=False).meter.stopped_cause
        == "agent_message"
    )
    (record.dir / STOP_NOTE).write_text(json.dumps({"cause": "nonsense"}))
    assert BudgetGuard.of(record, RunTracker(), ports, stats_from_pi=False).meter.stopped_cause is None


def test_pi_1x_session_stats_are_taken_after_a_settle(tmp_path: Path) -> None:
    guard, runs, worker = guard_for(tmp_path, Limits(), stats_from_pi=True)
    worker.answers["get_session_stats"] = {"tokens": {"input": 700, "output": 20}, "cost": 0.25}
    guard.on_settled(None)
    assert worker.run_spawned() == ["get_session_stats"]
    assert guard.meter.usage.input == 700 and guard.meter.usage.cost == 0.25
    assert worker.reports == 1
    worker.answers["get_session_stats"] = TimeoutError()
    guard.on_settled(None)
    worker.run_spawned()
    assert worker.reports == 1 and guard.meter.usage.input == 700  # kept as it was
    older, _, old_worker = guard_for(tmp_path, Limits(), stats_from_pi=False)
    older.on_settled(None)
    assert old_worker.spawned == []
