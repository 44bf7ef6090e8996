"""`roost acp` with the agent-client-protocol package's own client side (the agent spawned
over stdio, as an editor does) and the fake pi: a streamed turn, a tool call, a cancel
that keeps the job, a dialog as a permission request answered into its inbox entry, a job
started from the CLI opened in the editor (its transcript replayed, a reply from the CLI
shown as it arrives), the job a roost job throughout (docs/guides/editors.md)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from kit.lab import Lab
from kit.procs import wait_until

pytest.importorskip("acp")

from acp import text_block  # noqa: E402
from kit.acpclient import Editor, roost_acp  # noqa: E402


def test_streamed_turn_then_a_second_one(fake_pi_env: Lab) -> None:
    lab = fake_pi_env

    async def scenario() -> None:
        editor = Editor()
        async with roost_acp(lab, editor) as conn:
            sid = (await conn.new_session(cwd=str(lab.work))).session_id
            assert sid.startswith("acp-")
            done = await conn.prompt(session_id=sid, prompt=[text_block("[[stream 6 60]]")])
            assert done.stop_reason == "end_turn"
            chunks = editor.of(sid, "agent_message_chunk")
            assert editor.text(sid) == "streamed: w1 w2 w3 w4 w5 w6"
            assert len(chunks) > 1  # streamed as pi streamed it, not one message at the end
            assert editor.of(sid, "user_message_chunk") == []  # the editor shows its own prompt
            # The job is roost's: named after the session, seen by roost ls.
            row = await asyncio.to_thread(lab.show, sid)
            assert row["state"] == "done" and row["cwd"] == str(lab.work)
            again = await conn.prompt(session_id=sid, prompt=[text_block("and again")])
            assert again.stop_reason == "end_turn"
            assert editor.text(sid).endswith("echo: and again")
            assert editor.of(sid, "user_message_chunk") == []
        # The editor went: the job stays, supervised.
        assert (await asyncio.to_thread(lab.show, sid))["state"] == "done"

    asyncio.run(scenario())


def test_tool_call_with_its_status_and_result(fake_pi_env: Lab) -> None:
    lab = fake_pi_env

    async def scenario() -> None:
        editor = Editor()
        async with roost_acp(lab, editor) as conn:
            sid = (await conn.new_session(cwd=str(lab.work))).session_id
            done = await conn.prompt(session_id=sid, prompt=[text_block("[[sleep 0.5]]")])
            assert done.stop_reason == "end_turn"
            starts = editor.of(sid, "tool_call")
            assert len(starts) == 1 and starts[0].title.startswith("sleep")
            call = starts[0].tool_call_id
            progress = [u for u in editor.of(sid, "tool_call_update") if u.tool_call_id == call]
            assert progress[-1].status == "completed"
            assert 'sleep {"seconds": 0.5} done' in progress[-1].content[0].content.text
            assert editor.text(sid) == "echo: [[sleep 0.5]]"

    asyncio.run(scenario())


def test_cancel_ends_the_turn_and_keeps_the_job(fake_pi_env: Lab) -> None:
    lab = fake_pi_env

    async def scenario() -> None:
        editor = Editor()
        async with roost_acp(lab, editor) as conn:
            sid = (await conn.new_session(cwd=str(lab.work))).session_id
            turn = asyncio.create_task(
                conn.prompt(session_id=sid, prompt=[text_block("[[hold never-open]]")])
            )
            await editor.until(lambda: editor.of(sid, "tool_call"))
            await conn.cancel(session_id=sid)
            done = await asyncio.wait_for(turn, 60)
            assert done.stop_reason == "cancelled"
            row = await asyncio.to_thread(lab.show, sid)
            assert row["state"] == "done"  # the run was aborted, not the job stopped
            after = await conn.prompt(session_id=sid, prompt=[text_block("still there?")])
            assert after.stop_reason == "end_turn"
            assert editor.text(sid).endswith("echo: still there?")

    asyncio.run(scenario())


def test_dialog_is_a_permission_request_answered_once(fake_pi_env: Lab) -> None:
    lab = fake_pi_env

    async def scenario() -> None:
        editor = Editor(choose=lambda options: options[1].option_id)
        async with roost_acp(lab, editor) as conn:
            sid = (await conn.new_session(cwd=str(lab.work))).session_id
            done = await conn.prompt(session_id=sid, prompt=[text_block("[[dialog select a,b]]")])
            assert done.stop_reason == "end_turn"
            [(call, options)] = editor.permissions
            assert [o.name for o in options] == ["a", "b"]
            assert "Pick one" in call.title
            assert editor.text(sid).endswith("chose: b")
        # Answered in the inbox, as every surface answers: by the editor, once.
        book = json.loads((lab.roost_home / "inbox.json").read_text())
        [(entry, answer)] = book["answered"].items()
        assert answer["by"] == "acp" and answer["job"] == (await asyncio.to_thread(lab.show, sid))["id"]
        again = await asyncio.to_thread(lab.roost, "answer", entry, "a")
        assert "already answered" in again.stdout + again.stderr
        assert await asyncio.to_thread(lab.request, "inbox") == {"entries": []}

    asyncio.run(scenario())


def test_a_dialog_answered_elsewhere_first_ends_the_editors_wait(fake_pi_env: Lab) -> None:
    lab = fake_pi_env

    async def scenario() -> None:
        editor = Editor(choose=lambda options: "wait")
        async with roost_acp(lab, editor) as conn:
            sid = (await conn.new_session(cwd=str(lab.work))).session_id
            turn = asyncio.create_task(
                conn.prompt(session_id=sid, prompt=[text_block("[[dialog select a,b]]")])
            )
            await editor.until(lambda: editor.permissions)
            entries = (await asyncio.to_thread(lab.request, "inbox"))["entries"]
            [entry] = [e for e in entries if e["kind"] == "dialog"]
            await asyncio.to_thread(lab.roost_ok, "answer", entry["id"], "--choice", "2")
            done = await asyncio.wait_for(turn, 60)  # the editor's prompt was dropped
            assert done.stop_reason == "end_turn"
            assert editor.text(sid).endswith("chose: b")

    asyncio.run(scenario())


def test_job_from_the_cli_opened_in_the_editor(fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    job = lab.run("from the cli", name="clijob")
    lab.wait(job)

    async def scenario() -> None:
        editor = Editor()
        async with roost_acp(lab, editor) as conn:
            listed = await conn.list_sessions(cwd=str(lab.work))
            assert job in [s.session_id for s in listed.sessions]
            await conn.load_session(cwd=str(lab.work), session_id=job)
            assert editor.text(job, "user_message_chunk") == "from the cli"
            assert editor.text(job) == "echo: from the cli"
            # A reply from another surface shows as it arrives, with its answer.
            await asyncio.to_thread(lab.reply, job, "from the cli again")
            await editor.until(lambda: editor.text(job).endswith("echo: from the cli again"))
            assert editor.text(job, "user_message_chunk").endswith("from the cli again")
            done = await conn.prompt(session_id=job, prompt=[text_block("from the editor")])
            assert done.stop_reason == "end_turn"
            assert editor.text(job).endswith("echo: from the editor")
        logs = await asyncio.to_thread(lab.roost_ok, "logs", job)
        assert "user: from the editor" in logs and "echo: from the editor" in logs
        # An editor started again prompts the session it remembers: the job, by its id.
        later = Editor()
        async with roost_acp(lab, later) as conn:
            done = await conn.prompt(session_id=job, prompt=[text_block("back again")])
            assert done.stop_reason == "end_turn" and later.text(job) == "echo: back again"
        # session/resume: the job followed from now on, its transcript not replayed.
        resumed = Editor()
        async with roost_acp(lab, resumed) as conn:
            await conn.resume_session(session_id="clijob", cwd=str(lab.work))
            assert resumed.updates == []
            done = await conn.prompt(session_id=job, prompt=[text_block("resumed")])
            assert done.stop_reason == "end_turn" and resumed.text(job) == "echo: resumed"

    asyncio.run(scenario())


def test_a_childs_report_shows_as_it_arrives(fake_pi_env: Lab) -> None:
    lab = fake_pi_env

    async def scenario() -> None:
        editor = Editor()
        async with roost_acp(lab, editor) as conn:
            sid = (await conn.new_session(cwd=str(lab.work))).session_id
            done = await conn.prompt(session_id=sid, prompt=[text_block("[[spawn child says hi]]")])
            assert done.stop_reason == "end_turn"
            # The child's report reaches the parent after the turn: the editor sees it,
            # framed as a report from the child, and the run it starts.
            report = await editor.until(
                lambda: [u for u in editor.of(sid, "user_message_chunk") if "report" in u.content.text]
            )
            assert "echo: child says hi" in report[0].content.text
            await editor.until(lambda: editor.text(sid).count("echo:") >= 1)

    asyncio.run(scenario())


def test_closing_the_editor_mid_turn_leaves_the_job_running(fake_pi_env: Lab) -> None:
    """The editor closes the pipe while a turn waits: `roost acp` exits at once (not when
    roostd's wait would have answered), and the job goes on in the background."""
    lab = fake_pi_env
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost.cli", "acp"],
        env=lab.env,
        cwd=lab.work,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(id_: int, method: str, params: dict) -> dict:
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode() + b"\n"
        )
        proc.stdin.flush()
        while True:
            frame = json.loads(proc.stdout.readline())
            if frame.get("id") == id_:
                return frame["result"]

    try:
        send(1, "initialize", {"protocolVersion": 1})
        sid = send(2, "session/new", {"cwd": str(lab.work), "mcpServers": []})["sessionId"]
        proc.stdin.write(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "session/prompt",
                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "[[hold open-later]]"}]},
                }
            ).encode()
            + b"\n"
        )
        proc.stdin.flush()

        def running() -> bool:
            try:
                return lab.show(sid)["state"] == "running"
            except Exception:  # roostd still starting, the job not made yet
                return False

        wait_until(running, 60, "the editor's job running")
        proc.stdin.close()
        assert proc.wait(timeout=15) is not None  # its turn's wait asks for 25 s at a time
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert lab.show(sid)["state"] == "running"
    (lab.work / "open-later").write_text("")
    assert lab.wait(lab.show(sid)["id"]) == "done"
