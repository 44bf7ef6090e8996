"""End to end (the real pi): a done job's pi and worker are stopped when its warm window
ends, and a reply starts them again with the conversation intact."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kit.lab import Lab
from kit.wait import pi_under, pid_alive, wait_until

from roost.fakellm import FakeLLM, last_user_contains, text

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("real_pi")]


def test_the_warm_window_stops_pi_and_a_reply_starts_it_again(
    make_lab: Callable[..., Lab], llm: FakeLLM
) -> None:
    lab = make_lab(llm=llm, warmSeconds=3)
    llm.add(last_user_contains("IDLE-FIRST"), text("FIRST-ANSWER"))
    llm.add(last_user_contains("IDLE-SECOND"), text("SECOND-ANSWER"))
    job = lab.run("IDLE-FIRST go")
    assert lab.wait(job) == "done"
    worker = lab.show(job)["worker"]["pid"]
    pis = pi_under(worker)
    assert len(pis) == 1 and pid_alive(worker)  # warm: both alive while in the window

    row = wait_until(
        lambda: (r := lab.show(job))["state"] == "reaped" and r, 60, what="the end of the warm window"
    )
    assert row["worker"]["pid"] is None
    wait_until(lambda: not pid_alive(worker) and not pid_alive(pis[0].pid), 20, what="worker and pi gone")

    since = len(llm.requests)
    assert lab.reply(job, "IDLE-SECOND again") == "started"
    request = lab.wait_request(last_user_contains("IDLE-SECOND"), since=since)
    seen = [m for m in request["messages"] if "FIRST-ANSWER" in str(m.get("content"))]
    assert seen, "the restarted pi must send the earlier conversation"
    assert lab.wait(job) in ("done", "reaped")
    assert "SECOND-ANSWER" in lab.roost_ok("logs", job)
