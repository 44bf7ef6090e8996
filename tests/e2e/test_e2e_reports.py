"""Report routing when the parent is away (seed M9b, Hand-back), on the real pi:

- a foreground parent that disconnected gets its child's report when it registers again
  (the report is kept on the child as `undeliveredReport` meanwhile);
- a child that crash-loops gives its parent an `ended` report once roostd gives up.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.lab import Lab
from kit.matchers import after_tool, fresh, task
from kit.wait import kill_and_wait, pid_alive, wait_until

from roost.fakellm import last_user_contains, text, tool_call
from roost.faults import REPORT_POINTS

pytestmark = pytest.mark.usefixtures("real_pi")

T = 90.0  # seconds: pi start-up is slow on a loaded 2-core machine


@pytest.fixture
def lab() -> Iterator[Lab]:
    lab_ = Lab(llm=True)
    try:
        yield lab_
    finally:
        print(lab_.diagnostics())
        lab_.close()


def spawned_id(result_text: str) -> str:
    match = re.match(r'^spawned ([0-9a-f]{8}) "', result_text)
    assert match, result_text
    return match.group(1)


def test_a_disconnected_foreground_parent_gets_the_report_when_it_registers_again(
    lab: Lab,
) -> None:
    llm = lab.llm
    hold = threading.Event()
    llm.add(fresh("MK-AWAY"), tool_call("roost_spawn", {"task": "MK-KIDAWAY work", "name": "kid"}))
    llm.add(after_tool("MK-AWAY", "roost_spawn"), text("spawned; going away"))
    llm.add(task("MK-AWAY") & last_user_contains("MK-BACK"), tool_call("roost_agents", {}))
    llm.add(after_tool("MK-AWAY", "roost_agents"), text("listed"))
    llm.add(fresh("MK-KIDAWAY"), text("KID-RESULT-42", hold=hold))
    lab.cli("daemon", "start")
    try:
        session = lab.root / "fg" / "away.jsonl"
        fg = lab.foreground(session)
        assert fg.prompt("MK-AWAY start")["success"]
        kid = spawned_id(lab.wait_tool_results("MK-AWAY", "roost_spawn")[0]["text"])
        wait_until(lambda: lab.record(kid)["state"] == "running", T, "the kid to run")
        fg.close()  # the parent goes away: no peer holds its session, no job has it

        hold.set()  # the kid settles now; its report has nowhere to go
        kept = wait_until(
            lambda: lab.record(kid).get("reports", {}).get("undelivered"),
            T,
            "the report to be kept on the kid",
        )
        assert "KID-RESULT-42" in str(kept)
        assert not lab.reports_seen("MK-AWAY")

        back = lab.foreground(session)  # the same session, a new pi
        assert back.prompt("MK-BACK are you there")["success"]  # its first roost_* call
        # registers it; the kept report follows at once.
        report = wait_until(lambda: lab.reports_seen("MK-AWAY"), T, "the kept report")[0]
        assert report["relation"] == "child" and report["id"] == kid
        assert "KID-RESULT-42" in report["raw"]
        wait_until(
            lambda: not lab.record(kid).get("reports", {}).get("undelivered"),
            10,
            "the kid to forget the delivered report",
        )
        back.close()
    finally:
        hold.set()


def test_a_crash_looping_child_gives_its_parent_an_ended_report(lab: Lab) -> None:
    lab.configure(restartBackoffSeconds=0.05, restartMaxCrashes=2, restartWindowSeconds=300)
    llm = lab.llm
    hold = threading.Event()
    llm.add(fresh("MK-CRASHP"), tool_call("roost_spawn", {"task": "MK-CRASHKID", "name": "cr"}))
    llm.add(after_tool("MK-CRASHP", "roost_spawn"), text("spawned"))
    llm.add(task("MK-CRASHP") & last_user_contains("ended:"), text("PARENT-SAW-ENDED"))
    # Every request of the kid is held: its first, and the run that a restart continues.
    llm.add(task("MK-CRASHKID"), text("never", hold=hold))
    try:
        parent = lab.run("MK-CRASHP spawn one")
        kid = spawned_id(lab.wait_tool_results("MK-CRASHP", "roost_spawn")[0]["text"])
        for crash in (1, 2):
            # Each kill lands while the kid's run is in flight (its reply is held).
            wait_until(
                lambda n=crash: len(lab.requests_of("MK-CRASHKID")) >= n,
                T,
                f"the kid's model request {crash}",
            )
            kill_and_wait(lab.record(kid)["process"]["workerPid"])
        row = lab.wait_state(kid, "failed", timeout=T)
        assert "gave up" in (row["error"] or "")
        report = wait_until(
            lambda: [r for r in lab.reports_seen("MK-CRASHP") if r["id"] == kid], T, "the ended report"
        )[0]
        assert report["relation"] == "child"
        assert "ended: crashed repeatedly" in report["raw"]
        assert lab.wait(parent) == "done"
        assert lab.record(parent)["summary"] == "PARENT-SAW-ENDED"
    finally:
        hold.set()


def test_a_hand_back_sent_again_after_roostd_died_reaches_the_parent_once(tmp_path_factory) -> None:
    """roostd dies after putting a child's report in its parent's mailbox and before it
    answered the worker, which sends the hand-back again to the next roostd: the parent
    still gets it once (the report's id is found in the parent's mailbox)."""
    fault = tmp_path_factory.mktemp("fault") / "fault.json"
    lab = Lab(llm=True, env={"ROOST_FAULTS": str(fault)})
    llm = lab.llm
    hold = threading.Event()
    llm.add(fresh("MK-ONCE"), tool_call("roost_spawn", {"task": "MK-KIDONCE work", "name": "kid"}))
    llm.add(after_tool("MK-ONCE", "roost_spawn"), text("spawned"))
    llm.add(task("MK-ONCE") & last_user_contains("KID-ONCE-7"), text("PARENT-GOT-IT"))
    llm.add(fresh("MK-KIDONCE"), text("KID-ONCE-7", hold=hold))
    try:
        parent = lab.run("MK-ONCE start", name="parent")
        kid = spawned_id(lab.wait_tool_results("MK-ONCE", "roost_spawn")[0]["text"])
        lab.wait(parent)
        first_daemon = lab.daemon_pid()
        fault.write_text(
            json.dumps({"point": "report_routed", "target": "roostd", "text": "KID-ONCE-7", "job": kid})
        )
        hold.set()
        wait_until(Path(f"{fault}.fired").exists, T, "roostd to die after routing the report")
        wait_until(lambda: not pid_alive(first_daemon), 10, "the first roostd to be gone")
        lab.cli("daemon", "start")  # the kid's worker reconnects and sends the hand-back again
        wait_until(
            lambda: any("PARENT-GOT-IT" in str(e) for e in lab.session(parent)),
            T,
            "the parent to answer the report",
        )
        lab.wait(parent)
        lab.wait(kid)
        items = [
            i for sub in ("new", "cur") for i in lab.mailbox_files(parent, sub) if i.get("kind") == "report"
        ]
        assert len(items) == 1 and items[0]["result"] == "KID-ONCE-7", items
        in_session = [
            e
            for e in lab.session(parent)
            if e.get("type") == "custom_message" and "KID-ONCE-7" in json.dumps(e)
        ]
        assert len(in_session) == 1, in_session
        assert lab.record(kid)["reports"]["last"] == items[0]["report"]
    finally:
        hold.set()
        print(lab.diagnostics())
        lab.close()


@pytest.mark.parametrize("point", REPORT_POINTS)
def test_a_child_killed_around_its_hand_back_reports_once(tmp_path_factory, point: str) -> None:
    """The child's worker is killed after pi ended its run (`run_ended`), after the report
    was noted and before it was sent (`report_pending`), or after roostd answered it and
    before the worker crossed it off (`report_answered`): the parent gets it once."""
    fault = tmp_path_factory.mktemp("fault") / "fault.json"
    lab = Lab(llm=True, env={"ROOST_FAULTS": str(fault)}, settings={"restartBackoffSeconds": 0.05})
    llm, tag = lab.llm, f"KID-KILLED-{point.replace('_', '-')}"
    hold = threading.Event()
    llm.add(fresh("MK-KILLED"), tool_call("roost_spawn", {"task": "MK-KIDKILLED work", "name": "kid"}))
    llm.add(after_tool("MK-KILLED", "roost_spawn"), text("spawned"))
    llm.add(task("MK-KILLED") & last_user_contains(tag), text("PARENT-GOT-IT"))
    llm.add(fresh("MK-KIDKILLED"), text(tag, hold=hold))
    try:
        parent = lab.run("MK-KILLED start", name="parent")
        kid = spawned_id(lab.wait_tool_results("MK-KILLED", "roost_spawn")[0]["text"])
        first = wait_until(lambda: lab.record(kid)["process"].get("workerPid"), T, "the kid's worker")
        fault.write_text(json.dumps({"point": point, "target": "worker", "text": tag, "job": kid}))
        hold.set()
        wait_until(Path(f"{fault}.fired").exists, T, f"the kill at {point}")
        wait_until(
            lambda: lab.record(kid)["process"].get("workerPid") not in (None, first),
            T,
            "the kid's worker to be restarted",
        )
        wait_until(
            lambda: any("PARENT-GOT-IT" in str(e) for e in lab.session(parent)),
            T,
            "the parent to answer the report",
        )
        lab.wait(parent)
        assert lab.wait(kid) == "done"
        items = [
            i for sub in ("new", "cur") for i in lab.mailbox_files(parent, sub) if i.get("kind") == "report"
        ]
        assert len(items) == 1 and items[0]["result"] == tag, items
        in_session = [
            e for e in lab.session(parent) if e.get("type") == "custom_message" and tag in json.dumps(e)
        ]
        assert len(in_session) == 1, in_session
        assert lab.record(kid)["reports"]["last"] == items[0]["report"]
    finally:
        hold.set()
        print(lab.diagnostics())
        lab.close()
