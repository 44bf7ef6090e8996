"""The worker's reading of pi: `RunTracker` fed with pi's events by hand (a run's life,
its settle, its question, a dialog), and a session's end (the question it left open)."""

from __future__ import annotations

from typing import Any

import pytest

from roost.job.states import Dialog, IllegalTransition, JobState, RunCause
from roost.worker.runs import (
    RunTracker,
    dialog_answer,
    dialog_options,
    dialog_question,
    first_line,
    open_question,
    question_in,
)


def message(role: str, text: str, stop: str | None = "stop") -> dict[str, Any]:
    body: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}]}
    if role == "assistant":
        body["stopReason"] = stop
    return {"type": "message", "message": body}


def test_open_question_is_the_last_final_answers_question() -> None:
    asked = [message("user", "plan it"), message("assistant", "Done.\n\nShall I apply it?")]
    assert open_question(asked) == "Shall I apply it?"
    # Entries that are no turn (a model change) do not close it.
    assert open_question([*asked, {"type": "model_change"}]) == "Shall I apply it?"


def test_no_open_question_once_answered_or_when_the_answer_asks_nothing() -> None:
    asked = [message("user", "plan it"), message("assistant", "Shall I apply it?")]
    assert open_question([*asked, message("user", "yes")]) is None  # answered
    assert open_question([*asked, {"type": "custom_message", "content": "hi"}]) is None
    assert open_question([message("user", "go"), message("assistant", "Applied.")]) is None
    cut = [message("user", "go"), message("assistant", "Shall I?", stop="aborted")]
    assert open_question(cut) is None  # not a final answer
    assert open_question([]) is None


# -- RunTracker: what pi's events mean, fed by hand (no pi, no worker) ----------------------


def said(text: str, stop: str = "stop", error: str | None = None) -> dict[str, Any]:
    """pi's message_end for an assistant message."""
    body: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stopReason": stop,
    }
    if error is not None:
        body["errorMessage"] = error
    return {"type": "message_end", "message": body}


SELECT = {
    "type": "extension_ui_request",
    "id": "d1",
    "method": "select",
    "title": "Pick",
    "options": ["red", "green"],
}
CONFIRM = {
    "type": "extension_ui_request",
    "id": "d2",
    "method": "confirm",
    "title": "Apply?",
    "message": "It rewrites 3 files",
}


def run_through(runs: RunTracker, *events: dict[str, Any]) -> list[str | None]:
    return [runs.on_event(e) for e in events]


def test_a_run_goes_from_its_cause_to_a_settled_answer() -> None:
    runs = RunTracker()
    runs.enter(JobState.DONE)  # restored idle
    runs.next_cause = RunCause.REPLY
    assert runs.on_event({"type": "agent_start"}) is None
    assert runs.run is not None and runs.run.cause == RunCause.REPLY
    assert runs.next_cause is None  # taken by this run
    assert (runs.state, runs.status, runs.streaming) == (JobState.RUNNING, "thinking", True)
    runs.on_event({"type": "message_update"})
    assert runs.status == "writing"
    runs.on_event({"type": "tool_execution_start", "toolName": "bash"})
    runs.on_event({"type": "message_update"})  # a tool's output does not hide the tool
    assert runs.status == "running bash"
    runs.on_event({"type": "tool_execution_end"})
    assert runs.status == "thinking"
    runs.on_event(said("All tests pass.\nDetails follow."))
    # An older pi: agent_end asks for a settle check (Worker._confirm_settled).
    assert runs.on_event({"type": "agent_end"}) == "ended"
    assert runs.ended and runs.state == JobState.RUNNING  # nothing decided before the settle
    run = runs.settle()
    assert run is not None and run.final_text == "All tests pass.\nDetails follow."
    assert (runs.state, runs.status, runs.summary) == (JobState.DONE, "", "All tests pass.")
    assert runs.run is None and not runs.streaming and not runs.ended
    assert runs.last_assistant == "All tests pass.\nDetails follow."
    assert runs.snapshot() == {
        "state": "done",
        "status": "",
        "summary": "All tests pass.",
        "question": None,
        "dialog": False,
        "options": None,
    }


