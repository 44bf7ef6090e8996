"""A child's worker killed between its run's end and roostd's answer to its hand-back: the
parent gets the report exactly once (seed M9, Hand-back: nothing lost at any kill point).

roost.faults' report points, on the fake pi: `run_ended` (pi answered, the worker
had not settled the run: the restarted worker finds the answer in the session and reports
it), `report_pending` (the report is in the run note, not yet sent: the restarted worker
must send it) and `report_answered` (roostd took it, the worker had not crossed it off: sent
again under the same id, roostd must not hand it over twice).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.lab import Lab
from kit.wait import wait_until

from roost.faults import REPORT_POINTS

T = 60.0


@pytest.fixture
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    fault = tmp_path_factory.mktemp("fault") / "fault.json"
    lab_ = Lab(pi="fake", env={"ROOST_FAULTS": str(fault)})
    lab_.configure(restartBackoffSeconds=0.05)
    try:
        yield lab_
    finally:
        print(lab_.diagnostics())
        lab_.close()


def reports(lab: Lab, parent: str, tag: str) -> list[dict[str, Any]]:
    return [
        i
        for sub in ("new", "cur")
        for i in lab.mailbox_files(parent, sub)
        if i.get("kind") == "report" and tag in str(i.get("result"))
    ]


@pytest.mark.parametrize("point", REPORT_POINTS)
def test_a_child_killed_around_its_hand_back_reports_once(lab: Lab, point: str) -> None:
    tag, gate = f"KIDTAG-{point}", lab.root / f"gate-{point}"
    parent = lab.run_job(f"[[spawn {tag} {{{{think {gate}}}}}]]")
    kid = wait_until(lambda: lab.children(parent), T, what="the child")[0]["id"]
    fault = Path(lab.env["ROOST_FAULTS"])
    fault.write_text(json.dumps({"point": point, "target": "worker", "text": tag, "job": kid}))
    wait_until(lambda: lab.record(kid)["process"].get("workerPid"), T, what="the kid's worker")
    first = lab.record(kid)["process"]["workerPid"]
    gate.touch()  # the kid's model answers now: its run settles and reports
    wait_until(Path(f"{fault}.fired").exists, T, what=f"the kill at {point}")
    wait_until(
        lambda: lab.record(kid)["process"].get("workerPid") not in (None, first),
        T,
        what="the kid's worker to be restarted",
    )
    wait_until(lambda: reports(lab, parent, tag), T, what="the kid's report")
    assert lab.wait(kid) == "done"
    lab.wait(parent)
    wait_until(
        lambda: not json.loads((lab.roost_home / "jobs" / kid / "run.json").read_text()).get("reports"),
        T,
        what="the kid's run note to cross its report off",
    )
    items = reports(lab, parent, tag)
    assert len(items) == 1, items
    assert lab.record(kid)["reports"]["last"] == items[0]["report"]
    in_session = [
        e for e in lab.session(parent) if e.get("type") == "custom_message" and tag in json.dumps(e)
    ]
    assert len(in_session) == 1, in_session
