"""Facts about the real pi (0.73.1) that roost depends on, proved against the FakeLLM.

Each test backs a section of docs/pi-notes.md (a-h). They run the real pi in RPC mode with
an isolated HOME and agent dir, offline, against a FakeLLM on 127.0.0.1.
Run with `-s` to see the measured timings.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roost.fakellm import (
    error,
    first_user_contains,
    last_is_tool_result,
    last_user_contains,
    last_user_text,
    text,
    tool_call,
)
from roost.pitest import PiLab, read_session

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("real_pi")]

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[PiLab]:
    with PiLab(tmp_path) as lab_:
        yield lab_


def kinds(lines: list[dict[str, Any]]) -> list[str]:
    """Line types with message roles, collapsing repeated update events."""
    out: list[str] = []
    for e in lines:
        t = e["type"]
        if t == "response":
            t = f"response:{e['command']}"
        elif t in ("message_start", "message_end"):
            t = f"{t}:{e['message']['role']}"
        if t in ("message_update", "tool_execution_update") and out and out[-1] == t:
            continue
        out.append(t)
    return out


def report(name: str, seconds: float) -> None:
    print(f"\n[timing] {name}: {seconds * 1000:.0f} ms")


# ---- a, h: one prompt with one tool call ---------------------------------------------------


def test_prompt_with_tool_call_event_sequence(lab: PiLab) -> None:
    session = lab.root / "sessions" / "new-dir" / "a.jsonl"
    gate = threading.Event()
    lab.llm.add(
        first_user_contains("TASK-A") & ~last_is_tool_result(),
        tool_call("bash", {"command": "echo hi"}, hold=gate),
        times=1,
        name="call-bash",
    )
    lab.llm.add(last_is_tool_result("bash"), text("the tool said hi"), name="after-bash")

    t0 = time.monotonic()
    pi = lab.spawn(session=session)
    state = pi.get_state()
    report("spawn -> get_state response", time.monotonic() - t0)
    assert state["model"]["provider"] == "fake" and state["model"]["id"] == "fake-model"
    assert state["isStreaming"] is False and state["messageCount"] == 0
    assert state["sessionFile"] == str(session)

    start = pi.mark()
    t1 = time.monotonic()
    assert pi.prompt("TASK-A: run echo")["success"]
    first = lab.llm.wait_for_request(timeout=10)
    report("prompt -> first model request", first.t - t1)

    # (c) The user message was emitted, but the file is not written before an assistant
    # message exists.
    pi.wait_event("message_end", lambda e: e["message"]["role"] == "user", since=start)
    assert not session.exists()
    gate.set()
    pi.wait_event("tool_execution_start", since=start)
    on_disk = [e.get("message", {}).get("role") for e in read_session(session)]
    assert on_disk[-2:] == ["user", "assistant"]

    end = pi.wait_event("agent_end", since=start, timeout=20)
    lines = pi.log[start : pi.index_of(end) + 1]
    assert kinds(lines) == [
        "response:prompt",
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_update",
        "message_end:assistant",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "turn_start",
        "message_start:assistant",
        "message_update",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    ends = [e["message"] for e in lines if e["type"] == "message_end"]
    user_msg, call_msg, result_msg, final_msg = ends
    assert user_msg["content"] == [{"type": "text", "text": "TASK-A: run echo"}]
    assert isinstance(user_msg["timestamp"], int)
    assert call_msg["stopReason"] == "toolUse"
    tc = call_msg["content"][0]
    assert tc["type"] == "toolCall" and tc["name"] == "bash"
    assert tc["arguments"] == {"command": "echo hi"}
    assert {"api", "provider", "model", "usage", "timestamp"} <= set(call_msg)
    assert result_msg == {
        "role": "toolResult",
        "toolCallId": tc["id"],
        "toolName": "bash",
        "content": [{"type": "text", "text": "hi\n"}],
        "isError": False,
        "timestamp": result_msg["timestamp"],
    }
    assert final_msg["stopReason"] == "stop"
    assert final_msg["content"] == [{"type": "text", "text": "the tool said hi"}]
    tool_end = next(e for e in lines if e["type"] == "tool_execution_end")
    assert tool_end["result"]["content"] == [{"type": "text", "text": "hi\n"}]
    assert end["messages"][0]["role"] == "user" and len(end["messages"]) == 4

    # The tool result reaches the next request as role "tool".
    second = lab.llm.requests[1]
    assert second.rule == "after-bash"
    tool_msg = second["messages"][-1]
    assert tool_msg == {"role": "tool", "content": "hi\n", "tool_call_id": tc["id"]}
    assert pi.call("get_last_assistant_text")["text"] == "the tool said hi"

    # (c) The session file: header, model/thinking entries, then the four messages.
    entries = read_session(session)
    assert entries[0]["type"] == "session" and entries[0]["version"] == 3
    assert entries[0]["id"] == state["sessionId"] and entries[0]["cwd"] == str(lab.work)
    assert [e["type"] for e in entries[1:]] == [
        "model_change", "thinking_level_change", "message", "message", "message", "message",
    ]
    for e in entries:
        assert ISO_MS.match(e["timestamp"]), e["timestamp"]
    for e in entries[1:]:
        assert re.fullmatch(r"[0-9a-f]{8}", e["id"])
    assert entries[1]["parentId"] is None
    assert all(b["parentId"] == a["id"] for a, b in zip(entries[1:], entries[2:], strict=False))
    assert entries[3]["message"] == user_msg  # the user text lives at message.content[].text
    assert pi.get_state()["messageCount"] == 4

    # (h) A warm process: the next prompt reaches the model faster.
    n = len(lab.llm.requests)
    t2 = time.monotonic()
    pi.prompt("again")
    report("second prompt -> model request", lab.llm.wait_for_request(since=n).t - t2)
    pi.wait_event("agent_end", since=pi.index_of(end) + 1)
    assert pi.close() == 0


# ---- b: prompt / steer while running -------------------------------------------------------


def test_steer_is_applied_after_the_tool_batch(lab: PiLab) -> None:
    gate1, gate2 = threading.Event(), threading.Event()
    lab.llm.add(
        last_user_contains("TASK-S"), tool_call("bash", {"command": "echo one"}, hold=gate1),
        times=1,
    )
    lab.llm.add(last_user_contains("STEER-1"), text("saw steer 1", hold=gate2), times=1)
    lab.llm.add(last_user_contains("STEER-2"), text("saw steer 2"), times=1)
    lab.llm.add(last_user_contains("FOLLOW"), text("saw follow-up"), times=1)
    pi = lab.spawn()
    pi.get_state()
    start = pi.mark()
    pi.prompt("TASK-S")
    lab.llm.wait_for_request(last_user_contains("TASK-S"))

    # While a run is active, a plain prompt is refused; steer is accepted at once.
    refused = pi.prompt("plain prompt while busy")
    assert refused["success"] is False
    assert "streamingBehavior" in refused["error"]
    assert pi.send({"type": "steer", "message": "STEER-1"})["success"]
    queued = pi.wait_event("queue_update", since=start)
    assert queued["steering"] == ["STEER-1"] and queued["followUp"] == []
    assert pi.get_state()["pendingMessageCount"] == 1
    gate1.set()

    # Applied after the tool batch, before the next model request, in that same request.
    req = lab.llm.wait_for_request(last_user_contains("STEER-1"))
    assert [m["role"] for m in req["messages"][-3:]] == ["assistant", "tool", "user"]
    assert req["messages"][-1]["content"] == [{"type": "text", "text": "STEER-1"}]
    assert len(lab.llm.requests) == 2

    # During a final text answer: a steer (prompt + streamingBehavior) and a follow-up.
    assert pi.send({"type": "follow_up", "message": "FOLLOW"})["success"]
    assert pi.prompt("STEER-2", streamingBehavior="steer")["success"]
    gate2.set()
    end = pi.wait_event("agent_end", since=start, timeout=20)
    lines = pi.log[start : pi.index_of(end) + 1]
    assert [k for k in kinds(lines) if not k.startswith("response:")] == [
        "agent_start", "turn_start", "message_start:user", "message_end:user",
        "queue_update",  # STEER-1 queued
        "message_start:assistant", "message_update", "message_end:assistant",
        "tool_execution_start", "tool_execution_update", "tool_execution_end",
        "message_start:toolResult", "message_end:toolResult", "turn_end",
        "turn_start", "queue_update", "message_start:user", "message_end:user",  # STEER-1
        "queue_update", "queue_update",  # FOLLOW, STEER-2 queued
        "message_start:assistant", "message_update", "message_end:assistant", "turn_end",
        "turn_start", "queue_update", "message_start:user", "message_end:user",  # STEER-2
        "message_start:assistant", "message_update", "message_end:assistant", "turn_end",
        "turn_start", "queue_update", "message_start:user", "message_end:user",  # FOLLOW
        "message_start:assistant", "message_update", "message_end:assistant", "turn_end",
        "agent_end",
    ]
    users = [e["message"]["content"][0]["text"] for e in lines
             if e["type"] == "message_end" and e["message"]["role"] == "user"]
    assert users == ["TASK-S", "STEER-1", "STEER-2", "FOLLOW"]
    assert [e["steering"] for e in lines if e["type"] == "queue_update"][-1] == []

    # A steer while idle starts nothing: it waits for the next prompt and then follows the
    # prompt's own message into the first request.
    idle = pi.mark()
    assert pi.send({"type": "steer", "message": "IDLE-STEER"})["success"]
    state = pi.get_state()
    assert state["isStreaming"] is False and state["pendingMessageCount"] == 1
    assert "agent_start" not in kinds(pi.log[idle:])
    lab.llm.add(last_user_contains("IDLE-STEER"), text("both"), times=1)
    pi.run_prompt("NEXT")
    assert [m["content"][0]["text"] for m in lab.llm.requests[-1]["messages"][-2:]] == [
        "NEXT", "IDLE-STEER",
    ]


# ---- c, e: session files -------------------------------------------------------------------


def test_session_file_create_resume_and_empty_file(lab: PiLab) -> None:
    session = lab.root / "deep" / "er" / "s.jsonl"
    lab.llm.add(last_user_contains("first"), text("first answer"))
    lab.llm.add(last_user_contains("where"), tool_call("bash", {"command": "pwd"}), times=1)
    pi = lab.spawn(session=session)
    state = pi.get_state()
    assert state["sessionFile"] == str(session) and state["messageCount"] == 0
    # The directories are made at start-up; the file only at the first assistant message.
    assert session.parent.is_dir() and not session.exists()
    pi.run_prompt("first")
    assert session.exists()
    assert pi.close() == 0

    # Resume from another cwd: history is restored, the header's cwd is kept.
    other = lab.root / "elsewhere"
    other.mkdir()
    pi2 = lab.spawn(session=session, cwd=other)
    state2 = pi2.get_state()
    assert state2["messageCount"] == 2 and state2["sessionId"] == state["sessionId"]
    msgs = pi2.call("get_messages")["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    pi2.run_prompt("where are you")
    pwd_result = lab.llm.requests[-1]["messages"][-1]
    assert pwd_result["role"] == "tool" and pwd_result["content"].strip() == str(lab.work)
    assert lab.llm.requests[-1]["messages"][1]["content"][0]["text"] == "first"
    assert pi2.close() == 0
    header = read_session(session)[0]
    assert header["cwd"] == str(lab.work)
    assert sum(1 for e in read_session(session) if e["type"] == "session") == 1

    # An existing empty file: pi writes the header at start-up.
    empty = lab.root / "empty.jsonl"
    empty.touch()
    pi3 = lab.spawn(session=empty)
    state3 = pi3.get_state()
    assert [e["type"] for e in read_session(empty)] == ["session"]
    assert read_session(empty)[0]["id"] == state3["sessionId"]


# ---- d: what follows agent_end -------------------------------------------------------------


def test_auto_retry_follows_agent_end_before_any_later_response(tmp_path: Path) -> None:
    # A back-off long enough that the probe surely lands inside it.
    with PiLab(tmp_path, settings={"retry": {"baseDelayMs": 1000}}) as lab:
        _retry_scenario(lab)


def _retry_scenario(lab: PiLab) -> None:
    lab.llm.add(last_user_contains("TASK-R"), error(500, "upstream exploded"), times=1)
    lab.llm.add(last_user_contains("TASK-R"), text("recovered"))
    pi = lab.spawn(session=lab.root / "r.jsonl")
    pi.get_state()
    start = pi.mark()
    pi.prompt("TASK-R")
    first_end = pi.wait_event("agent_end", since=start)
    # Ask at once, as a worker would on seeing agent_end.
    probe = pi.send({"type": "get_state"})
    retry = pi.wait_event("auto_retry_start", since=start)
    assert pi.index_of(first_end) < pi.index_of(retry) < pi.index_of(probe)
    assert pi.index_of(retry) == pi.index_of(first_end) + 1
    assert probe["data"]["isStreaming"] is False  # idle during the back-off
    failed = first_end["messages"][-1]
    assert failed["role"] == "assistant" and failed["stopReason"] == "error"
    assert "500" in failed["errorMessage"]
    assert retry["attempt"] == 1 and retry["maxAttempts"] == 3 and retry["delayMs"] == 1000
    assert "500" in retry["errorMessage"]

    second_end = pi.wait_event("agent_end", since=pi.index_of(retry) + 1, timeout=20)
    lines = pi.log[start : pi.index_of(second_end) + 1]
    seq = [k for k in kinds(lines) if k != "response:get_state"]
    assert seq == [
        "response:prompt",
        "agent_start", "turn_start", "message_start:user", "message_end:user",
        "message_start:assistant", "message_end:assistant", "turn_end", "agent_end",
        "auto_retry_start",
        "agent_start", "turn_start",
        "message_start:assistant", "message_update", "message_end:assistant",
        "auto_retry_end",
        "turn_end", "agent_end",
    ]
    retry_end = next(e for e in lines if e["type"] == "auto_retry_end")
    assert retry_end["success"] is True and retry_end["attempt"] == 1
    state = pi.get_state()
    assert state["messageCount"] == 2  # the failed attempt left the context...
    roles = [e["message"]["role"] for e in read_session(lab.root / "r.jsonl")
             if e["type"] == "message"]
    assert roles == ["user", "assistant", "assistant"]  # ...but stays in the file
    assert pi.close() == 0
    # On resume the failed attempt is back in the context (it is on the entry chain).
    resumed = lab.spawn(session=lab.root / "r.jsonl")
    assert resumed.get_state()["messageCount"] == 3


def test_compaction_follows_agent_end_before_any_later_response(tmp_path: Path) -> None:
    with PiLab(tmp_path, context_window=20000) as lab:
        # 10000 prompt tokens > 20000 - reserveTokens(16384): threshold compaction.
        lab.llm.add(last_user_contains("TASK-C"), text("big answer", usage=(10000, 10)))
        summary_gate = threading.Event()  # keeps the compaction in progress for the probe
        lab.llm.set_default(text("summary of the conversation", hold=summary_gate))
        pi = lab.spawn(session=tmp_path / "c.jsonl")
        pi.get_state()
        start = pi.mark()
        pi.prompt("TASK-C")
        end = pi.wait_event("agent_end", since=start)
        probe = pi.send({"type": "get_state"})
        comp = pi.wait_event("compaction_start", since=start)
        assert pi.index_of(end) + 1 == pi.index_of(comp) < pi.index_of(probe)
        assert comp["reason"] == "threshold"
        assert probe["data"]["isCompacting"] is True
        summary_gate.set()
        done = pi.wait_event("compaction_end", since=start, timeout=20)
        print("\n[compaction_end]", json.dumps(done)[:300])
        assert done["reason"] == "threshold" and done["willRetry"] is False
        assert pi.get_state()["isCompacting"] is False


# ---- f, g: an extension: sendMessage, UI dialogs, session info -----------------------------

EXTENSION_TS = r"""
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";
import * as net from "node:net";

