"""Structured results on the real pi with roost's extension (README: Structured results):
the task asks for the schema, an invalid answer gets roost's framed note with the errors
and a new turn, a repaired answer becomes the job's result; a second invalid answer fails
the job with the errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kit.lab import Lab
from kit.matchers import after_tool, fresh, last_user_has, task, user_messages
from kit.wait import wait_until

from roost.fakellm import tool_call

pytestmark = pytest.mark.usefixtures("real_pi")

T = 90.0  # seconds: pi start-up is slow on a loaded 2-core machine
SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"enum": ["ok", "bad"]}, "count": {"type": "integer"}},
    "required": ["verdict", "count"],
}
NOTE = "[roost] Your final answer is not valid against this job's output schema"


@pytest.fixture
def lab() -> Iterator[Lab]:
    lab_ = Lab(llm=True)
    try:
        yield lab_
    finally:
        print(lab_.diagnostics())
        lab_.close()


def run_with_schema(lab: Lab, marker: str) -> str:
    path = lab.work / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return lab.run_job("--output-schema", str(path), f"{marker} judge the change")


def test_an_invalid_answer_is_repaired_after_one_note(lab: Lab) -> None:
    llm = lab.llm
    llm.add(fresh("MK-REPAIR"), '{"verdict": "maybe"}')
    llm.add(task("MK-REPAIR") & last_user_has(NOTE), 'Fixed:\n```json\n{"verdict": "ok", "count": 2}\n```')
    job = run_with_schema(lab, "MK-REPAIR")
    assert lab.wait(job, T) == "done"
    assert lab.cli_json("result", job, "--json") == {"verdict": "ok", "count": 2}
    requests = lab.requests_of("MK-REPAIR")
    assert len(requests) == 2
    first = user_messages(requests[0])[0]
    assert "[roost] This job's final answer must be a JSON value valid against" in first
    assert '"verdict"' in first  # the schema itself
    note = user_messages(requests[1])[-1]
    assert "'count' is a required property" in note and "'maybe' is not one of" in note
    assert "This note comes from roost, the supervisor, not from the user" in note
    row = lab.row(job)
    assert row["state"] == "done" and row["result"] == {"verdict": "ok", "count": 2}


def test_a_second_invalid_answer_fails_the_job_with_the_errors(lab: Lab) -> None:
    llm = lab.llm
    llm.add(fresh("MK-TWICE"), "The verdict is ok.")
    llm.add(task("MK-TWICE") & last_user_has(NOTE), '{"verdict": "ok", "count": "two"}')
    job = run_with_schema(lab, "MK-TWICE")
    record = lab.wait_state(job, "failed", timeout=T)
    assert record["error"].startswith("the final answer is not valid against the output schema")
    assert "at $.count: 'two' is not of type 'integer'" in record["error"]
    assert record["result"] is None
    assert len(lab.requests_of("MK-TWICE")) == 2  # one note (resultRepairs = 1), no third turn
    out = lab.roost("result", job)
    assert out.returncode == 1 and "has no valid result yet" in out.stderr


def test_roost_spawn_output_schema_reports_the_json_to_the_parent(lab: Lab) -> None:
    llm = lab.llm
    llm.add(
        fresh("MK-FANIN"),
        tool_call("roost_spawn", {"task": "MK-JUDGE judge it", "name": "judge", "output_schema": SCHEMA}),
    )
    llm.add(after_tool("MK-FANIN", "roost_spawn"), "spawned; waiting")
    llm.add(fresh("MK-JUDGE"), '{"verdict": "bad", "count": 4}')
    llm.add(task("MK-FANIN") & last_user_has("<agent-message"), "got it")
    parent = lab.run_job("MK-FANIN fan out")
    [envelope] = wait_until(
        lambda: [m for r in lab.requests_of("MK-FANIN") for m in user_messages(r) if "<agent-message" in m],
        T,
        "the child's report in the parent's request",
    )
    assert "result: JSON, valid against the output schema it was given" in envelope
    body = envelope.split("given\n\n", 1)[1].split("\n</agent-message>")[0]
    assert json.loads(body) == {"verdict": "bad", "count": 4}
    child = lab.children(parent)[0]
    assert child["outputSchema"] == SCHEMA and child["result"] == {"verdict": "bad", "count": 4}
