"""What a restarted worker makes of the session's end (roost/worker/restore.py), with a
hand-made run note and session entries: no pi, no worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roost import config
from roost.job.states import JobState, RunCause
from roost.worker.restore import restore
from roost.worker.runnote import RunNote
from roost.worker.runs import RunTracker


@pytest.fixture(autouse=True)
def agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Settings from an empty agent dir (the defaults), unless a test writes roost.json."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    monkeypatch.setattr(config, "_cache", None)
    return tmp_path


def message(role: str, text: str, stop: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}]}
    if stop is not None:
        body["stopReason"] = stop
    return {"type": "message", "timestamp": "2026-12-01T10:00:00Z", "message": body}


CUT_SHORT = [message("user", "migrate it"), message("assistant", "", stop="toolUse")]
ANSWERED = [message("user", "migrate it"), message("assistant", "Done. Shall I push?", stop="stop")]


def restored(
    note: RunNote, entries: list[dict[str, Any]], pending: bool = False
) -> tuple[RunTracker, str | None, list[RunNote]]:
    runs, saved = RunTracker(), list[RunNote]()
    resume = restore(runs, note, entries, pending=pending, save=saved.append)
    return runs, resume, saved


def test_a_run_a_crash_cut_short_continues_as_the_same_run() -> None:
    runs, resume, saved = restored(RunNote("reply", "t0"), CUT_SHORT)
    assert resume is not None and "interrupted at 2026-12-01T10:00:00Z" in resume
    assert runs.next_cause == RunCause.REPLY  # the continuation keeps the run's cause
    assert (runs.state, runs.status) == (JobState.RUNNING, "continuing")
    assert saved == [RunNote("reply", "t0", resumes=1)]


def test_a_pending_item_starts_the_continuation_itself() -> None:
    runs, resume, saved = restored(RunNote("task", "t0"), CUT_SHORT, pending=True)
    assert resume is None and runs.next_cause == RunCause.TASK
    assert runs.state == JobState.STARTING  # the item's run moves it
    assert saved == [RunNote("task", "t0", resumes=1)]


def test_continuations_in_a_row_are_limited(agent_dir: Path) -> None:
    runs, resume, saved = restored(RunNote("reply", "t0", resumes=2), CUT_SHORT)
    assert resume is None and runs.next_cause is None
    assert (runs.state, runs.status) == (JobState.NEEDS_INPUT, "interrupted")
    assert runs.question is not None and "reply to continue" in runs.question
    assert saved == [RunNote()]
    (agent_dir / "roost.json").write_text(json.dumps({"resumeInterrupted": False}))
    _, resume, _ = restored(RunNote("reply", "t0"), CUT_SHORT)
    assert resume is None  # turned off


def test_a_stopped_run_is_not_continued_and_its_note_is_kept() -> None:
    runs, resume, saved = restored(RunNote("reply", "t0", stopped=True), CUT_SHORT)
    assert resume is None and runs.next_cause is None and saved == []
    # ... but it shows that its run was cut short, not `done` with the task as summary
    assert (runs.state, runs.status) == (JobState.NEEDS_INPUT, "interrupted")
    assert runs.summary == "interrupted: reply to continue"
    assert runs.question is not None and "stopped before it finished" in runs.question
    runs, _, _ = restored(RunNote("reply", "t0", stopped=True), ANSWERED)
    assert (runs.state, runs.question) == (JobState.NEEDS_INPUT, "Done. Shall I push?")
    runs, _, _ = restored(
        RunNote("reply", "t0", stopped=True), ANSWERED[:1] + [message("assistant", "Done.", stop="stop")]
    )
    assert (runs.state, runs.summary) == (JobState.DONE, "")  # stopped after its run ended


def test_a_finished_session_waits_on_the_question_it_left_open() -> None:
    runs, resume, saved = restored(RunNote(), ANSWERED)
    assert resume is None and saved == []
    assert (runs.state, runs.question) == (JobState.NEEDS_INPUT, "Done. Shall I push?")
    runs, _, saved = restored(RunNote("reply", "t0"), ANSWERED)  # settled, note not cleared
    assert saved == [RunNote()] and runs.state == JobState.NEEDS_INPUT
    runs, _, _ = restored(RunNote(), [])
    assert (runs.state, runs.status, runs.question) == (JobState.DONE, "", None)