def test_a_run_nothing_announced_is_a_restore() -> None:
    runs = RunTracker()
    runs.on_event({"type": "agent_start"})
    assert runs.run is not None and runs.run.cause == RunCause.RESTORE


def test_pi_that_announces_the_settle_is_taken_at_its_word() -> None:
    runs = RunTracker(settled_event=True)
    runs.on_event({"type": "agent_start"})
    runs.on_event(said("done"))
    assert runs.on_event({"type": "agent_end"}) is None  # a retry may still follow
    runs.on_event({"type": "compaction_start"})
    assert runs.compacting and runs.status == "compacting"
    assert runs.on_event({"type": "compaction_end"}) is None
    assert runs.on_event({"type": "agent_settled"}) == "settled"
    assert runs.ended and not runs.compacting
    # An older pi never says it; were one to, it would not count.
    assert RunTracker().on_event({"type": "agent_settled"}) is None


def test_a_compaction_after_the_end_asks_for_another_settle_check() -> None:
    runs = RunTracker()
    run_through(
        runs, {"type": "agent_start"}, said("done"), {"type": "agent_end"}, {"type": "compaction_start"}
    )
    assert runs.on_event({"type": "compaction_end"}) == "ended"
    # A compaction during a run asks for nothing.
    during = RunTracker()
    run_through(during, {"type": "agent_start"}, {"type": "compaction_start"})
    assert during.on_event({"type": "compaction_end"}) is None


def test_a_retry_continues_the_same_run() -> None:
    runs = RunTracker()
    runs.next_cause = RunCause.TASK
    runs.on_event({"type": "agent_start"})
    first = runs.run
    run_through(
        runs,
        said("", stop="error", error="overloaded"),
        {"type": "agent_end"},
        {"type": "auto_retry_start", "attempt": 2},
    )
    assert not runs.ended and runs.status == "retrying (attempt 2)"
    runs.next_cause = RunCause.REPLY  # an item that arrived meanwhile
    runs.on_event({"type": "agent_start"})
    assert runs.run is first and first is not None and first.cause == RunCause.TASK
    assert runs.next_cause == RunCause.REPLY  # still for the next run
    runs.on_event(said("Recovered."))
    runs.on_event({"type": "agent_end"})
    run = runs.settle()
    assert run is first and run.stop_reason == "stop" and run.error is None
    assert runs.state == JobState.DONE


def test_a_model_error_fails_the_job_with_the_error_as_summary() -> None:
    runs = RunTracker(summary="earlier summary")
    run_through(
        runs,
        {"type": "agent_start"},
        said("", stop="error", error="401 invalid api key\nmore"),
        {"type": "agent_end"},
    )
    run = runs.settle()
    assert run is not None and run.error == "401 invalid api key\nmore"
    assert (runs.state, runs.status) == (JobState.FAILED, "model error")
    assert runs.summary == "error: 401 invalid api key"
    # An error with no text keeps the summary it had.
    quiet = RunTracker(summary="earlier summary")
    run_through(quiet, {"type": "agent_start"}, said("", stop="error"), {"type": "agent_end"})
    quiet.settle()
    assert quiet.summary == "earlier summary"


def test_an_aborted_run_is_done_and_keeps_its_summary() -> None:
    runs = RunTracker(summary="before")
    run_through(runs, {"type": "agent_start"}, said("half an answer?", stop="aborted"), {"type": "agent_end"})
    runs.settle()
    assert (runs.state, runs.status, runs.question, runs.summary) == (
        JobState.DONE,
        "aborted",
        None,
        "before",
    )


def test_an_answer_that_ends_in_a_question_needs_input() -> None:
    runs = RunTracker()
    run_through(
        runs,
        {"type": "agent_start"},
        said("I found two ways.\n\nShall I use the faster one?"),
        {"type": "agent_end"},
    )
    runs.settle()
    assert (runs.state, runs.question) == (JobState.NEEDS_INPUT, "Shall I use the faster one?")
    # The next run clears the question.
    runs.on_event({"type": "agent_start"})
    assert runs.question is None and runs.state == JobState.RUNNING


