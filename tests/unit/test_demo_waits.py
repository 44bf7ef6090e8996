"""The demo's waits (roost/cli/demo/story.py): who reported to a parent, when both reports arrive
in one turn, and a wait that says so when it lasts; the play mode's default answer."""

from __future__ import annotations

from typing import Any

import pytest

from roost.cli.demo import model as demomodel
from roost.cli.demo import story as demo


def report(sender: str) -> str:
    return (
        f'<agent-message from="{sender}" id="0a1b2c3d" relation="child" kind="report">\n'
        f"{sender} is done.\n</agent-message>\n"
    )


def request(*user_texts: str, task: str = "[lead] Audit the project.") -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": task},
            *({"role": "user", "content": t} for t in user_texts),
        ]
    }


def test_both_reports_in_one_message_count_both() -> None:
    """The demo's part 4 went silent for its whole 120 s deadline: it read only the first
    `from=` of the last message, and both children's reports had come in one turn."""
    one_turn = request(report("kid-a") + "\n\n" + report("kid-b"))
    assert demo.reporters([one_turn], "[lead]") == {"kid-a", "kid-b"}
    assert "kid-a and kid-b" in demomodel._reports_in_last(one_turn)


def test_reports_in_separate_messages_and_requests_count_too() -> None:
    assert demo.reporters([request(report("kid-a"), report("kid-b"))], "[lead]") == {"kid-a", "kid-b"}
    assert demo.reporters([request(report("kid-a")), request("hm", report("kid-b"))], "[lead]") == {
        "kid-a",
        "kid-b",
    }
    other = request(report("wt-fast"), task="[wt-lead] Tune.")
    assert demo.reporters([other], "[lead]") == set()  # another job's requests


def test_a_long_wait_says_what_it_waits_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "WAIT_NOTICE", 0.05)
    monkeypatch.setattr(demo, "WAIT_NOTICE_EVERY", 10.0)
    calls = []

    def check() -> bool:
        calls.append(1)
        return len(calls) > 4

    assert demo.until("the kids", check, timeout=30, interval=0.03) is True
    assert capsys.readouterr().out.count("… waiting for the kids (") == 1
    assert demo.until("nothing", lambda: False, timeout=0.1, interval=0.02) is False
    out = capsys.readouterr().out
    assert "gave up waiting for nothing" in out


def test_a_quick_wait_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.until("x", lambda: "yes", timeout=5) == "yes"
    assert capsys.readouterr().out == ""


def test_play_answers_free_text_a_question_and_a_report() -> None:
    assert 'Noted: "tidy up"' in demomodel.play_answer(request(task="tidy up")).text
    asked = demomodel.play_answer(request("is it raining?", task="t")).text
    assert asked.rstrip().endswith("?")  # a question back: the job waits for a reply
    assert demomodel.play_answer(request(report("kid-a"), task="t")).text == ("Got a report from kid-a.")
