"""Structured results with the fake pi: `roost run --output-schema`, the record, `roost
result`, `ls --json`, the `job.result` event (and its hook), the parent's report as JSON,
agent definitions' default schema, and the bounded repair (README: Structured results).

The fake pi's `[[answers A ;; B]]` answers A, then B to the next model call (roost's note)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit.lab import Lab
from kit.procs import wait_until

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"enum": ["ok", "bad"]}, "count": {"type": "integer"}},
    "required": ["verdict", "count"],
    "additionalProperties": False,
}


def schema_file(env: Lab, schema: Any = None, name: str = "schema.json") -> str:
    path = env.work / name
    path.write_text(json.dumps(SCHEMA if schema is None else schema))
    return str(path)


def events_of(env: Lab, kind: str) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in env.roost_ok("events", "--json", "--type", kind).splitlines()
        if line.strip()
    ]


def roost_notes(env: Lab, job: str) -> list[dict[str, Any]]:
    """roost's notes in the job's session (custom messages of roost's own type)."""
    return [e for e in env.session(job) if e.get("customType") == "pi-roost-note"]


def test_a_valid_answer_is_the_jobs_result_everywhere(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    hook_out = env.work / "hook.jsonl"
    env.configure(hooks={"job.result": ["sh", "-c", f"cat >> {hook_out}; echo >> {hook_out}"]})
    job = env.run_job(
        "--output-schema", schema_file(env), '[[answers {"verdict": "ok", "count": 3}]] check it'
    )
    assert env.wait(job) == "done"
    value = {"verdict": "ok", "count": 3}
    assert env.record(job)["result"] == value
    assert env.record(job)["outputSchema"] == SCHEMA
    assert env.row(job)["result"] == value  # ls --json
    assert env.cli_json("result", job, "--json") == value
    readable = env.roost_ok("result", job)
    assert json.loads(readable) == value and "\n  " in readable  # indented
    # The task asks for it in roost's words, with the schema.
    task = env.show(job)["task"]
    assert "[roost] This job's final answer must be a JSON value valid against" in task
    assert '"verdict"' in task
    [event] = events_of(env, "job.result")
    assert event["job"]["id"] == job and event["result"] == value
    assert event["size"] == len(json.dumps(value, separators=(",", ":"))) and not event["large"]
    hooked = wait_until(
        lambda: hook_out.exists() and hook_out.read_text().strip(), 20, what="the job.result hook"
    )
    assert json.loads(hooked.splitlines()[0])["result"] == value
    assert 'result: {"verdict":"ok","count":3}' in env.roost_ok("events", "--type", "job.result")
    assert 'result  {"verdict":"ok","count":3}' in env.roost_ok("show", job)
    assert "{…}" in env.roost_ok("ls", "--wide")  # META: it has a result


def test_a_large_result_event_carries_only_its_size(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    big = {"text": "x" * 5000}
    job = env.run_job(
        "--output-schema", schema_file(env, {"type": "object"}), f"[[answers {json.dumps(big)}]]"
    )
    assert env.wait(job) == "done"
    [event] = events_of(env, "job.result")
    assert event["large"] is True and event["result"] is None and event["size"] > 5000
    assert env.cli_json("result", job, "--json") == big


def test_an_answer_in_one_json_block_counts(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job(
        "--output-schema",
        schema_file(env),
        '[[answers Here it is:\n```json\n{"verdict": "bad", "count": 0}\n```\n]]',
    )
    assert env.wait(job) == "done"
    assert env.cli_json("result", job, "--json") == {"verdict": "bad", "count": 0}


def test_an_invalid_answer_is_repaired_after_one_note(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job(
        "--output-schema",
        schema_file(env),
        '[[answers {"verdict": "maybe"} ;; {"verdict": "ok", "count": 1}]]',
    )
    assert env.wait(job) == "done"
    assert env.cli_json("result", job, "--json") == {"verdict": "ok", "count": 1}
    notes = roost_notes(env, job)
    assert len(notes) == 1
    text = notes[0]["content"]
    assert text.startswith("[roost] Your final answer is not valid against this job's output schema")
    assert "'count' is a required property" in text and "'maybe' is not one of" in text
    assert "not from the user" in text
    assert env.row(job)["state"] == "done" and env.show(job)["error"] is None


def test_a_second_invalid_answer_fails_the_job_with_the_errors(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job(
        "--output-schema",
        schema_file(env),
        '[[answers not json at all ;; {"verdict": "ok"} ;; {"verdict": "ok", "count": 1}]]',
    )
    env.wait_state(job, "failed", timeout=60)
    shown = env.show(job)
    assert shown["error"].startswith("the final answer is not valid against the output schema")
    assert "'count' is a required property" in shown["error"]
    assert shown["result"] is None
    assert len(roost_notes(env, job)) == 1  # resultRepairs = 1: one note, then the failure
    [failed] = events_of(env, "job.failed")
    assert "'count' is a required property" in failed["error"]
    assert not events_of(env, "job.result")
    out = env.roost("result", job)
    assert out.returncode == 1 and "has no valid result yet" in out.stderr


def test_result_repairs_is_a_setting(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(resultRepairs=0)
    job = env.run_job(
        "--output-schema", schema_file(env), '[[answers {"verdict": "ok"} ;; {"verdict": "ok", "count": 1}]]'
    )
    env.wait_state(job, "failed", timeout=60)
    assert not roost_notes(env, job)


def test_bad_schemas_are_refused_with_one_line(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    (env.work / "bad.json").write_text("{not json")
    (env.work / "list.json").write_text("[1]")
    cases = [
        (str(env.work / "missing.json"), "cannot read the output schema"),
        (str(env.work / "bad.json"), "is not JSON"),
        (str(env.work / "list.json"), "must hold a JSON object"),
        (
            schema_file(env, {"type": "bogus"}, "invalid.json"),
            "the output schema is not a valid JSON Schema: at $.type",
        ),
        (schema_file(env, {"$ref": "https://example.com/s.json"}, "remote.json"), "points outside it"),
    ]
    for path, why in cases:
        out = env.roost("run", "--output-schema", path, "task")
        assert out.returncode == 2, (path, out)
        assert why in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    out = env.roost("run", "--shell", "--output-schema", schema_file(env), "--", "true")
    assert out.returncode == 2 and "for pi jobs" in out.stderr
    assert env.ls() == []
    plain = env.run_job("hello")
    env.wait(plain)
    out = env.roost("result", plain)
    assert out.returncode == 1 and "has no output schema" in out.stderr


def test_the_parent_gets_the_result_as_json(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    args = {"task": '[[answers {"verdict": "ok", "count": 2}]]', "output_schema": SCHEMA}
    parent = env.run_job(f"[[spawn-args {json.dumps(args)}]]")
    child = wait_until(lambda: env.children(parent), 60, what="the child")[0]["id"]
    assert env.wait(child) == "done"
    assert env.record(child)["outputSchema"] == SCHEMA

    def report() -> dict[str, Any] | None:
        items = env.mailbox_files(parent, "cur") + env.mailbox_files(parent, "new")
        return next((i for i in items if i.get("kind") == "report"), None)

    item = wait_until(report, 30, what="the child's report")
    assert item["structured"] is True
    assert json.loads(item["result"]) == {"verdict": "ok", "count": 2}
    from roost.agents.envelope import report_body

    body = report_body(item)
    assert "result: JSON, valid against the output schema it was given" in body


def test_a_repaired_childs_report_is_its_valid_result_only(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    args = {
        "task": '[[answers {"verdict": 1} ;; {"verdict": "bad", "count": 5}]]',
        "output_schema": json.dumps(SCHEMA),
    }  # a model may send the schema as text
    parent = env.run_job(f"[[spawn-args {json.dumps(args)}]]")
    child = wait_until(lambda: env.children(parent), 60, what="the child")[0]["id"]
    assert env.wait(child) == "done"
    wait_until(
        lambda: [
            i
            for i in env.mailbox_files(parent, "cur") + env.mailbox_files(parent, "new")
            if i.get("kind") == "report"
        ],
        30,
        what="the report",
    )
    env.wait(parent)
    reports = [
        i
        for i in env.mailbox_files(parent, "cur") + env.mailbox_files(parent, "new")
        if i.get("kind") == "report"
    ]
    assert len(reports) == 1, reports
    assert json.loads(reports[0]["result"]) == {"verdict": "bad", "count": 5}


def test_an_agent_definition_names_a_default_schema(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    agents = Path(env.agent_dir) / "roost" / "agents"
    agents.mkdir(parents=True)
    (agents / "verdict.json").write_text(json.dumps(SCHEMA))
    (agents / "judge.toml").write_text('description = "judges"\noutput_schema = "verdict.json"\n')
    (agents / "inline.toml").write_text(
        'description = "inline"\n[output_schema]\ntype = "object"\nrequired = ["n"]\n'
    )
    (agents / "broken.toml").write_text('description = "broken"\noutput_schema = "../x.json"\n')
    (agents / "missing.toml").write_text('description = "m"\noutput_schema = "nope.json"\n')
    job = env.run_job("--agent", "judge", '[[answers {"verdict": "ok", "count": 7}]]')
    assert env.wait(job) == "done"
    assert env.record(job)["outputSchema"] == SCHEMA
    assert env.cli_json("result", job, "--json") == {"verdict": "ok", "count": 7}
    inline = env.run_job("--agent", "inline", '[[answers {"n": 1}]]')
    assert env.wait(inline) == "done"
    assert env.cli_json("result", inline, "--json") == {"n": 1}
    check = env.roost("agents", "check")
    shown = check.stdout + check.stderr
    assert "broken.toml:2: output_schema: a file name in the definition's folder" in shown
    assert "missing.toml:2: output_schema 'nope.json'" in shown
    # An explicit schema wins over the definition's.
    other = env.run_job(
        "--agent", "judge", "--output-schema", schema_file(env, {"type": "array"}), "[[answers [1, 2] ]]"
    )
    assert env.wait(other) == "done"
    assert env.cli_json("result", other, "--json") == [1, 2]


def test_run_each_gives_every_job_the_schema(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    (env.work / "tasks.txt").write_text("a [[answers 1]]\nb [[answers 2]]\n")
    out = env.roost_ok(
        "run", "--each", str(env.work / "tasks.txt"), "--output-schema", schema_file(env, {"type": "integer"})
    )
    jobs = out.split()
    assert len(jobs) == 2
    for job, value in zip(jobs, (1, 2), strict=True):
        assert env.wait(job) == "done"
        assert env.record(job)["outputSchema"] == {"type": "integer"}
        assert env.cli_json("result", job, "--json") == value


def test_a_fan_in_with_results_gets_each_structured_result(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    schema = schema_file(env)
    a = env.run_job("--name", "ra", "--output-schema", schema, '[[answers {"verdict": "ok", "count": 1}]]')
    b = env.run_job(
        "--name",
        "rb",
        "--output-schema",
        schema,
        '[[answers {"verdict": "bad"} ;; {"verdict": "bad", "count": 9}]]',
    )
    summary = env.run_job(
        "--after",
        f"{a},{b}",
        "--with-results",
        "--output-schema",
        schema_file(env, {"type": "array"}, "summary.json"),
        "[[answers [1, 9] ]] sum up",
    )
    assert env.wait(summary) == "done"
    task = next(
        e["message"]["content"][0]["text"]
        for e in env.session(summary)
        if (e.get("message") or {}).get("role") == "user"
    )
    for job, value in ((a, {"verdict": "ok", "count": 1}), (b, {"verdict": "bad", "count": 9})):
        frame = task.split(f'id="{job}"', 1)[1].split("</agent-message>", 1)[0]
        assert "structured result (JSON):" in frame
        assert json.loads(frame.split("structured result (JSON):\n", 1)[1]) == value
    assert env.cli_json("result", summary, "--json") == [1, 9]


def test_a_scheduled_run_takes_an_output_schema(fake_pi_env: Lab) -> None:
    """`roost schedule add --output-schema`: each firing's job is checked against it."""
    env = fake_pi_env
    bad = env.roost(
        "schedule",
        "add",
        "nightly",
        "--every",
        "1h",
        "--output-schema",
        schema_file(env, {"type": "bogus"}, "bogus.json"),
        "check it",
    )
    assert bad.returncode == 2 and "not a valid JSON Schema" in bad.stderr, bad.stderr
    env.roost_ok(
        "schedule",
        "add",
        "nightly",
        "--every",
        "1h",
        "--output-schema",
        schema_file(env),
        '[[answers {"verdict": "bad", "count": 2}]] check it',
    )
    env.roost_ok("schedule", "run-now", "nightly")
    job = wait_until(
        lambda: (r := env.cli_json("schedule", "show", "nightly", "--json"))["jobs"] and r["jobs"][0],
        30,
        what="the firing's job",
    )
    assert env.wait(job) == "done"
    assert env.record(job)["outputSchema"] == SCHEMA
    assert env.cli_json("result", job, "--json") == {"verdict": "bad", "count": 2}
