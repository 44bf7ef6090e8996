"""What each job state puts in the inbox (roost/supervise/handlers/inbox.py `waiting`), and
the ids: stable while open, new once the job moved on (pure: a stand-in core)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from roost.job.record import JobRecord
from roost.job.states import JobKind, JobState, ProcState
from roost.supervise.handlers import inbox


def record(job_id: str = "abcd1234", **fields: Any) -> JobRecord:
    return JobRecord(id=job_id, name="j", kind=JobKind.PI, cwd="/", **fields)


def core(*records: JobRecord, fatal: tuple[str, ...] = ()) -> Any:
    procs = {
        r.id: SimpleNamespace(state=ProcState.FATAL if r.id in fatal else ProcState.EXITED) for r in records
    }
    return SimpleNamespace(jobs={r.id: r for r in records}, procs=procs)


@pytest.mark.parametrize(
    ("fields", "fatal", "kind"),
    [
        ({"state": JobState.NEEDS_INPUT, "question": "Go on?"}, False, "question"),
        (
            {"state": JobState.NEEDS_INPUT, "question": "Pick", "dialog": True, "options": ["a", "b"]},
            False,
            "dialog",
        ),
        ({"state": JobState.FAILED, "error": "budget exhausted: $1.01 of $1.00"}, False, "budget"),
        ({"state": JobState.FAILED, "error": "pi: no model"}, True, "gave_up"),
        ({"state": JobState.FAILED, "error": "model error"}, False, "failed"),
        ({"state": JobState.DONE}, False, None),
        ({"state": JobState.RUNNING}, False, None),
        ({"state": JobState.NEEDS_INPUT, "question": None}, False, None),
    ],
)
def test_what_waits_for_a_person(fields: dict[str, Any], fatal: bool, kind: str | None) -> None:
    job = record(**fields)
    got = inbox.waiting(core(job, fatal=(job.id,) if fatal else ()), job)
    assert (got[0] if got else None) == kind


def test_a_give_up_in_the_book_counts_without_a_worker_process() -> None:
    job = record(state=JobState.FAILED, error="crashed 3 times; roostd gave up")
    assert inbox.waiting(core(job), job, frozenset({job.id})) == ("gave_up", job.error)
    assert inbox.waiting(core(job), job)[0] == "failed"  # type: ignore[index]


def test_ids_stay_while_open_and_change_after_the_job_moved_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path))
    job = record(state=JobState.NEEDS_INPUT, question="Go on?")
    c = core(job)
    [first] = inbox.entries(c)
    assert inbox.entries(c)[0]["id"] == first["id"]
    assert oct((tmp_path / "inbox.json").stat().st_mode & 0o777) == "0o600"
    inbox._on_event({"type": "job.state", "job": {"id": job.id}, "from": "needs_input", "to": "running"})
    [second] = inbox.entries(c)
    assert second["id"] != first["id"]
    inbox._on_event({"type": "job.state", "job": {"id": job.id}, "from": "running", "to": "done"})
    assert inbox.entries(c)[0]["id"] == second["id"]  # a change that was no wait keeps it
