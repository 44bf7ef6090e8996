"""An answer is an answer whatever the surface gave it: the web's job page (its reply box and
a dialog's choices), `roost reply` while the job waits, `roost answer` and the web's inbox
all come to one place in roostd, which delivers the answer once and writes down who gave it
and when; every later answer of the same question delivers nothing and says so (real
roostd, fake pi)."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
from kit.lab import Lab
from kit.procs import wait_until
from kit.webserver import WebServer

pytestmark = pytest.mark.timeout(150)


@pytest.fixture
def lab(fake_pi_env: Lab) -> Iterator[Lab]:
    yield fake_pi_env


def user_texts(lab: Lab, job: str) -> list[str]:
    """What reached the job's model from the person: its user messages' texts."""
    out = []
    for entry in lab.session(job):
        message = entry.get("message") or {}
        if entry.get("type") != "message" or message.get("role") != "user":
            continue
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"text": content}]
        out.append("".join(str(p.get("text") or "") for p in parts if isinstance(p, dict)))
    return out


def answered(lab: Lab, job: str) -> dict[str, dict[str, Any]]:
    """The inbox book's answers of `job`'s entries, by entry id."""
    book = json.loads((lab.roost_home / "inbox.json").read_text())
    return {k: v for k, v in book["answered"].items() if v.get("job") == job}


def asking(lab: Lab, name: str = "asker") -> str:
    job = lab.run_job("--name", name, "[[ask]] colours")
    lab.wait_state(job, "needs_input")
    return job


def choosing(lab: Lab) -> str:
    job = lab.run_job("--name", "chooser", "[[dialog select red,green]]")
    lab.wait_state(job, "needs_input")
    wait_until(lambda: lab.row(job)["dialog"], 30, "the dialog open")
    return job


def test_an_answer_on_the_job_page_is_recorded_once(lab: Lab) -> None:
    asker, chooser = asking(lab), choosing(lab)
    question, dialog = lab.row(asker)["question"], lab.row(chooser)["question"]
    with WebServer(lab) as web:
        http = web.paired()
        # The page's question rides with its reply box (the head's hidden field, kept live).
        page = http.get(f"{web.url}/job/{asker}").text
        assert f'name="question" value="{html.escape(question)}" form="reply"' in page, page
        sent = web.post(http, f"/job/{asker}/reply", text="blue", question=question)
        assert sent.status_code == 200 and "notice=" not in str(sent.url), sent.url
        assert lab.wait(asker) == "done"
        # Nobody had listed the inbox: the answer made the entry's id, and wrote it down.
        [(entry, done)] = answered(lab, asker).items()
        assert done["by"].startswith("roost web (")

        later = lab.roost("answer", entry, "red")
        assert later.returncode == 0, later.stderr
        assert later.stdout.startswith(f"already answered by {done['by']} at {done['at']}")
        twice = web.post(http, f"/job/{asker}/reply", text="green", question=question)
        assert f"already answered by {done['by']} at {done['at']}" in unquote(str(twice.url))

        # A dialog's choice on the job page: the same.
        [choice_entry] = [e["id"] for e in lab.cli_json("inbox", "--json") if e["kind"] == "dialog"]
        page = http.get(f"{web.url}/job/{chooser}").text
        assert f'name="question" value="{html.escape(dialog)}">' in page
        chose = web.post(http, f"/job/{chooser}/choice", choice="2", question=dialog)
        assert "notice=" not in str(chose.url), chose.url
        assert lab.wait(chooser) == "done"
        again = web.post(http, f"/job/{chooser}/choice", choice="1", question=dialog)
        assert "already answered by roost web (" in unquote(str(again.url)), again.url
        inbox = web.post(http, f"/inbox/{choice_entry}/answer", choice="1")
        assert "already answered by roost web (" in inbox.text
    cli = lab.roost_ok("answer", choice_entry, "--choice", "1").strip()
    assert cli.startswith("already answered by roost web (")

    wait_until(lambda: "chose: green" in str(lab.session(chooser)), 30, "green chosen")
    assert "chose: red" not in str(lab.session(chooser))
    texts = user_texts(lab, asker)
    assert texts.count("blue") == 1 and "red" not in texts and "green" not in texts, texts


def test_roost_reply_while_the_job_waits_is_its_answer(lab: Lab) -> None:
    asker = asking(lab)
    [entry] = lab.cli_json("inbox", "--json")
    assert lab.roost_ok("reply", asker, "blue").strip() in ("started", "delivered")
    assert lab.wait(asker) == "done"
    later = lab.roost_ok("answer", entry["id"], "red").strip()
    assert later.startswith("already answered by roost reply (CLI) at 20"), later
    with WebServer(lab) as web:
        http = web.paired()
        inbox = web.post(http, f"/inbox/{entry['id']}/answer", text="green")
        assert "already answered by roost reply (CLI) at 20" in inbox.text
        page = web.post(http, f"/job/{asker}/reply", text="green", question=entry["text"])
        assert "already answered by roost reply (CLI) at 20" in unquote(str(page.url))
    texts = user_texts(lab, asker)
    assert texts.count("blue") == 1 and "red" not in texts and "green" not in texts, texts


def test_a_reply_naming_a_question_the_job_no_longer_asks_sends_nothing(lab: Lab) -> None:
    asker = asking(lab)
    question = lab.row(asker)["question"]
    first = lab.roost("reply", asker, "x")  # no question named: it answers what is open
    assert first.returncode == 0 and first.stdout.strip() in ("started", "delivered")
    assert lab.wait(asker) == "done"
    with WebServer(lab) as web:
        http = web.paired()
        other = web.post(http, f"/job/{asker}/reply", text="y", question=question + " (edited)")
        assert "no longer asks that question" in unquote(str(other.url)), other.url
        # Not waiting and no question named: a plain reply, as before.
        plain = web.post(http, f"/job/{asker}/reply", text="one more thing")
        assert "notice=" not in str(plain.url), plain.url
    wait_until(lambda: "one more thing" in user_texts(lab, asker), 30, "the plain reply")
    assert "y" not in user_texts(lab, asker)
