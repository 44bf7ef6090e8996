"""End to end, the real pi: an `--every` schedule fires twice (README: Schedules); with
`--session same` the second firing is a reply in the same session, so the model sees the
first run's answer; a roostd SIGKILLed across due times catches up once; a file trigger on a
real directory fires one run for a burst, its model given the changed paths as data."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from kit.lab import Lab
from kit.wait import kill, wait_until

from roost.fakellm import FakeLLM, any_message_contains, first_user_contains, text

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("real_pi")]


def fired(lab: Lab) -> list[dict]:
    path = lab.roost_home / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in events if e["type"] == "schedule.fired"]


def test_an_every_schedule_fires_twice_into_the_same_session(
    make_lab: Callable[..., Lab],
    llm: FakeLLM,
) -> None:
    lab = make_lab(llm=llm)
    llm.add(any_message_contains("SCHEDMEM 42"), text("second run remembers SCHEDMEM 42"))
    llm.add(first_user_contains("SCHEDTASK"), text("SCHEDMEM 42"))
    lab.roost_ok("schedule", "add", "memo", "--every", "2s", "--session", "same", "SCHEDTASK note the number")
    ran = wait_until(
        lambda: (
            (r := [e for e in fired(lab) if e["outcome"] in ("started", "replied")]) and len(r) >= 2 and r
        ),
        60,
        what="two firings that ran",
    )
    assert [e["outcome"] for e in ran[:2]] == ["started", "replied"]
    job = ran[0]["job"]["id"]
    assert ran[1]["job"]["id"] == job
    lab.roost_ok("schedule", "rm", "memo")
    wait_until(
        lambda: lab.row(job)["summary"].endswith("second run remembers SCHEDMEM 42"),
        60,
        what="the second run's answer, from the first run's memory",
    )
    assert lab.wait(job) == "done"


def test_a_catch_up_after_a_sigkill_and_a_file_trigger_run_real_pis(
    make_lab: Callable[..., Lab],
    llm: FakeLLM,
) -> None:
    """Real time, real pi: roostd SIGKILLed across two due times of an `--every 2s`
    schedule fires one catch-up; a burst of writes in a real directory fires one run,
    whose model is given the changed paths as roost's data."""
    lab = make_lab(llm=llm)
    llm.add(first_user_contains("TICKTASK"), text("ticked"))
    llm.add(first_user_contains("DOCSTASK"), text("rebuilt"))
    lab.roost_ok("schedule", "add", "tick", "--every", "2s", "TICKTASK tick")
    first = wait_until(lambda: fired(lab), 60, what="the first firing")[0]
    daemon = lab.daemon_pid()
    assert daemon is not None
    kill(daemon)
    due = datetime.fromisoformat(first["due"].replace("Z", "+00:00")).timestamp()
    # Just past the second missed due time (due + 2, due + 4): the new roostd's start and the
    # pause then have ~1.9 s before the next one (due + 6). Waiting to due + 5 left that
    # start (~1 s) ending at due + 6, where the schedule's next tick could beat the pause.
    wait_until(lambda: time.time() > due + 4.05, 30, what="two due times to pass")
    lab.roost_ok("schedule", "pause", "tick")  # a new roostd: its catch-up, then no more
    wait_until(lambda: [e for e in fired(lab) if e["cause"] == "catch-up"], 60, what="the catch-up")
    ticks = [e for e in fired(lab) if e["schedule"] == "tick"]
    assert [e["cause"] for e in ticks] == ["time", "catch-up"], ticks
    for event in ticks:
        assert lab.wait(event["job"]["id"]) == "done"

    docs = lab.work / "docs"
    docs.mkdir()
    lab.roost_ok(
        "schedule", "add", "docs", "--on-change", str(docs), "--debounce", "1s", "DOCSTASK rebuild the docs"
    )
    for n in range(5):
        (docs / f"page{n}.md").write_text(f"page {n}\n")
    change = wait_until(
        lambda: [e for e in fired(lab) if e["schedule"] == "docs"], 60, what="the file trigger's firing"
    )[0]
    assert change["cause"] == "change" and lab.wait(change["job"]["id"]) == "done"
    [request] = lab.requests_of("DOCSTASK")
    task = request["messages"][1]["content"]
    task = task if isinstance(task, str) else task[0]["text"]
    assert "<roost-changed-paths>" in task and json.dumps(str(docs / "page4.md")) in task
    assert len([e for e in fired(lab) if e["schedule"] == "docs"]) == 1  # one burst, one run
