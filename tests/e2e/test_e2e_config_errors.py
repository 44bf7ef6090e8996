"""End-to-end: a run that cannot start says why (docs: First steps, Pointing pi at a model).

The real pi, each configuration problem made for real: no model at all (a fresh agent dir),
an unknown model, an extension that throws at load, and a provider that refuses the key.
Each ends `failed` at once (no restart backoff) with pi's words and one fix line in
`roost ls`, `roost show`, `roost wait` and the event log; the item that started the run
stays in the mailbox, and `roost start` after the fix delivers it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kit.lab import Lab
from kit.procs import wait_until
from kit.testpi import make_agent_dir

from roost.events import log as eventlog
from roost.fakellm import FakeLLM, error, first_user_contains, last_user_contains, text
from roost.pi.locate import find_pi

T = 60.0


@pytest.fixture
def lab() -> Iterator[Lab]:
    lab = Lab()  # a fresh pi agent dir: no models.json, no settings, no API key
    try:
        yield lab
    finally:
        print(lab.diagnostics())
        lab.close()


def events_of(lab: Lab, job: str, kind: str | None = None) -> list[dict[str, object]]:
    return [
        e
        for e in eventlog.read_events(lab.roost_home)
        if (e["job"] or {}).get("id") == job and (kind is None or e["type"] == kind)
    ]


def error_of(lab: Lab, job: str) -> str:
    """The job's `error` (`roost show --json`)."""
    return str(lab.cli_json("show", job, "--json").get("error") or "")


def test_no_model_fails_within_seconds_and_start_after_the_fix_delivers_the_task(
    lab: Lab, llm: FakeLLM
) -> None:
    began = time.monotonic()
    job = lab.run("CFG-HELLO say hello")
    assert lab.wait(job, timeout=T) == "failed"  # `roost wait` returns, no time-out
    took = time.monotonic() - began
    # 5 s is the target on the default pi (it boots in ~0.3 s); 0.73.1 boots in 1.2-3 s.
    limit = 5.0 if (find_pi().package or "").startswith("@earendil-works") else 10.0
    assert took < limit, f"{took:.1f}s to a visible failure"
    shown = error_of(lab, job)
    assert "No API key found" in shown, shown
    assert "fix: no model configured" in shown and f"roost start {job}" in shown
    assert lab.row(job)["summary"] == shown  # `roost ls` shows it in its SUMMARY column
    assert "No API key found" in lab.roost_ok("show", job)
    waited = lab.roost("wait", job)  # exit 1: `roost wait J && next` stops on a failure
    assert waited.returncode == 1, waited
    assert waited.stdout == "failed\n" and f"roost: job {job} failed: pi: No API key" in waited.stderr
    (failed,) = events_of(lab, job, "job.failed")
    assert "No API key found" in str(failed["error"])
    assert not events_of(lab, job, "worker.crashed")  # not a crash: no restart backoff
    assert [item["seq"] for item in lab.mailbox_files(job)] == [1]  # the task, kept

    # The fix, from the message: a model pi knows (here the lab's scripted one).
    make_agent_dir(lab.agent_dir, llm.base_url)
    llm.add(first_user_contains("CFG-HELLO"), text("hello to you"))
    lab.cli("start", job)
    assert lab.wait(job, timeout=T) == "done"
    assert len(llm.requests_matching(first_user_contains("CFG-HELLO"))) == 1
    assert lab.row(job)["summary"] == "hello to you" and not error_of(lab, job)
    assert lab.mailbox_files(job) == []


def test_an_unknown_model_fails_at_once_with_pis_words(lab: Lab) -> None:
    job = lab.run_job("--model", "nope/x", "CFG-NOPE")
    assert lab.wait(job, timeout=T) == "failed"
    error_text = error_of(lab, job)
    assert 'Model "nope/x" not found' in error_text and f"roost start {job}" in error_text
    assert not events_of(lab, job, "worker.crashed")  # no crash loop
    assert len(lab.mailbox_files(job)) == 1


def test_an_extension_that_throws_at_load_fails_the_job(lab: Lab, llm: FakeLLM) -> None:
    make_agent_dir(lab.agent_dir, llm.base_url)
    broken = lab.agent_dir / "extensions" / "boom.ts"
    broken.parent.mkdir()
    broken.write_text("export default function () { throw new Error('boom at load'); }\n")
    job = lab.run("CFG-EXT")
    assert lab.wait(job, timeout=T) == "failed"
    error_text = error_of(lab, job)
    assert "boom at load" in error_text and str(broken) in error_text, error_text
    assert not events_of(lab, job, "worker.crashed")


def test_a_refused_key_ends_the_run_with_the_providers_words(lab: Lab, llm: FakeLLM) -> None:
    make_agent_dir(lab.agent_dir, llm.base_url, settings={"retry": {"maxRetries": 0}})
    llm.add(first_user_contains("CFG-401"), error(401, "Incorrect API key provided"), times=1)
    job = lab.run("CFG-401")
    assert lab.wait(job, timeout=T) == "failed"
    shown = error_of(lab, job)
    assert "401" in shown and "Incorrect API key provided" in shown, shown
    assert 'provider "fake" refused the credentials' in shown
    assert lab.row(job)["summary"].startswith("error: 401")
    wait_until(lambda: events_of(lab, job, "job.failed"), T, "job.failed")
    # pi still runs: after the fix a reply continues, and the row's error is cleared.
    llm.add(last_user_contains("CFG-AGAIN"), text("working now"))
    assert lab.reply(job, "CFG-AGAIN continue") == "started"
    assert lab.wait(job, timeout=T) == "done"
    assert lab.row(job)["summary"] == "working now" and not error_of(lab, job)


def test_a_broken_models_json_is_named(lab: Lab) -> None:
    (lab.agent_dir / "models.json").write_text('{"providers": {')  # pi says nothing of it
    job = lab.run("CFG-BROKEN")
    assert lab.wait(job, timeout=T) == "failed"
    shown = error_of(lab, job)
    assert "No API key found" in shown and "pi could not read models.json (" in shown, shown
