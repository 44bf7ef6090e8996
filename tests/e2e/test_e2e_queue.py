"""End to end, the real pi: a job queued behind maxRunning=1 runs when the first finishes
(README: Queue and limits); its pi is not started before then."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from kit.lab import Lab
from kit.wait import wait_until

from roost.fakellm import FakeLLM, first_user_contains, text

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("real_pi")]


def test_a_job_queued_behind_max_running_runs_after_the_first_finishes(
    make_lab: Callable[..., Lab],
    llm: FakeLLM,
) -> None:
    lab = make_lab(llm=llm, maxRunning=1)
    hold = threading.Event()
    llm.add(first_user_contains("QFIRST"), text("first answer", hold=hold))
    llm.add(first_user_contains("QSECOND"), text("second answer"))
    first = lab.run("QFIRST go", name="first")
    second = lab.run("QSECOND go", name="second")
    try:
        lab.wait_request(first_user_contains("QFIRST"))
        row = lab.row(second)
        assert row["state"] == "queued" and row["status"] == "queued (position 1)"
        assert row["queue"] == {"position": 1, "group": None, "priority": 0}
        assert lab.requests_of("QSECOND") == []  # its pi never started
        assert lab.show(second)["worker"]["pid"] is None
    finally:
        hold.set()
    assert lab.wait(first) == "done"
    assert lab.wait(second) == "done"
    assert lab.row(second)["summary"].endswith("second answer")
    wait_until(lambda: len(lab.requests_of("QSECOND")) == 1, 30, what="the second's request")
