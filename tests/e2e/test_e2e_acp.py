"""End to end (the real pi, the scripted model): `roost acp` driven by the
agent-client-protocol package's own client. A turn with a bash tool call streams the call
(its status, its result) and the answer in chunks as the model streams it, each character
once; the job is a roost job (roost logs shows the turn). A tool call that waits for an
approval is a permission request the editor answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from kit.lab import Lab

from roost.fakellm import FakeLLM, last_is_tool_result, last_user_contains, text, tool_call
from roost.wire.protocol import DAEMON_OPS

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("real_pi")]
pytest.importorskip("acp")

from acp import text_block  # noqa: E402
from kit.acpclient import Editor, roost_acp  # noqa: E402

WORDS = " ".join(f"acp{i:02d}" for i in range(16))


def test_a_turn_with_a_tool_streams_into_the_editor(make_lab: Callable[..., Lab], llm: FakeLLM) -> None:
    lab = make_lab(llm=llm)
    llm.add(last_user_contains("ACP-GO"), tool_call("bash", {"command": "echo tool-ok"}), times=1)
    llm.add(last_is_tool_result("bash"), text(WORDS, chunk_size=6, chunk_delay=0.1))
    llm.add(last_user_contains("ACP-LONG"), text("cut short", finish_reason="length"))

    async def scenario() -> str:
        editor = Editor()
        async with roost_acp(lab, editor) as conn:
            sid = (await conn.new_session(cwd=str(lab.work))).session_id
            done = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("ACP-GO run it")]), 180
            )
            assert done.stop_reason == "end_turn"
            [start] = editor.of(sid, "tool_call")
            assert start.kind == "execute"
            updates = [u for u in editor.of(sid, "tool_call_update") if u.tool_call_id == start.tool_call_id]
            # Its title once its arguments streamed in (the name comes first).
            titles = [u.title for u in [start, *updates] if u.title]
            assert titles[-1] == "bash echo tool-ok"
            assert updates[-1].status == "completed"
            assert "tool-ok" in updates[-1].content[0].content.text
            assert editor.text(sid) == WORDS  # each character once, streamed or saved
            assert len(editor.of(sid, "agent_message_chunk")) > 1
            # The model stopped at its output limit: max_tokens.
            long = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("ACP-LONG")]), 180)
            assert long.stop_reason == "max_tokens"
            assert editor.text(sid).endswith("cut short")
        return sid

    sid = asyncio.run(scenario())
    job = lab.show(sid)
    assert job["state"] == "done"
    logs = lab.roost_ok("logs", job["id"])
    assert "ACP-GO run it" in logs and "acp15" in logs


@pytest.mark.skipif("approval_answer" not in DAEMON_OPS, reason="approvals not in roostd")
def test_an_approval_is_a_permission_request(make_lab: Callable[..., Lab], llm: FakeLLM) -> None:
    """A job of `_meta.roost.approvals: ask`: its bash call waits for a person; the editor's
    permission request (allow once, allow always, reject) answers its inbox entry, by acp,
    once."""
    lab = make_lab(llm=llm)
    marker = lab.work / "ran.txt"
    llm.add(last_user_contains("ACP-APPR"), tool_call("bash", {"command": f"echo once >> {marker}"}), times=1)
    llm.add(last_is_tool_result("bash"), text("all done"))

    async def scenario() -> str:
        editor = Editor(choose=lambda options: options[0].option_id)
        async with roost_acp(lab, editor) as conn:
            sid = (await conn.new_session(cwd=str(lab.work), roost={"approvals": "ask"})).session_id
            done = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("ACP-APPR go")]), 180
            )
            assert done.stop_reason == "end_turn"
            [(call, options)] = editor.permissions
            assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
            assert call.title.startswith("bash") and "echo once" in call.title
            assert editor.text(sid).endswith("all done")
        return sid

    sid = asyncio.run(scenario())
    assert marker.read_text() == "once\n"
    answered = [
        json.loads(line)
        for line in (lab.roost_home / "events.jsonl").read_text().splitlines()
        if '"approval.answered"' in line
    ]
    assert [(e["decision"], e["by"]) for e in answered] == [("approved", "acp")]
    assert lab.show(sid)["state"] == "done"
