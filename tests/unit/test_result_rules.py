"""Structured results without processes: the schema check, finding the answer's JSON, the
errors and roost's words (roost/job/results.py), an agent definition's `output_schema`, and the
worker's `Answers` (roost/worker/answers.py) with a hand-fed RunTracker and fake ports."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from roost.definitions import rules, store
from roost.job import results
from roost.job.record import JobRecord, Links, load_record
from roost.job.states import JobKind, JobState, RunCause
from roost.wire.protocol import RESULT_MAX
from roost.worker.answers import Answers, structured_text
from roost.worker.runnote import Keeper
from roost.worker.runs import RunTracker

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}


# -- the schema ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ([], "must be a JSON object, got an array"),
        ({"type": "nope"}, "not a valid JSON Schema: at $.type"),
        ({"properties": {"a": {"minimum": "x"}}}, "at $.properties.a.minimum"),
        ({"$schema": "https://example.com/mine"}, "not a JSON Schema dialect roost knows"),
        ({"$ref": "other.json"}, "points outside it"),
        ({"description": "x" * results.SCHEMA_MAX}, f"the limit is {results.SCHEMA_MAX}"),
    ],
)
def test_an_unusable_schema_is_refused_with_one_line(schema: Any, why: str) -> None:
    with pytest.raises(results.BadSchema) as caught:
        results.check_schema(schema)
    assert why in str(caught.value) and "\n" not in str(caught.value)


def test_a_schema_of_any_known_dialect_and_local_refs_are_accepted() -> None:
    assert results.check_schema(SCHEMA) is SCHEMA
    results.check_schema({"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"})
    local = {"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}}
    assert results.check(results.check_schema(local), "[1, 2]") == ([1, 2], [])
    assert results.check(local, '[1, "x"]')[1] == ["at $[1]: 'x' is not of type 'integer'"]


# -- the answer ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"n": 1}', {"n": 1}),
        ('\n  {"n": 1}\n', {"n": 1}),
        ("42", 42),
        ('"text"', "text"),
        ('Here it is:\n```json\n{"n": 2}\n```\nDone.', {"n": 2}),
        ("```JSON\n[1, 2]\n```", [1, 2]),
    ],
)
def test_the_answer_is_the_whole_text_or_one_json_block(text: str, value: Any) -> None:
    assert results.extract(text) == (value, None)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "the answer is empty"),
        ("The count is 3.", "the answer is not JSON"),
        ('```\n{"n": 1}\n```', "the answer is not JSON"),  # a block not tagged json
        ('```json\n{"n": 1}\n```\n```json\n{"n": 2}\n```', "holds 2 ```json blocks"),
        ("```json\n{n: 1}\n```", "the ```json block is not valid JSON"),
    ],
)
def test_an_answer_without_one_json_value_says_why(text: str, why: str) -> None:
    value, problem = results.extract(text)
    assert value is None and problem is not None and why in problem


def test_errors_are_listed_in_path_order_and_bounded() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    value, errors = results.check(schema, json.dumps(["x"] * 15))
    assert value is None and len(errors) == 15
    assert errors[0] == "at $[0]: 'x' is not of type 'integer'"
    listed = results.listing(errors)
    assert listed.count("\n- at") == results.ERRORS_SHOWN - 1 and listed.endswith("- … 5 more")
    long = results.errors_of({"maxLength": 1}, "y" * 1000)[0]
    assert len(long) <= results.ERROR_CHARS + len("at $: ") and long.endswith("…")


def test_roosts_words() -> None:
    note = results.repair_note(["at $: 'n' is a required property"], left=0)
    assert note.startswith("[roost] Your final answer is not valid against this job's output schema:")
    assert "- at $: 'n' is a required property" in note and "not from the user" in note
    assert "more chance" not in note
    assert "(2 more chances after this)" in results.repair_note(["x"], left=2)
    task = results.task_note(SCHEMA)
    assert task.startswith("\n\n[roost] This job's final answer must be a JSON value")
    assert json.loads(task.split("```json\n")[1].split("\n```")[0]) == SCHEMA
    assert results.failure(["a"]) == ("the final answer is not valid against the output schema:\n- a")


def test_a_large_result_event_carries_its_size_only() -> None:
    assert results.event_fields({"n": 1}) == {"result": {"n": 1}, "size": 7, "large": False}
    big = "é" * results.EVENT_RESULT_MAX
    fields = results.event_fields(big)
    assert fields == {"result": None, "size": 2 * results.EVENT_RESULT_MAX + 2, "large": True}


# -- the record ------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [None, 0, False, "s", [1, "a"], {"n": [True]}, 1.5])
def test_a_result_of_any_json_type_survives_job_json(tmp_path: Path, value: Any) -> None:
    record = JobRecord(id="a1b2c3d4", name="x", kind=JobKind.PI, cwd="/", result=value, output_schema=SCHEMA)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(record.to_json()))
    loaded = load_record(path)
    assert loaded.result == value and loaded.output_schema == SCHEMA


# -- agent definitions -----------------------------------------------------------------------------
def test_a_definition_names_its_schema_inline_or_in_a_file(tmp_path: Path) -> None:
    inline, errors = rules.parse('[output_schema]\ntype = "object"\n', "a", "user", "a.toml")
    assert not errors and inline is not None and inline.output_schema == {"type": "object"}
    assert inline.to_json()["output_schema"] == {"type": "object"}
    assert rules.Definition.from_json(inline.to_json()).output_schema == {"type": "object"}
    for text, why in (
        ('output_schema = "../up.json"\n', "a file name in the definition's folder"),
        ('output_schema = "/etc/x.json"\n', "no absolute path"),
        ("output_schema = 3\n", "expected a table (the schema) or a file name"),
        ('[output_schema]\ntype = "bogus"\n', "not a valid JSON Schema"),
    ):
        defn, errors = rules.parse(text, "b", "user", "b.toml")
        assert defn is None and why in str(errors[0]), errors
        assert errors[0].line is not None
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "good.toml").write_text('output_schema = "s.json"\n')
    (tmp_path / "gone.toml").write_text('description = "d"\noutput_schema = "none.json"\n')
    (tmp_path / "bad.json").write_text('{"type": 5}')
    (tmp_path / "bad.toml").write_text('output_schema = "bad.json"\n')
    defs, errors = store.load_dir(tmp_path, "user")
    assert [d.name for d in defs] == ["good"] and defs[0].output_schema == SCHEMA
    shown = sorted(str(e) for e in errors)
    assert shown[0].startswith(
        f"{tmp_path}/bad.toml:1: output_schema 'bad.json': the output schema is not a valid JSON Schema"
    )
    assert shown[1].startswith(f"{tmp_path}/gone.toml:2: output_schema 'none.json': ")


# -- the worker's Answers --------------------------------------------------------------------------
class FakeLink:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send_reliably(self, op: str, then: Any = None, **args: Any) -> None:
        self.sent.append((op, args))


class Harness:
    def __init__(
        self, schema: dict[str, Any] | None = SCHEMA, spawned: bool = True, extension: bool = True
    ) -> None:
        record = JobRecord(
            id="a1b2c3d4",
            name="x",
            kind=JobKind.PI,
            cwd="/",
            output_schema=schema,
            links=Links(spawned=spawned),
        )
        self.runs = RunTracker()
        self.runs.enter(JobState.RUNNING)
        self.runs.enter(JobState.DONE)
        self.link = FakeLink()
        self.to_ext: list[dict[str, Any]] = []
        self.extension = extension
        self.dir = tempfile.TemporaryDirectory()
        self.answers = Answers(
            record,
            self.runs,
            self.link,
            self.send,  # type: ignore[arg-type]
            Keeper(Path(self.dir.name) / "run.json"),
        )

    def send(self, frame: dict[str, Any]) -> bool:
        if self.extension:
            self.to_ext.append(frame)
        return self.extension

    def answer(self, text: str, cause: RunCause = RunCause.TASK) -> str | None:
        """A run that ends with `text`: settled, checked, handed back; the job's error."""
        runs = self.runs
        runs.next_cause = runs.next_cause or cause
        for event in (
            {"type": "agent_start"},
            {
                "type": "message_end",
                "message": {
                    "role": "assistant",
                    "stopReason": "stop",
                    "content": [{"type": "text", "text": text}],
                },
            },
            {"type": "agent_end"},
        ):
            runs.on_event(event)
        run = runs.settle()
        assert run is not None
        error = self.answers.check(run)
        self.answers.note_settled(run)
        self.answers.hand_back(run)
        return error

    def sent(self, op: str) -> list[dict[str, Any]]:
        return [args for name, args in self.link.sent if name == op]


