"""End to end, the real pi: an `--every` schedule fires twice (README: Schedules); with
`--session same` the second firing is a reply in the same session, so the model sees the
first run's answer."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from kit.wait import wait_until

from roost.testkit.fakellm import FakeLLM, any_message_contains, first_user_contains, text
from roost.testkit.lab import Lab

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("real_pi")]


def fired(lab: Lab) -> list[dict]:
    path = lab.roost_home / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in events if e["type"] == "schedule.fired"]


def test_an_every_schedule_fires_twice_into_the_same_session(
    make_lab: Callable[..., Lab], llm: FakeLLM,
) -> None:
    lab = make_lab(llm=llm)
    llm.add(any_message_contains("SCHEDMEM 42"), text("second run remembers SCHEDMEM 42"))
    llm.add(first_user_contains("SCHEDTASK"), text("SCHEDMEM 42"))
    lab.roost_ok("schedule", "add", "memo", "--every", "2s", "--session", "same",
                 "SCHEDTASK note the number")
    ran = wait_until(lambda: (r := [e for e in fired(lab) if e["outcome"] in ("started",
                                                                               "replied")])
                     and len(r) >= 2 and r, 60, what="two firings that ran")
    assert [e["outcome"] for e in ran[:2]] == ["started", "replied"]
    job = ran[0]["job"]["id"]
    assert ran[1]["job"]["id"] == job
    lab.roost_ok("schedule", "rm", "memo")
    wait_until(lambda: lab.row(job)["summary"].endswith("second run remembers SCHEDMEM 42"),
               60, what="the second run's answer, from the first run's memory")
    assert lab.wait(job) == "done"