def test_settle_with_no_run_changes_nothing_but_the_flags() -> None:
    runs = RunTracker()
    runs.enter(JobState.NEEDS_INPUT)
    runs.question = "kept?"
    assert runs.settle() is None
    assert (runs.state, runs.question) == (JobState.NEEDS_INPUT, "kept?")


def test_a_dialog_opens_is_answered_and_the_run_goes_on() -> None:
    runs = RunTracker()
    runs.on_event({"type": "agent_start"})
    runs.on_event(SELECT)
    assert runs.dialog_state == Dialog.OPEN and runs.dialog_open and runs.dialog == SELECT
    assert (runs.state, runs.status) == (JobState.NEEDS_INPUT, "waiting on a dialog")
    assert runs.question == "Pick [1. red | 2. green]"
    snap = runs.snapshot()
    assert snap["dialog"] is True and snap["options"] == ["red", "green"]
    runs.dialog_answered()
    assert runs.dialog_state == Dialog.ANSWERED
    assert runs.dialog is None and not runs.dialog_open  # the request goes with the state
    assert (runs.state, runs.status, runs.question) == (JobState.RUNNING, "thinking", None)
    assert runs.snapshot()["dialog"] is False and runs.snapshot()["options"] is None
    runs.on_event(CONFIRM)  # the run asks again
    assert runs.dialog == CONFIRM and runs.snapshot()["options"] == ["yes", "no"]


def test_a_run_that_ends_with_its_dialog_open_closes_it() -> None:
    runs = RunTracker()
    run_through(runs, {"type": "agent_start"}, SELECT, said("Gave up waiting."), {"type": "agent_end"})
    runs.settle()
    assert runs.dialog_state == Dialog.CLOSED and runs.dialog is None
    assert runs.state == JobState.DONE and runs.snapshot()["dialog"] is False


def test_a_dialog_outside_a_run_answered_leaves_the_job_as_it_was_asked() -> None:
    runs = RunTracker()
    runs.enter(JobState.DONE)
    runs.on_event(CONFIRM)  # an extension asks while no run is in progress
    assert runs.state == JobState.NEEDS_INPUT
    runs.dialog_answered()
    assert runs.dialog is None and runs.question is None
    assert runs.state == JobState.NEEDS_INPUT  # nothing streams: the next run moves it


def test_only_dialog_methods_open_a_dialog_and_only_an_open_one_is_answered() -> None:
    runs = RunTracker()
    runs.on_event({"type": "extension_ui_request", "id": "n", "method": "notify", "message": "hello"})
    assert runs.dialog_state == Dialog.CLOSED and runs.dialog is None
    with pytest.raises(IllegalTransition, match="dialog closed -> answered"):
        runs.dialog_answered()  # a bug in the caller, loud
    with pytest.raises(TypeError):
        RunTracker(dialog_state=Dialog.OPEN)  # type: ignore[call-arg]  # moved, never set


def test_a_dialogs_question_options_and_answer() -> None:
    assert dialog_question(CONFIRM) == "Apply?: It rewrites 3 files [yes/no]"
    assert dialog_question({"method": "input", "title": "Name?"}) == "Name?"
    assert dialog_question({"method": "editor"}) == "(editor)"
    assert dialog_options({"method": "input"}) is None
    assert dialog_answer(CONFIRM, " Yes ") == {"type": "extension_ui_response", "id": "d2", "confirmed": True}
    assert dialog_answer(CONFIRM, "nope")["confirmed"] is False
    assert dialog_answer(SELECT, "2")["value"] == "green"  # by number
    assert dialog_answer(SELECT, " RED ")["value"] == "red"  # by its text
    assert dialog_answer(SELECT, "blue")["value"] == "blue"  # pi decides what it means
    assert dialog_answer({"id": "i", "method": "input"}, " as typed ")["value"] == " as typed "


def test_summary_and_question_lines() -> None:
    assert first_line("\n\n  two   words  \nnext") == "two words"
    assert first_line("x" * 200, limit=10) == "x" * 9 + "…"
    assert question_in("Done.\n\n**Should I push?**") == "**Should I push?**"
    assert question_in("Is it? Then done.") is None
    long = "A sentence. " * 40 + "Which one do you want?"
    assert question_in(long) == "Which one do you want?"  # only its last sentence
