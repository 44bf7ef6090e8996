"""End to end (the real pi): a job's task, the model's answer, its bash call and the tool's
output are found by `roost search` with their kinds within seconds of pi writing them, and
pi 1.x's system prompt, which it writes into every session file, is never indexed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kit.lab import Lab
from kit.wait import wait_until

from roost.fakellm import FakeLLM, last_is_tool_result, last_user_contains, text, tool_call
from roost.pi.locate import find_pi, parse_version

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("real_pi")]


def test_the_conversation_is_searchable_and_the_system_prompt_is_not(
    make_lab: Callable[..., Lab], llm: FakeLLM
) -> None:
    lab = make_lab(llm=llm)
    llm.add(last_user_contains("SEARCH-GO"), tool_call("bash", {"command": "echo quokka-out"}), times=1)
    llm.add(last_is_tool_result("bash"), text("The marmot ledger is balanced."))
    job = lab.run("SEARCH-GO look at the wombat ledger", name="ledger")
    assert lab.wait(job) == "done"

    def found(query: str, *args: str) -> list[dict[str, Any]]:
        return lab.cli_json("search", "--json", query, *args)

    rows = wait_until(lambda: found("marmot"), 10, what="the answer indexed")
    assert [(r["job"], r["name"], r["kind"]) for r in rows] == [(job, "ledger", "assistant")]
    assert {r["kind"] for r in found("wombat")} == {"user"}
    assert {r["kind"] for r in wait_until(lambda: found("quokka*"), 10, what="the tool")} == {"tool"}
    assert found("ledger", "--kind", "assistant", "--job", "ledger")[0]["job"] == job
    # pi 1.x writes its system prompt into the session file: never into the index.
    session = (lab.roost_home / "jobs" / job / "session.jsonl").read_text()
    pi = find_pi()
    if pi is not None and (parse_version(pi.version) or (0,)) >= (1, 0, 0):  # 0.73: not in the file
        assert "coding agent harness" in session
    assert found('"coding agent harness"') == [] and found("harness") == []