export default function (pi: ExtensionAPI) {
  // Read a secret once and remove it, so no tool subprocess can see it.
  const token = process.env.PITEST_TOKEN ?? null;
  delete process.env.PITEST_TOKEN;
  let ctx: any;
  pi.on("session_start", async (_event, c) => {
    ctx = c;
    const path = process.env.PITEST_EXT_SOCK;
    if (!path) return;
    const server = net.createServer((conn) => {
      let buf = "";
      conn.on("data", (d) => {
        buf += d.toString();
        let i: number;
        while ((i = buf.indexOf("\n")) >= 0) {
          const cmd = JSON.parse(buf.slice(0, i));
          buf = buf.slice(i + 1);
          if (cmd.op === "send") {
            const wasIdle = ctx.isIdle();
            pi.sendMessage(cmd.message, cmd.options);
            conn.write(JSON.stringify({ ok: true, wasIdle }) + "\n");
          } else if (cmd.op === "info") {
            const sm = ctx.sessionManager;
            conn.write(JSON.stringify({
              pid: process.pid, sessionFile: sm.getSessionFile(), sessionId: sm.getSessionId(),
              cwd: sm.getCwd(), sessionDir: sm.getSessionDir(), leafId: sm.getLeafId(),
              header: sm.getHeader(), isIdle: ctx.isIdle(), hasUI: ctx.hasUI,
              pending: ctx.hasPendingMessages(), token,
            }) + "\n");
          }
        }
      });
    });
    server.listen(path);
    server.unref();
  });

  pi.registerTool({
    name: "ask_user",
    label: "Ask user",
    description: "Ask the user three questions",
    parameters: Type.Object({ question: Type.String() }),
    async execute(_id, params, _signal, _onUpdate, c) {
      const choice = await c.ui.select(params.question, ["red", "green"]);
      const ok = await c.ui.confirm("Sure?", "Really sure?");
      const name = await c.ui.input("Name?", "type a name");
      return {
        content: [{ type: "text", text: `choice=${choice} ok=${ok} name=${name}` }],
        details: { choice, ok, name: name ?? null },
      };
    },
  });
}
"""


class ExtSocket:
    """A line-JSON client for the test extension's Unix socket."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
                break
            except OSError:
                s.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)  # the extension listens from session_start
        self.sock = s
        self.file = s.makefile("rb")

    def ask(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.sock.sendall(json.dumps(obj).encode() + b"\n")
        return dict(json.loads(self.file.readline()))

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def test_extension_send_message_ui_and_session_info(lab: PiLab) -> None:
    ext = lab.root / "ext.ts"
    ext.write_text(EXTENSION_TS)
    sock_path = lab.root / "ext.sock"
    session = lab.root / "x.jsonl"
    gate = threading.Event()
    lab.llm.add(last_user_contains("hello-idle"), text("got the custom message"), times=1)
    lab.llm.add(
        last_user_contains("TASK-X"),
        tool_call("bash", {"command": "echo token=${PITEST_TOKEN:-unset}"}, hold=gate),
        times=1,
    )
    lab.llm.add(last_user_contains("hello-busy"), text("got it mid-run"), times=1)
    lab.llm.add(last_user_contains("TASK-UI"), tool_call("ask_user", {"question": "Colour?"}),
                times=1)
    lab.llm.add(last_is_tool_result("ask_user"), text("thanks"), times=1)
    pi = lab.spawn(
        session=session, extensions=[ext],
        extra_env={"PITEST_EXT_SOCK": str(sock_path), "PITEST_TOKEN": "t0k"},
    )
    state = pi.get_state()
    assert sock_path.exists()  # session_start handlers ran before get_state was answered
    ch = ExtSocket(sock_path)
    try:
        # What the extension can know about itself.
        info = ch.ask({"op": "info"})
        assert info["pid"] == pi.proc.pid
        assert info["sessionFile"] == str(session) and info["sessionId"] == state["sessionId"]
        assert info["cwd"] == str(lab.work) and info["sessionDir"] == str(session.parent)
        assert info["isIdle"] is True and info["hasUI"] is True and info["token"] == "t0k"
        assert info["header"]["type"] == "session" and info["leafId"] is not None

        # Idle + triggerTurn: the custom message starts a run by itself.
        start = pi.mark()
        custom = {"customType": "x", "content": "hello-idle", "display": True,
                  "details": {"seq": 1}}
        assert ch.ask({"op": "send", "message": custom,
                       "options": {"deliverAs": "steer", "triggerTurn": True}})["wasIdle"]
        end = pi.wait_event("agent_end", since=start)
        lines = pi.log[start : pi.index_of(end) + 1]
        assert kinds(lines)[:4] == [
            "agent_start", "turn_start", "message_start:custom", "message_end:custom",
        ]
        msg = next(e["message"] for e in lines if e["type"] == "message_end")
        assert msg == {**custom, "role": "custom", "timestamp": msg["timestamp"]}
        req = lab.llm.requests[-1]
        assert req["messages"][-1] == {"role": "user",
                                      "content": [{"type": "text", "text": "hello-idle"}]}
        assert pi.call("get_messages")["messages"][0] == msg  # role "custom" in the state
        stored = [e for e in read_session(session) if e["type"] == "custom_message"]
        assert len(stored) == 1
        assert {k: stored[0][k] for k in ("customType", "content", "display", "details")} == custom

        # Idle without triggerTurn: stored and announced, no run.
        start = pi.mark()
        quiet = {"customType": "x", "content": "quiet note", "display": False, "details": {"seq": 2}}
        ch.ask({"op": "send", "message": quiet, "options": {"triggerTurn": False}})
        m_end = pi.wait_event("message_end", since=start)
        assert m_end["message"]["content"] == "quiet note"
        assert [e["type"] for e in pi.log[start:]] == ["message_start", "message_end"]

        # Busy + deliverAs steer: applied after the tool batch; not counted as pending.
        start = pi.mark()
        n_requests = len(lab.llm.requests)
        pi.prompt("TASK-X")
        lab.llm.wait_for_request(last_user_contains("TASK-X"), since=n_requests)
        busy = {"customType": "x", "content": "hello-busy", "display": True, "details": {"seq": 3}}
        assert ch.ask({"op": "send", "message": busy,
                       "options": {"deliverAs": "steer", "triggerTurn": True}})["wasIdle"] is False
        assert pi.get_state()["pendingMessageCount"] == 0
        gate.set()
        end = pi.wait_event("agent_end", since=start, timeout=20)
        seq = kinds(pi.log[start : pi.index_of(end) + 1])
        assert "queue_update" not in seq
        assert seq.index("message_end:custom") > seq.index("tool_execution_end")
        req = lab.llm.wait_for_request(last_user_contains("hello-busy"))
        assert [m["role"] for m in req["messages"][-3:]] == ["assistant", "tool", "user"]
        assert seq.count("agent_start") == 1
        assert req["messages"][-2]["content"] == "token=unset\n"  # scrubbed from tools' env

        # g: dialogs from a tool.
        start = pi.mark()
        pi.prompt("TASK-UI")
        sel = pi.wait_event("extension_ui_request", lambda e: e["method"] == "select",
                            since=start)
        assert sel == {"type": "extension_ui_request", "id": sel["id"], "method": "select",
                       "title": "Colour?", "options": ["red", "green"]}
        assert pi.get_state()["isStreaming"] is True
        pi.answer_ui(sel["id"], value="green")
        conf = pi.wait_event("extension_ui_request", lambda e: e["method"] == "confirm",
                             since=start)
        assert conf == {"type": "extension_ui_request", "id": conf["id"], "method": "confirm",
                        "title": "Sure?", "message": "Really sure?"}
        pi.answer_ui(conf["id"], confirmed=True)
        inp = pi.wait_event("extension_ui_request", lambda e: e["method"] == "input",
                            since=start)
        assert inp == {"type": "extension_ui_request", "id": inp["id"], "method": "input",
                       "title": "Name?", "placeholder": "type a name"}
        pi.answer_ui(inp["id"], cancelled=True)
        end = pi.wait_event("agent_end", since=start, timeout=20)
        req = lab.llm.wait_for_request(last_is_tool_result("ask_user"))
        assert req["messages"][-1]["content"] == "choice=green ok=true name=undefined"
        assert "ask_user" in [t["function"]["name"] for t in req["tools"]]
        tool_end = next(e for e in pi.log[start:] if e["type"] == "tool_execution_end")
        assert tool_end["result"]["details"] == {"choice": "green", "ok": True, "name": None}
        # No response line is ever printed for an extension_ui_response.
        assert not [e for e in pi.log[start:] if e.get("command") == "extension_ui_response"]
    finally:
        ch.close()
    assert last_user_text(lab.llm.requests[0]) == "hello-idle"
