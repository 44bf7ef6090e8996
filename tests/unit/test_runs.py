"""The worker's reading of a session's end: the question its last answer left open."""

from __future__ import annotations

from typing import Any

from roost.worker.runs import open_question


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