def test_a_valid_answer_goes_to_roostd_before_its_report_as_json(monkeypatch: Any) -> None:
    h = Harness()
    assert h.answer('{"n": 3}') is None
    assert [name for name, _ in h.link.sent] == ["result", "handback"]
    assert h.sent("result") == [{"value": {"n": 3}}]
    [report] = h.sent("handback")
    assert report["structured"] is True and json.loads(report["result"]) == {"n": 3}
    assert report["state"] == "done" and not h.to_ext


def test_an_invalid_answer_gets_a_note_then_fails(monkeypatch: Any) -> None:
    h = Harness()
    assert h.answer('{"n": -1}') is None
    [note] = h.to_ext
    assert note["event"] == "note" and "at $.n: -1 is less than the minimum of 0" in note["content"]
    assert h.runs.state == JobState.RUNNING and h.runs.next_cause == RunCause.TASK
    assert h.runs.status == "repairing its answer"
    assert not h.link.sent  # no result, and no report for an answer being repaired
    error = h.answer("still not")
    assert error == results.failure(
        ["the answer is not JSON: give the JSON value alone, or in one ```json block"]
    )
    assert h.runs.state == JobState.FAILED and len(h.to_ext) == 1
    [report] = h.sent("handback")
    assert report["state"] == "failed" and report["error"] == error
    assert report["structured"] is False and report["result"] == "still not"
    # A later answer (a user's reply) starts a fresh count: it gets its note again.
    h.runs.enter(JobState.RUNNING)
    h.runs.enter(JobState.DONE)
    assert h.answer("nope", RunCause.REPLY) is None and len(h.to_ext) == 2


