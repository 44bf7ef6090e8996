"""End-to-end: the event log under real pi runs (README: Events and hooks).

A parent spawns a child (roost_spawn), the child asks a question (report, needs_input),
the parent answers by roost_send (message.sent), the child finishes (report), its worker
is SIGKILLed twice (worker.crashed each time, then worker.gave_up, job.failed and an `ended`
report), the parent is removed, and roostd restarts. Every event is checked: once, in
order, with the documented fields, and seq runs 1..N across the restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kit.lab import Lab
from kit.matchers import after_tool, fresh, new_user_has, task
from kit.wait import kill_and_wait, wait_until

from roost.events import log as eventlog
from roost.events.writer import EVENT_TYPES
from roost.fakellm import text, tool_call

T = 120.0


@pytest.fixture
def lab() -> Iterator[Lab]:
    lab = Lab(llm=True, settings={"restartBackoffSeconds": 0.05, "restartMaxCrashes": 2})
    try:
        yield lab
    finally:
        print(lab.diagnostics())
        lab.close()


def test_every_event_once_in_order_with_its_fields_across_a_restart(lab: Lab) -> None:
    llm = lab.llm
    llm.add(fresh("MK-EVP"), tool_call("roost_spawn", {"task": "MK-EVC child", "name": "evkid"}))
    llm.add(after_tool("MK-EVP", "roost_spawn"), text("spawned"))
    llm.add(task("MK-EVP") & new_user_has("ended:"), text("noted the end"))
    llm.add(task("MK-EVP") & new_user_has("did it"), text("thanks"))
    llm.add(
        task("MK-EVP") & new_user_has('kind="report"'),
        tool_call("roost_send", {"to": "evkid", "message": "ANSWER: blue"}),
    )
    llm.add(after_tool("MK-EVP", "roost_send"), text("answered"))
    llm.add(fresh("MK-EVC"), text("Which color should I use?"))
    llm.add(task("MK-EVC") & new_user_has("ANSWER: blue"), text("did it"))

    def log() -> list[dict[str, Any]]:
        return list(eventlog.read_events(lab.roost_home))

    def of(kind: str) -> list[dict[str, Any]]:
        return [e for e in log() if e["type"] == kind]

    parent = lab.run("MK-EVP parent task", name="evparent")
    wait_until(lambda: len(of("job.report")) >= 2, T, lambda: f"two reports ({of('job.report')})")
    child = lab.job_named("evkid")["id"]
    lab.wait(parent)
    lab.wait(child)

    for _ in range(2):  # the first kill is restarted, the second makes roostd give up
        pid = wait_until(
            lambda: lab.record(child).get("process", {}).get("workerPid"), T, "the child's worker"
        )
        kill_and_wait(pid)
        wait_until(
            lambda p=pid: lab.record(child).get("process", {}).get("workerPid") != p, T, "the exit seen"
        )
    wait_until(lambda: of("job.failed") and len(of("job.report")) >= 3, T, "the give-up")
    lab.wait(parent)
    lab.cli("rm", parent)
    lab.cli("daemon", "stop")
    lab.cli("daemon", "start")

    events = log()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for e in events:
        assert set(e) - {"seq", "time", "type", "job"} == set(EVENT_TYPES[e["type"]]), e
    counts = {kind: len([e for e in events if e["type"] == kind]) for kind in EVENT_TYPES}
    assert counts == {
        "job.created": 2,
        "job.state": counts["job.state"],
        "job.needs_input": 1,
        "job.report": 3,
        "job.failed": 1,
        "job.removed": 1,
        "message.sent": 1,
        "worker.crashed": 2,
        "worker.gave_up": 1,
        "daemon.started": 2,
        "daemon.stopped": 1,
        "job.save_failed": 0,  # the disk never filled
        "job.result": 0,  # no output schema here (tests/e2e/test_e2e_structured_results.py)
        "job.waiting": 0,
        "job.unblocked": 0,  # no --after here (test_e2e_dependencies.py)
        "schedule.fired": 0,  # no schedule here (test_e2e_schedules.py)
        "approval.requested": 0,
        "approval.answered": 0,  # no approvals (test_e2e_approvals.py)
    }, counts

    def first(kind: str) -> dict[str, Any]:
        return next(e for e in events if e["type"] == kind)

    names = {parent: "evparent", child: "evkid"}
    created = [e for e in events if e["type"] == "job.created"]
    assert [(e["job"]["id"], e["parent"]) for e in created] == [(parent, None), (child, parent)]
    assert all(e["job"]["name"] == names[e["job"]["id"]] for e in created)
    asked = first("job.needs_input")
    assert asked["job"]["id"] == child and asked["question"] == "Which color should I use?"
    assert asked["dialog"] is False and asked["options"] is None
    reports = [e for e in events if e["type"] == "job.report"]
    assert [(r["kind"], r["to"]["id"]) for r in reports] == [
        ("report", parent),
        ("report", parent),
        ("ended", parent),
    ]
    assert reports[0]["firstLine"] == "Which color should I use?"
    assert reports[1]["firstLine"] == "did it" and reports[2]["firstLine"] == "crashed repeatedly"
    sent = first("message.sent")
    assert sent["from"]["id"] == parent and sent["to"] == {"id": child, "name": "evkid"}
    assert sent["outcome"] in ("started", "delivered") and "ANSWER" not in str(sent)
    assert first("job.failed")["job"]["id"] == child and "gave up" in first("job.failed")["error"]
    assert first("job.removed")["job"]["id"] == parent

    order = [
        e["seq"]
        for e in (
            created[1],
            asked,
            reports[0],
            sent,
            reports[1],
            first("worker.crashed"),
            first("worker.gave_up"),
            first("job.failed"),
            reports[2],
            first("job.removed"),
            first("daemon.stopped"),
        )
    ]
    assert order == sorted(order), order
    assert events[0]["type"] == "daemon.started" and events[-1]["type"] == "daemon.started"
    for job in (parent, child):  # each state move starts where the last one ended
        moves = [(e["from"], e["to"]) for e in events if e["type"] == "job.state" and e["job"]["id"] == job]
        assert moves and moves[0][0] == "starting"
        assert all(a[1] == b[0] for a, b in zip(moves, moves[1:], strict=False)), moves
    assert ("needs_input", "running") in [
        (e["from"], e["to"]) for e in events if e["type"] == "job.state" and e["job"]["id"] == child
    ]
