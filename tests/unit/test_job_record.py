"""job.json across versions: the files in tests/fixtures/jobjson were written by roostd at
main c0781a3 (a worktree job with budgets that spawned a child in a worktree, both done), in
the flat layout with `attached` as a bool; today's code reads them as they were meant
(pueue keeps its old state files in its tests for the same reason)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roost.job.record import (
    SCHEMA_VERSION,
    BadRecord,
    Facts,
    JobLimits,
    JobRecord,
    Links,
    Process,
    Reports,
    load_record,
)
from roost.job.states import Attach, JobKind, JobState
from roost.supervise.handlers.worker import WORKER_FIELDS
from roost.supervise.jobstore import stand_in

FIXTURES = Path(__file__).parent.parent / "fixtures" / "jobjson"


def old(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"main-c0781a3-{name}.json").read_text())
    return data


def test_a_parent_written_by_main_c0781a3_reads_as_it_was() -> None:
    record = load_record(FIXTURES / "main-c0781a3-parent.json")
    assert (record.id, record.name, record.kind, record.state) == (
        "9981527c",
        "fx-parent",
        JobKind.PI,
        JobState.DONE,
    )
    assert record.attach == Attach.DETACHED and not record.attached
    assert record.limits == JobLimits(budget=5.0, budget_tokens=100000, max_turns=20, tree_budget=9.0)
    assert record.worktree is not None and record.worktree["branch"] == "roost/fx-parent-9981527c"
    assert record.usage is not None and record.usage["requests"] == 3
    assert record.process == Process(worker_pid=11512, worker_start=1796138048.38)
    assert record.links == Links()
    assert record.reports == Reports()
    assert record.token == "29eb95ffa56f80f1dfa179329925e944"


def test_a_spawned_child_written_by_main_c0781a3_reads_as_it_was() -> None:
    record = load_record(FIXTURES / "main-c0781a3-child.json")
    parent = "/tmp/roost-aqej68tk/rh/jobs/9981527c/session.jsonl"
    assert record.links == Links(
        parent_session=parent, parent_peer="9981527c", root_session=parent, depth=1, spawned=True
    )
    assert record.reports == Reports(last="317bcf9566ee95eb")
    assert record.limits == JobLimits(budget=9.0)  # its share of the tree's budget
    assert (record.model, record.thinking) == ("fake/fake-model", "off")
    assert record.worktree is not None and record.worktree["origin"].endswith("/9981527c")


@pytest.mark.parametrize("name", ["parent", "child"])
def test_an_old_record_saved_again_keeps_every_fact(name: str) -> None:
    data = old(name)
    again = JobRecord.from_json(JobRecord.from_json(data).to_json())
    assert again == JobRecord.from_json(data)
    saved = again.to_json()
    assert "attached" not in saved and saved["attach"] == ""
    assert saved["schema"] == SCHEMA_VERSION == 2


def test_job_json_is_written_grouped() -> None:
    saved = load_record(FIXTURES / "main-c0781a3-child.json").to_json()
    assert saved["links"] == {
        "parentSession": "/tmp/roost-aqej68tk/rh/jobs/9981527c/session.jsonl",
        "parentPeer": "9981527c",
        "rootSession": "/tmp/roost-aqej68tk/rh/jobs/9981527c/session.jsonl",
        "depth": 1,
        "spawned": True,
    }
    assert saved["process"] == {
        "workerPid": 11553,
        "workerStart": 1796138049.87,
        "workerTicks": None,  # an older roostd saved no ticks: its start time is the fallback
        "workerBoot": None,
        "exitCode": None,
        "crashes": [],
    }
    assert saved["limits"] == {"budget": 9.0, "budgetTokens": None, "maxTurns": None, "treeBudget": None}
    assert saved["reports"] == {"undelivered": None, "last": "317bcf9566ee95eb"}
    moved = {
        "parentSession",
        "parentPeer",
        "rootSession",
        "depth",
        "spawned",
        "workerPid",
        "workerStart",
        "exitCode",
        "crashes",
        "budget",
        "budgetTokens",
        "maxTurns",
        "treeBudget",
        "undeliveredReport",
        "lastReport",
        "attached",
    }
    assert set(saved) == (set(old("child")) - moved) | {
        "links",
        "process",
        "limits",
        "reports",
        "attach",
        "queue",
        "after",
        "result",
        "outputSchema",
        "sandbox",
        "approvals",
    }  # added since
    assert saved["queue"] is None and saved["after"] is None
    assert saved["sandbox"] is None and saved["approvals"] is None  # an old job: none


def test_a_grouped_field_of_the_wrong_type_is_a_bad_record() -> None:
    saved = load_record(FIXTURES / "main-c0781a3-child.json").to_json()
    with pytest.raises(BadRecord, match=r"process\.workerPid has the wrong type"):
        JobRecord.from_json({**saved, "process": {"workerPid": "12"}})
    with pytest.raises(BadRecord, match="links must be an object"):
        JobRecord.from_json({**saved, "links": []})
    with pytest.raises(BadRecord, match="budget has the wrong type"):
        JobRecord.from_json({**old("child"), "budget": "lots"})  # a flat one, migrated


@pytest.mark.parametrize(
    ("attached", "status", "attach"),
    [
        (False, "", Attach.DETACHED),
        (False, "thinking", Attach.DETACHED),
        (True, "attaching", Attach.ATTACHING),
        (True, "attached", Attach.ATTACHED),
        (True, "handing off", Attach.HANDING_OFF),
        (True, "", Attach.ATTACHED),  # the worker's last words overwrote the step
    ],
)
def test_the_old_attached_and_status_become_the_attach_field(
    attached: bool, status: str, attach: Attach
) -> None:
    data = {**old("parent"), "attached": attached, "status": status}
    record = JobRecord.from_json(data)
    assert (record.attach, record.status) == (attach, status)


def test_a_bad_attach_is_a_bad_record() -> None:
    with pytest.raises(BadRecord, match="attached has the wrong type"):
        JobRecord.from_json({**old("parent"), "attached": "yes"})
    data = old("parent")
    del data["attached"]
    with pytest.raises(BadRecord, match="unknown attach"):
        JobRecord.from_json({**data, "attach": "elsewhere"})


def test_a_worker_reports_only_what_a_state_change_may_set() -> None:
    assert set(WORKER_FIELDS) <= set(Facts.__annotations__)


def test_an_unreadable_grouped_record_keeps_its_links_in_the_stand_in() -> None:
    saved = load_record(FIXTURES / "main-c0781a3-child.json").to_json()
    for salvaged in (saved, old("child")):  # what could be read of a schema 2 or 1 file
        record = stand_in(Path("/r/jobs/dd557085"), salvaged, "a field of the wrong type")
        assert record.links.parent_session == saved["links"]["parentSession"]
        assert record.links.root_session == saved["links"]["rootSession"]
        assert (record.state, record.recovered) == (JobState.FAILED, True)
