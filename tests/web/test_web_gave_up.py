"""A worker roostd gave up on stays a `gave_up` entry of the inbox after roostd restarts
(the new roostd has no worker process left to say so; the inbox's book remembers), and
leaves it once the job is started again. A real roostd with the fake pi."""

from __future__ import annotations

import pytest
from kit.lab import Lab
from kit.procs import wait_until

pytestmark = pytest.mark.timeout(120)


def entries_of(lab: Lab, job: str) -> list[dict]:
    return [e for e in lab.cli_json("inbox", "--json") if e["job"]["id"] == job]


def test_a_give_up_outlives_a_roostd_restart(fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    lab.configure(restartBackoffSeconds=0.05, restartMaxCrashes=2)
    job = lab.run_job("--name", "crasher", "[[crash]] every time")
    row = lab.wait_state(job, "failed", timeout=40)
    assert "gave up" in row["error"], row
    [before] = entries_of(lab, job)
    assert before["kind"] == "gave_up", before

    old = lab.daemon_pid()
    lab.roost_ok("daemon", "stop")
    wait_until(lambda: lab.daemon_pid() not in (old,), 20, "roostd to stop")
    lab.roost_ok("ls")  # a new roostd
    assert lab.daemon_pid() not in (None, old)
    [after] = entries_of(lab, job)
    assert (after["kind"], after["id"], after["text"]) == ("gave_up", before["id"], before["text"])
    # `roost inbox` names it so too (not as a plain failure).
    page = lab.cli("inbox").stdout
    assert "gave up" in page or "gave_up" in page, page

    # Started again, it is no longer given up on (whatever it does next).
    lab.roost_ok("start", job)
    wait_until(
        lambda: not [e for e in entries_of(lab, job) if e["id"] == before["id"]],
        30,
        "the give-up entry to close",
    )
