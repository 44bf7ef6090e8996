"""`roost view` on the real pi: an extension's select dialog (tests/fixtures/ask.ts) shows
in the job row (`dialog`, `options`) and in the view at 80x24, and is answered from the
view's reply box by picking a choice — pi's tool gets that choice."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Callable

import pytest
from kit import FIXTURES
from kit.attach import Tmux
from kit.lab import Lab
from kit.wait import wait_until

from roost.fakellm import (
    FakeLLM,
    first_user_contains,
    last_is_tool_result,
    last_tool_result_contains,
    text,
    tool_call,
)

pytestmark = [pytest.mark.timeout(150), pytest.mark.usefixtures("real_pi")]


def test_view_answers_a_real_pi_select_dialog_at_80x24(make_lab: Callable[..., Lab], llm: FakeLLM) -> None:
    lab = make_lab(llm=llm)
    (lab.agent_dir / "extensions").mkdir()
    shutil.copy(FIXTURES / "ask.ts", lab.agent_dir / "extensions" / "ask.ts")
    llm.add(first_user_contains("TASK-VIEW") & ~last_is_tool_result(), tool_call("ask_colour", {}), times=1)
    llm.add(last_tool_result_contains("picked:"), text("VIEW-DIALOG: done."))
    job = lab.run_job("--name", "painter", "TASK-VIEW")
    lab.wait_state(job, "needs_input", timeout=60)
    row = lab.row(job)
    assert row["dialog"] is True and row["options"] == ["red", "green", "blue"], row

    variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in lab.env.items())
    tmux = Tmux("view-e2e", 80, 24)
    try:
        tmux.start(
            f"cd {shlex.quote(str(lab.work))} && env {variables} "
            f"{shlex.quote(sys.executable)} -m roost.cli.main view"
        )
        wait_until(
            lambda: "? Pick a colour" in tmux.capture(),
            30,
            lambda: f"the question on screen:\n{tmux.capture()}",
        )
        assert job in tmux.capture()
        tmux.send_keys("a")  # the only job is selected
        wait_until(lambda: "Answer the dialog of painter" in tmux.capture(), 15, "the box")
        assert "3. blue" in tmux.capture()
        tmux.send_keys("Down")
        tmux.send_keys("Down")
        tmux.send_keys("Enter")
        answered = llm.wait_for_request(last_tool_result_contains("picked:"), timeout=30)
        tools = [m for m in answered["messages"] if m["role"] == "tool"]
        assert "picked: blue" in json.dumps(tools), tools
        wait_until(lambda: "VIEW-DIALOG: done." in tmux.capture(), 30, "the row to follow")
        row = lab.row(job)
        assert row["dialog"] is False and row["options"] is None
        tmux.send_keys("q")
        wait_until(tmux.pane_dead, 10, "roost view to quit")
    finally:
        tmux.close()
