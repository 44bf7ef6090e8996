"""A tool result's outcome, as the transcript (roost logs, roost view) and the web job page
show it: bash's exit code (pi writes a failed command's at the end of its text) and how long
the tool ran when pi recorded it (pi 1.x's `durationMs`)."""

from __future__ import annotations

from typing import Any

from roost.pi.transcript import render, tool_outcome
from roost.web.entries import items


def result(text: str, *, error: bool = False, tool: str = "bash", **extra: Any) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolName": tool,
        "toolCallId": "c1",
        "isError": error,
        "content": [{"type": "text", "text": text}],
        **extra,
    }


def test_a_bash_command_that_failed_says_its_exit_code_and_duration() -> None:
    failed = result("make: *** [test] Error 2\n\nCommand exited with code 2", error=True, durationMs=1432)
    assert tool_outcome(failed) == "exit 2 · 1.4 s"


def test_a_bash_command_that_succeeded_exited_0() -> None:
    assert tool_outcome(result("ok\n", durationMs=12)) == "exit 0 · 12 ms"


def test_without_a_recorded_duration_only_the_exit_code() -> None:  # pi 0.73
    assert tool_outcome(result("ok")) == "exit 0"


def test_a_bash_error_without_an_exit_code_says_none() -> None:  # aborted, timed out
    assert tool_outcome(result("Command aborted", error=True)) == ""


def test_other_tools_say_only_their_duration() -> None:
    assert tool_outcome(result("contents", tool="read", durationMs=3)) == "3 ms"
    assert tool_outcome(result("contents", tool="read", durationMs=True)) == ""


def test_the_transcript_and_the_web_page_show_it() -> None:
    entry = {
        "type": "message",
        "timestamp": "2026-12-06T10:00:00Z",
        "message": result("boom\nCommand exited with code 3", error=True, durationMs=2500),
    }
    assert "⎿ bash (error) (exit 3 · 2.5 s): boom" in next(iter(render([entry])))
    (item,) = items([entry])
    assert item.outcome == "exit 3 · 2.5 s" and item.error
