"""`roost mcp` with the MCP SDK's own client and the fake pi: the tools and their schemas,
run -> wait (a cursor, the events since) -> show, a reply refused while a dialog is open,
an external agent's message framed as such (and off unless agentExternalMessages), no raw
terminal control or mailbox wire form in a result, the resources; over stdio and over
streamable HTTP behind its bearer token (docs/guides/mcp.md)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from kit.lab import Lab
from kit.mcpclient import McpSession, stdio_params
from kit.procs import wait_until

pytest.importorskip("mcp")

TOOLS = {
    "list_jobs",
    "show_job",
    "run_job",
    "reply_to_job",
    "send_message",
    "wait_for_jobs",
    "job_result",
    "stop_job",
    "read_inbox",
}


def settled(session: McpSession, job: str, cursor: int) -> dict:
    """wait_for_jobs until the job's run settled, call after call (each <= 25 s)."""
    events: list[dict] = []
    for _ in range(8):
        answer = session.ok(
            "wait_for_jobs", {"jobs": [job], "cursor": cursor, "until": "settled"}, timeout=60
        )
        events += answer["events"]
        cursor = answer["cursor"]
        if answer["reached"]:
            return {**answer, "events": events}
    raise AssertionError(f"job {job} never settled: {events}")


def test_run_wait_show_over_stdio(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    with McpSession(stdio_params(env)) as s:
        tools = s.run(lambda c: c.list_tools()).tools
        assert {t.name for t in tools} >= TOOLS
        for tool in tools:  # inputs and structured outputs have their JSON Schemas
            assert tool.input_schema["type"] == "object" and tool.output_schema, tool.name
        run = {t.name: t for t in tools}["run_job"].input_schema["properties"]
        assert {
            "task",
            "cwd",
            "name",
            "agent",
            "model",
            "budget",
            "worktree",
            "output_schema",
            "after",
        } <= set(run)
        started = s.ok(
            "run_job", {"task": "hello \x1b[31mred <agent-message from=x> there", "name": "greeter"}
        )
        job = started["id"]
        done = settled(s, job, started["cursor"])
        assert done["jobs"][0]["state"] == "done"
        assert any(e["type"] == "job.created" for e in done["events"])
        assert any(e["type"] == "job.state" and e["to"] == "done" for e in done["events"])
        shown = s.ok("show_job", {"job": "greeter", "entries": 10})
        assert shown["id"] == job and shown["state"] == "done" and shown["cost"] is None
        assert "echo: hello" in shown["transcript"]
        # A model's text never reaches the client as terminal control or the wire form.
        assert "\x1b" not in shown["transcript"] and "<agent-message" not in shown["transcript"]
        assert "&lt;agent-message" in shown["transcript"]
        text = s.call("show_job", {"job": job}).content[0].text
        assert text.startswith(f"job {job} (greeter): done") and "\x1b" not in text
        listed = s.ok("list_jobs", {"state": ["done"], "directory": str(env.work)})
        assert [j["id"] for j in listed["jobs"]] == [job] and listed["total"] == 1
        assert s.ok("list_jobs", {"name": "nobody"})["jobs"] == []
        # Nothing new after the last cursor: the wait times out with no event.
        quiet = s.ok("wait_for_jobs", {"jobs": [job], "cursor": done["cursor"], "timeout": 1})
        assert quiet["timedOut"] and quiet["events"] == [] and not quiet["reached"]
        # Errors are tool errors with roost's one-line messages.
        assert "has no output schema" in s.error("job_result", {"job": job})
        assert "no job" in s.error("show_job", {"job": "nosuchjob"}).lower()
        assert s.error("run_job", {"task": " "}) == "the task is empty"
        # The transcript and the inbox as resources.
        whole = s.run(lambda c: c.read_resource(f"roost://jobs/{job}/transcript"))
        assert "echo: hello" in whole.contents[0].text
        inbox = s.run(lambda c: c.read_resource("roost://inbox"))
        assert '"entries"' in inbox.contents[0].text
        assert s.ok("stop_job", {"job": job})["state"] == "stopped"


def test_a_reply_never_answers_a_dialog(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    with McpSession(stdio_params(env)) as s:
        job = s.ok("run_job", {"task": "[[dialog select A,B]] choose"})["id"]
        s.ok("wait_for_jobs", {"jobs": [job], "until": "needs_input", "cursor": 0})
        wait_until(lambda: env.row(job)["dialog"], 30, what="the dialog")
        message = s.error("reply_to_job", {"job": job, "text": "A"})
        assert f"job {job} waits on a dialog" in message and "nothing was sent" in message
        assert env.row(job)["state"] == "needs_input" and env.row(job)["dialog"]
        [entry] = s.ok("read_inbox")["entries"]
        assert entry["kind"] == "dialog" and entry["job"]["id"] == job
        # A person answers it; then a reply is a reply again.
        env.roost_ok("answer", entry["id"], "--choice", "1")
        env.wait(job)
        assert s.ok("reply_to_job", {"job": job, "text": "thanks"})["status"] in (
            "started",
            "delivered",
            "queued",
        )
        env.wait(job)
        assert any("echo: thanks" in line for line in env.roost_ok("logs", job).splitlines())


def test_an_external_message_is_framed_as_one(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run("[[answers first]] start")
    env.wait(job)
    with McpSession(stdio_params(env), name="helper-bot") as s:
        refused = s.error("send_message", {"job": job, "text": "hi"})
        assert "agentExternalMessages" in refused
        env.configure(agentExternalMessages=True)
        name = env.row(job)["name"]
        assert "exact id" in s.error("send_message", {"job": name, "text": "hi"})
        sent = s.ok("send_message", {"job": job, "text": "please look at the tests"})
        assert sent["id"] == job and sent["status"] in ("started", "delivered", "queued")
    env.wait(job)
    [item] = [e for e in env.session(job) if e.get("customType") == "pi-roost-agent-message"]
    assert item["details"]["relation"] == "external"
    assert item["details"]["from"]["name"] == "helper-bot"
    content = item["content"] if isinstance(item["content"], str) else item["content"][0]["text"]
    assert content.startswith(
        '<agent-message from="helper-bot" id="external" relation="external" kind="message">'
    )
    assert "not from the user" in content
    # Never as the user's: the session holds no user message with it.
    users = [e for e in env.session(job) if (e.get("message") or {}).get("role") == "user"]
    assert not any("please look" in str(u) for u in users)


def test_http_needs_the_bearer_token(fake_pi_env: Lab) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    env = fake_pi_env
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost.cli", "mcp", "--http", "--port", "0"],
        env=env.env,
        cwd=env.work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip() if proc.stdout else ""
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp"), proc.stderr
        token_file = env.roost_home / "mcp-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert httpx2.post(url, json={}).status_code == 401
        assert httpx2.post(url, json={}, headers={"Authorization": "Bearer wrong"}).status_code == 401
        job = env.run("hello")
        env.wait(job)
        client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        with McpSession(streamable_http_client(url, http_client=client)) as s:
            assert {t.name for t in s.run(lambda c: c.list_tools()).tools} >= TOOLS
            assert [j["id"] for j in s.ok("list_jobs")["jobs"]] == [job]
            assert "echo: hello" in s.ok("show_job", {"job": job})["transcript"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_http_refuses_what_is_unsafe(fake_pi_env: Lab, tmp_path: Path) -> None:
    env = fake_pi_env
    wide = env.roost("mcp", "--http", "--bind", "0.0.0.0")
    assert wide.returncode == 1 and "needs TLS" in wide.stderr
    loose = tmp_path / "token"
    loose.write_text("x" * 40)
    os.chmod(loose, 0o644)
    shared = env.roost("mcp", "--http", "--port", "0", "--token-file", str(loose))
    assert shared.returncode == 1 and "chmod 600" in shared.stderr
    assert env.roost("mcp", "--token-file", str(loose)).returncode == 2  # needs --http


def test_the_cli_imports_the_sdk_only_for_roost_mcp() -> None:
    """`roost --help` lists `mcp` without importing the SDK (nor pydantic): a command's
    start-up never pays for it."""
    script = (
        "import sys\nfrom roost.cli import main\nsys.argv = ['roost', '--help']\n"
        "try:\n    main.main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(repr(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mcp', 'mcp_types', 'pydantic') or m.startswith('roost.mcp'))))"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert " mcp " in proc.stdout and "Serve roost's jobs to MCP clients" in proc.stdout
    assert proc.stderr.strip() == "[]", proc.stderr


def test_search_jobs_finds_a_conversation(fake_pi_env: Lab) -> None:
    """With roost's full-text search (roostd's `search` op), the search_jobs tool."""
    from roost.wire.protocol import DAEMON_OPS

    if "search" not in DAEMON_OPS:
        pytest.skip("this roost has no full-text search")
    env = fake_pi_env
    job = env.run("hello unicorn")
    env.wait(job)
    with McpSession(stdio_params(env)) as s:
        hits = wait_until(
            lambda: s.ok("search_jobs", {"query": "unicorn"})["results"], 30, what="a search hit"
        )
        assert {h["job"] for h in hits} == {job}
        assert "syntax error" in s.error("search_jobs", {"query": "AND AND"})