def test_the_repairs_are_a_setting(monkeypatch: Any) -> None:
    from roost import config

    monkeypatch.setattr("roost.worker.answers.load_settings", lambda: config.Settings(resultRepairs=2))
    h = Harness()
    assert h.answer("a") is None and h.answer("b") is None
    assert "(1 more chance after this)" in h.to_ext[0]["content"]
    assert h.answer("c") is not None and len(h.to_ext) == 2
    monkeypatch.setattr("roost.worker.answers.load_settings", lambda: config.Settings(resultRepairs=0))
    h = Harness()
    assert h.answer("a") is not None and not h.to_ext


def test_without_an_extension_the_answer_fails_at_once() -> None:
    h = Harness(extension=False)
    assert h.answer("x") is not None and h.runs.state == JobState.FAILED


def test_questions_errors_and_jobs_without_a_schema_are_not_checked() -> None:
    h = Harness(schema=None)
    assert h.answer("plain words") is None
    assert [name for name, _ in h.link.sent] == ["handback"]
    assert h.sent("handback")[0]["structured"] is False
    h = Harness()
    assert h.answer("Shall I go on?") is None  # a question: the job waits for a person
    assert h.runs.state == JobState.NEEDS_INPUT and not h.to_ext


def test_a_result_too_large_for_a_report_says_where_it_is() -> None:
    small = {"n": 1}
    assert json.loads(structured_text(small, "a1b2c3d4")) == small
    mid = {"k": ["x" * 60] * (RESULT_MAX // 70)}  # too long indented, fits compact
    assert json.loads(structured_text(mid, "a1b2c3d4")) == mid
    big = structured_text({"k": "x" * RESULT_MAX}, "a1b2c3d4")
    assert "too large for a report" in big and "roost result a1b2c3d4 --json" in big


def test_a_row_with_a_result_says_so_in_meta_and_show() -> None:
    from roost.display import views

    row = {"id": "a1b2c3d4", "result": {"n": 1}, "pending": {}}
    assert "{…}" in views.meta_text(row, {}, "dir")
    assert "{…}" not in views.meta_text({**row, "result": None}, {}, "dir")
    assert views._result_line(row) == '{"n":1}'
    long = views._result_line({**row, "result": "x" * 500})
    assert long is not None and long.endswith("… (roost result a1b2c3d4)")


def test_a_model_errors_report_keeps_pis_words() -> None:
    h = Harness()
    h.runs.next_cause = RunCause.TASK
    for event in (
        {"type": "agent_start"},
        {
            "type": "message_end",
            "message": {
                "role": "assistant",
                "stopReason": "error",
                "errorMessage": "429 rate limited",
                "content": [],
            },
        },
        {"type": "agent_end"},
    ):
        h.runs.on_event(event)
    run = h.runs.settle()
    assert run is not None and h.answers.check(run) is None  # no answer: not checked
    h.answers.note_settled(run)
    h.answers.hand_back(run)
    [report] = h.sent("handback")
    assert report["state"] == "failed" and report["error"] == "429 rate limited"
    assert not h.to_ext
