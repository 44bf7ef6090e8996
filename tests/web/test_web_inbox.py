"""The attention inbox, one source for `roost inbox`, `roost answer` and `roost web`
(roostd's `inbox` and `answer` ops), on a real roostd with the fake pi."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kit.lab import Lab
from kit.procs import wait_until
from kit.webserver import WebServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def lab(fake_pi_env: Lab) -> Iterator[Lab]:
    yield fake_pi_env


def waiting_jobs(lab: Lab) -> tuple[str, str, str]:
    asker = lab.run_job("--name", "asker", "[[ask]] colours")
    chooser = lab.run_job("--name", "chooser", "[[dialog select red,green]]")
    broken = lab.run_job("--name", "broken", "--shell", "--", "false")
    lab.wait_state(asker, "needs_input")
    lab.wait_state(chooser, "needs_input")
    lab.wait_state(broken, "failed")
    wait_until(lambda: lab.row(chooser)["dialog"], 30, "the dialog open")
    return asker, chooser, broken


def by_kind(lab: Lab) -> dict[str, dict]:
    return {e["kind"]: e for e in lab.cli_json("inbox", "--json")}


def test_the_inbox_lists_what_waits_with_stable_ids(lab: Lab) -> None:
    asker, chooser, broken = waiting_jobs(lab)
    found = lab.cli_json("inbox", "--json")
    assert {e["kind"] for e in found} == {"question", "dialog", "failed"}
    for entry in found:
        assert {"id", "job", "kind", "text"} <= set(entry)
        assert set(entry["job"]) == {"id", "name"}
    entries = by_kind(lab)
    assert entries["question"]["job"] == {"id": asker, "name": "asker"}
    assert entries["question"]["text"] == lab.row(asker)["question"]
    assert entries["dialog"]["options"] == ["red", "green"]
    assert entries["failed"]["job"]["id"] == broken
    assert lab.cli_json("inbox", "--json") == found  # the same ids on every call
    lab.roost_ok("daemon", "stop")
    assert [e["id"] for e in lab.cli_json("inbox", "--json")] == [e["id"] for e in found]
    text = lab.roost_ok("inbox")
    assert f"{entries['dialog']['id']}  chooser  dialog:" in text and "    2. green" in text


def test_answering_is_idempotent_across_surfaces(lab: Lab) -> None:
    asker, chooser, _ = waiting_jobs(lab)
    entries = by_kind(lab)
    question, dialog = entries["question"]["id"], entries["dialog"]["id"]
    assert lab.roost_ok("answer", question, "blue").strip() in (f"started ({asker})", f"delivered ({asker})")
    again = lab.roost_ok("answer", question, "red").strip()
    assert again.startswith("already answered by roost answer (CLI) at 20")
    assert question not in [e["id"] for e in lab.cli_json("inbox", "--json")]

    with WebServer(lab) as web:
        http = web.paired()
        page = http.get(web.url + "/inbox").text
        assert dialog in page and 'name="choice" value="2">green</button>' in page
        answered = web.post(http, f"/inbox/{dialog}/answer", choice="2")
        assert answered.status_code == 200 and str(answered.url) == web.url + "/inbox"
        assert lab.wait(chooser) == "done"
        twice = web.post(http, f"/inbox/{dialog}/answer", choice="1")
        assert "already answered by roost web (" in twice.text
    cli = lab.roost_ok("answer", dialog, "--choice", "1").strip()
    assert cli.startswith("already answered by roost web (")
    wait_until(lambda: "chose: green" in str(lab.session(chooser)), 30, "green chosen once")
    assert "chose: red" not in str(lab.session(chooser))


def test_a_failure_is_dismissed_not_replied_to(lab: Lab) -> None:
    broken = lab.run_job("--name", "broken", "--shell", "--", "false")
    lab.wait_state(broken, "failed")
    [entry] = lab.cli_json("inbox", "--json")
    refused = lab.roost("answer", entry["id"], "hello")
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"roost: {entry['id']} is a failed: there is nothing to reply; `roost start {broken}`, or dismiss it"
    )
    assert lab.roost_ok("answer", entry["id"], "--dismiss").strip() == f"dismissed ({broken})"
    assert lab.cli_json("inbox", "--json") == []


def test_a_question_asked_again_gets_a_new_id(lab: Lab) -> None:
    asker = lab.run_job("--name", "asker", "[[ask]] one")
    lab.wait_state(asker, "needs_input")
    [first] = lab.cli_json("inbox", "--json")
    lab.roost_ok("answer", first["id"], "[[ask]] one")  # the same question comes back
    wait_until(lambda: lab.cli_json("inbox", "--json"), 30, "the next question")
    [second] = lab.cli_json("inbox", "--json")
    assert second["id"] != first["id"]


def test_answer_usage_errors(lab: Lab) -> None:
    assert lab.roost("answer", "abc").returncode == 2
    assert lab.roost("answer", "abc", "x", "--choice", "1").returncode == 2
    missing = lab.roost("answer", "nosuch", "x")
    assert missing.returncode == 2 and "no open inbox entry nosuch" in missing.stderr
