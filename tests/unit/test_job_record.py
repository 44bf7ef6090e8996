"""job.json across versions: the files in tests/fixtures/jobjson were written by roostd at
main c0781a3 (a worktree job with budgets that spawned a child in a worktree, both done), in
the flat layout with `attached` as a bool; today's code reads them as they were meant
(pueue keeps its old state files in its tests for the same reason)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roost.jobs import BadRecord, Facts, JobRecord, load_record
from roost.states import Attach, JobKind, JobState
from roost.supervise.handlers.worker import WORKER_FIELDS

FIXTURES = Path(__file__).parent.parent / "fixtures" / "jobjson"


def old(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"main-c0781a3-{name}.json").read_text())
    return data


def test_a_parent_written_by_main_c0781a3_reads_as_it_was() -> None:
    record = load_record(FIXTURES / "main-c0781a3-parent.json")
    assert (record.id, record.name, record.kind, record.state) == (
        "9981527c", "fx-parent", JobKind.PI, JobState.DONE)
    assert record.attach == Attach.DETACHED and not record.attached
    assert (record.budget, record.budget_tokens, record.max_turns, record.tree_budget) == (
        5.0, 100000, 20, 9.0)
    assert record.worktree is not None and record.worktree["branch"] == "roost/fx-parent-9981527c"
    assert record.usage is not None and record.usage["requests"] == 3
    assert (record.worker_pid, record.worker_start) == (11512, 1796138048.38)
    assert (record.depth, record.spawned, record.parent_session) == (0, False, None)
    assert record.token == "29eb95ffa56f80f1dfa179329925e944"


def test_a_spawned_child_written_by_main_c0781a3_reads_as_it_was() -> None:
    record = load_record(FIXTURES / "main-c0781a3-child.json")
    assert (record.depth, record.spawned, record.parent_peer) == (1, True, "9981527c")
    assert record.root_session == "/tmp/roost-aqej68tk/rh/jobs/9981527c/session.jsonl"
    assert record.last_report == "317bcf9566ee95eb"
    assert (record.model, record.thinking, record.budget) == ("fake/fake-model", "off", 9.0)
    assert record.worktree is not None and record.worktree["origin"].endswith("/9981527c")


@pytest.mark.parametrize("name", ["parent", "child"])
def test_an_old_record_saved_again_keeps_every_fact(name: str) -> None:
    data = old(name)
    again = JobRecord.from_json(JobRecord.from_json(data).to_json())
    assert again == JobRecord.from_json(data)
    saved = again.to_json()
    assert "attached" not in saved and saved["attach"] == ""


@pytest.mark.parametrize(("attached", "status", "attach"), [
    (False, "", Attach.DETACHED),
    (False, "thinking", Attach.DETACHED),
    (True, "attaching", Attach.ATTACHING),
    (True, "attached", Attach.ATTACHED),
    (True, "handing off", Attach.HANDING_OFF),
    (True, "", Attach.ATTACHED),  # the worker's last words overwrote the step
])
def test_the_old_attached_and_status_become_the_attach_field(
        attached: bool, status: str, attach: Attach) -> None:
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
