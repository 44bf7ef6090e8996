"""What a (re)started worker makes of the session's end: was a run cut short, and is it
continued (as the same run, with its cause), or does the job wait, with the question its
last answer left open? Used by roost.worker.lifecycle once pi is up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roost.config import load_settings
from roost.job.states import JobState
from roost.pi.transcript import interrupted
from roost.worker.runnote import RunNote
from roost.worker.runs import RunTracker, open_question

INTERRUPTED_SUMMARY = "interrupted: reply to continue"
"""The summary of a job whose last run was cut short and is not continued by itself."""


def restore(
    runs: RunTracker,
    note: RunNote,
    entries: list[dict[str, Any]],
    *,
    pending: bool,
    save: Callable[[RunNote], None],
) -> str | None:
    """Set `runs` from the last run's `note` and the session's `entries`; returns the note
    that continues a cut-short run when nothing `pending` in the mailbox will (a restore
    alone is no run). `save` writes the run note."""
    cut_short = note.in_progress and interrupted(entries)
    settings = load_settings()
    resume = cut_short and settings.resumeInterrupted and note.resumes < settings.resumeMaxInRow
    if resume:
        # The continuation is the same run: it keeps its cause for the hand-back rules.
        runs.next_cause = note.run_cause()
        save(RunNote(note.cause, note.started, note.resumes + 1))
    elif note.cause is not None and not note.stopped:
        save(RunNote())
    if pending:
        return None  # the next item starts the run (with the kept cause when resuming)
    if resume:
        runs.enter(JobState.RUNNING)
        runs.status = "continuing"
        when = str(entries[-1].get("timestamp") or "") if entries else ""
        return interrupted_note(when)
    runs.enter(JobState.DONE)
    runs.status = ""
    question = open_question(entries)
    # Stopped by the user in the middle of a run: not continued by itself, but not done
    # either (its answer was cut short), until a reply starts the next run.
    stopped_mid_run = note.stopped and note.cause is not None and interrupted(entries)
    if cut_short or stopped_mid_run:
        runs.enter(JobState.NEEDS_INPUT)
        runs.status = "interrupted"
        runs.summary = INTERRUPTED_SUMMARY
        runs.question = (
            "The last run was stopped before it finished; reply to continue."
            if stopped_mid_run
            else "The last run was interrupted when its worker restarted; reply to continue."
        )
    elif question is not None:  # still unanswered (e.g. stopped while it waited)
        runs.enter(JobState.NEEDS_INPUT)
        runs.question = question
    return None


def interrupted_note(when: str) -> str:
    """What a continued run starts with: from roost, not from the user."""
    at = f" at {when}" if when else ""
    return (
        f"[roost] Your previous run was interrupted{at}: its process was restarted before "
        "the run finished. This note comes from roost, the supervisor, not from the user. "
        "Continue the task from where it stopped; check the state of any step that was in "
        "progress before you repeat it."
    )
