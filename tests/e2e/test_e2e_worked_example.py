"""End to end, the real pi: the worked example of docs/guides/schedules.md ("A nightly scout: a schedule, a
fan-out, a fan-in with a schema"). A schedule runs the `nightly-scout` definition; the
scout spawns two reviewers and then a `summary` child that waits on both with their
results, and whose definition names its output schema; the summary's JSON is its result.
The definitions are the guide's, word for word (tests/e2e/worked_example/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kit.lab import Lab
from kit.matchers import after_tool, fresh, new_user_has, task, user_messages
from kit.wait import wait_until

from roost.fakellm import FakeLLM, text, tool_call, tool_calls

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("real_pi")]

T = 120.0
DEFINITIONS = Path(__file__).parent / "worked_example"
GUIDE = Path(__file__).parents[2] / "docs" / "guides" / "schedules.md"
SUMMARY = {
    "risk": "medium",
    "findings": [
        {"from": "security", "text": "token logged in debug mode"},
        {"from": "tests", "text": "retry path untested"},
    ],
}


def test_the_documented_definitions_are_the_tested_ones() -> None:
    readme = GUIDE.read_text(encoding="utf-8")
    for path in sorted(DEFINITIONS.iterdir()):
        assert path.read_text(encoding="utf-8").strip() in readme, path.name


def test_a_nightly_scout_fans_out_and_in_to_a_structured_summary(make_lab, llm: FakeLLM) -> None:
    lab: Lab = make_lab(llm=llm)
    shutil.copytree(DEFINITIONS, lab.agent_dir / "roost" / "agents")
    assert lab.roost_ok("agents", "check").startswith("ok: 5 agents")
    llm.add(
        fresh("NIGHTLY"),
        tool_calls(
            ("roost_spawn", {"agent": "reviewer", "name": "security", "task": "SEC review"}),
            ("roost_spawn", {"agent": "reviewer", "name": "tests", "task": "TST review"}),
        ),
    )
    llm.add(
        after_tool("NIGHTLY", "roost_spawn"),
        tool_call(
            "roost_spawn",
            {
                "agent": "summary",
                "name": "summary",
                "after": ["security", "tests"],
                "task": "SUM Sum up the two reviews",
            },
        ),
        times=1,
    )
    llm.add(after_tool("NIGHTLY", "roost_spawn"), text("Reviewers and summary started."))
    llm.add(task("NIGHTLY") & new_user_has('kind="report"'), text("noted"))
    llm.add(task("SEC"), text("token logged in debug mode"))
    llm.add(task("TST"), text("retry path untested"))
    llm.add(task("SUM"), text("```json\n" + json.dumps(SUMMARY) + "\n```"))

    lab.roost_ok(
        "schedule",
        "add",
        "nightly",
        "--cron",
        "0 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--agent",
        "nightly-scout",
        "NIGHTLY Review what changed in the last day.",
    )
    lab.roost_ok("schedule", "run-now", "nightly")
    summary = wait_until(lambda: lab.job_named("summary"), T, what="the summary child")
    assert lab.wait(summary["id"], T) == "done"
    # It waited on both reviewers and read their answers, framed as data from roost.
    first = user_messages(lab.requests_of("SUM")[0])[0]
    for reviewer, answer in (("security", "token logged"), ("tests", "retry path")):
        assert f'from="{reviewer}"' in first and answer in first
    # Its definition's schema asked for the JSON, and the valid answer is its result.
    assert "[roost] This job's final answer must be a JSON value valid against" in first
    assert lab.cli_json("result", summary["id"], "--json") == SUMMARY
    # The scout, started by the schedule, hears from all three, the summary's as JSON.
    scout = lab.cli_json("schedule", "show", "nightly", "--json")["jobs"][0]
    assert lab.row(scout)["schedule"]["name"] == "nightly"
    wait_until(
        lambda: len(lab.reports_seen("NIGHTLY")) == 3,
        T,
        lambda: f"three reports ({lab.reports_seen('NIGHTLY')})",
    )
    assert lab.reports_seen("NIGHTLY")[-1]["id"] == summary["id"]
