"""Facts about the real pi that roost depends on, proved against the FakeLLM.

Each test backs a section of docs/pi-notes.md (a-m). They run the real pi in RPC mode with
an isolated HOME and agent dir, offline, against a FakeLLM on 127.0.0.1.

They run on whichever pi `roost.pi.locate.find_pi()` selects: the default
`@earendil-works/pi-coding-agent` 1.6.0, or the old line with
`ROOST_PI=.runtime/pi-0.73.1/node_modules/.bin/pi ROOST_NODE=/usr/bin/node`. Where the two
differ a test branches on the pi's features and asserts each version's exact behaviour; its
docstring's "Holds for:" line says which versions a fact was verified on. Run just these
with `pytest -m pifacts` (or `scripts/test -m pifacts`); `-s` shows the measured timings.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from kit.lab import Lab
from kit.testpi import PiRpc, read_session
from kit.wait import wait_until

from roost.fakellm import (
    error,
    first_user_contains,
    last_is_tool_result,
    last_user_contains,
    last_user_text,
    text,
    tool_call,
)
from roost.pi.compat import features_of
from roost.pi.locate import PiNotFound, find_pi, parse_version

pytestmark = [pytest.mark.pifacts, pytest.mark.usefixtures("real_pi")]

try:
    FEATURES = features_of(find_pi())
except PiNotFound:  # the real_pi fixture fails every test here with the setup hint
    FEATURES = features_of(None)
VERSION = parse_version(FEATURES.version) or (0, 0, 0)
# Differences compat.py has no threshold for switch at the first 1.x release they were
# verified on. Only 0.73.1 and 1.6.0 were: a pi in between fails here until it is checked.
FIRST_VERIFIED_1X = (1, 6, 0)
V1 = VERSION >= FIRST_VERIFIED_1X
SETTLED = (
    {"type": "agent_settled", "aborted": False} if FEATURES.settled_aborted else {"type": "agent_settled"}
)
SYSTEM_KINDS = ["message_start:system", "message_end:system"]

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

Event = dict[str, Any]


@pytest.fixture
def lab() -> Iterator[Lab]:
    with Lab(llm=True) as lab_:
        yield lab_


def kinds(lines: list[Event]) -> list[str]:
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


def first_run(seq: list[str]) -> list[str]:
    """A session's first run as `kinds` shows it: 1.6 opens it (after the first turn_start)
    with the system message that declares the prompt and the tools."""
    if not V1:
        return seq
    at = seq.index("turn_start") + 1
    return seq[:at] + SYSTEM_KINDS + seq[at:]


def disposition(resp: Event, expected: str) -> None:
    """A prompt/steer/follow_up response: `data.disposition` where pi has it, else no data."""
    assert resp["success"] is True, resp
    if FEATURES.prompt_disposition:
        assert resp["data"] == {"disposition": expected}
    else:
        assert "data" not in resp


def expect_settled(pi: PiRpc, end: Event) -> Event | None:
    """After a plain run's `agent_end`: `agent_settled` is the very next line where pi has
    it (returned), else nothing."""
    if not FEATURES.settled_event:
        return None
    settled = pi.wait_event("agent_settled", since=pi.index_of(end) + 1)
    assert pi.index_of(settled) == pi.index_of(end) + 1
    assert settled == SETTLED
    return settled


def run_settled(pi: PiRpc, message: str, timeout: float = 30.0) -> list[Event]:
    """Prompt, and wait until the work settled (through `agent_settled` where pi prints it,
    else through `agent_end`); the lines from the prompt's response on."""
    start = pi.mark()
    disposition(pi.prompt(message), "started")
    end = pi.wait_event("agent_end", since=start, timeout=timeout)
    last = expect_settled(pi, end) or end
    return pi.log[start : pi.index_of(last) + 1]


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def session_roles(path: Path) -> list[str]:
    return [e["message"]["role"] for e in read_session(path) if e["type"] == "message"]


def report(name: str, seconds: float) -> None:
    print(f"\n[timing] {FEATURES.label}: {name}: {seconds * 1000:.0f} ms")


# ---- a, h: one prompt with one tool call ---------------------------------------------------


def test_prompt_with_tool_call_event_sequence(lab: Lab) -> None:
    """Events, message shapes and session entries of a prompt whose answer calls bash.

    Holds for: 0.73.1; 1.6.0 (a `system` message opens the session's first run, in events,
    `agent_end.messages` and the file; `agent_settled` follows `agent_end`; the session file
    is written at the user message; tool results carry `durationMs`; `data.disposition`).
    """
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
    pi = lab.spawn_pi(session=session)
    state = pi.get_state()
    report("spawn -> get_state response", time.monotonic() - t0)
    assert state["model"]["provider"] == "fake" and state["model"]["id"] == "fake-model"
    assert state["isStreaming"] is False and state["messageCount"] == 0
    assert state["sessionFile"] == str(session)

    start = pi.mark()
    t1 = time.monotonic()
    disposition(pi.prompt("TASK-A: run echo"), "started")
    first = lab.llm.wait_for_request(timeout=10)
    report("prompt -> first model request", first.t - t1)

    # (c) The user message was emitted. 0.73 writes no file before an assistant message
    # exists; 1.6 has written everything so far, the system and user messages included.
    pi.wait_event("message_end", lambda e: e["message"]["role"] == "user", since=start)
    if V1:
        assert [e["type"] for e in read_session(session)] == [
            "session",
            "model_change",
            "thinking_level_change",
            "message",
            "message",
        ]
        assert session_roles(session) == ["system", "user"]
    else:
        assert not session.exists()
    gate.set()
    pi.wait_event("tool_execution_start", since=start)
    on_disk = session_roles(session)
    assert on_disk[-2:] == ["user", "assistant"]

    end = pi.wait_event("agent_end", since=start, timeout=20)
    expect_settled(pi, end)
    lines = pi.log[start : pi.index_of(end) + 1]
    assert kinds(lines) == first_run(
        [
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
    )
    ends = [e["message"] for e in lines if e["type"] == "message_end"]
    if V1:
        system_msg, *ends = ends
        assert set(system_msg) == {"role", "content", "sections", "toolsAdded", "timestamp"}
        assert system_msg["role"] == "system" and system_msg["content"] == ""
        assert list(system_msg["sections"]) == ["preamble", "tools", "rules", "docs", "cwd"]
        assert [t["name"] for t in system_msg["toolsAdded"]] == ["read", "bash", "edit", "write"]
    user_msg, call_msg, result_msg, final_msg = ends
    assert user_msg["content"] == [{"type": "text", "text": "TASK-A: run echo"}]
    assert isinstance(user_msg["timestamp"], int)
    assert call_msg["stopReason"] == "toolUse"
    tc = call_msg["content"][0]
    assert tc["type"] == "toolCall" and tc["name"] == "bash"
    assert tc["arguments"] == {"command": "echo hi"}
    assert {"api", "provider", "model", "usage", "timestamp"} <= set(call_msg)
    expected_result = {
        "role": "toolResult",
        "toolCallId": tc["id"],
        "toolName": "bash",
        "content": [{"type": "text", "text": "hi\n"}],
        "isError": False,
        "timestamp": result_msg["timestamp"],
    }
    if V1:  # how long the tool's execute() took, also on tool_execution_end
        assert isinstance(result_msg["durationMs"], int)
        expected_result["durationMs"] = result_msg["durationMs"]
    assert result_msg == expected_result
    assert final_msg["stopReason"] == "stop"
    assert final_msg["content"] == [{"type": "text", "text": "the tool said hi"}]
    tool_end = next(e for e in lines if e["type"] == "tool_execution_end")
    assert tool_end["result"]["content"] == [{"type": "text", "text": "hi\n"}]
    if V1:
        assert tool_end["durationMs"] == result_msg["durationMs"]
        structured = tool_end["result"]["structuredContent"]
        assert {k: structured[k] for k in ("output", "truncated", "exit_code")} == {
            "output": "hi\n",
            "truncated": False,
            "exit_code": 0,
        }
    else:
        assert "durationMs" not in tool_end and "structuredContent" not in tool_end["result"]
    run_messages = [system_msg, *ends] if V1 else ends
    assert end["messages"] == run_messages  # only this run's messages
    if V1:
        assert end["willRetry"] is False
    else:
        assert "willRetry" not in end

    # The tool result reaches the next request as role "tool".
    second = lab.llm.requests[1]
    assert second.rule == "after-bash"
    tool_msg = second["messages"][-1]
    assert tool_msg == {"role": "tool", "content": "hi\n", "tool_call_id": tc["id"]}
    assert second["messages"][0]["role"] == "system"  # the prompt, also from 1.6's message
    assert pi.call("get_last_assistant_text")["text"] == "the tool said hi"

    # (c) The session file: header, model/thinking entries, then one entry per message.
    entries = read_session(session)
    assert entries[0]["type"] == "session" and entries[0]["version"] == 3
    assert entries[0]["id"] == state["sessionId"] and entries[0]["cwd"] == str(lab.work)
    assert [e["type"] for e in entries[1:]] == [
        "model_change",
        "thinking_level_change",
        *["message"] * len(run_messages),
    ]
    for e in entries:
        assert ISO_MS.match(e["timestamp"]), e["timestamp"]
    for e in entries[1:]:
        assert re.fullmatch(r"[0-9a-f]{8}", e["id"])
    assert entries[1]["parentId"] is None
    assert all(b["parentId"] == a["id"] for a, b in zip(entries[1:], entries[2:], strict=False))
    assert [e["message"] for e in entries[3:]] == run_messages  # identical to message_end's
    assert pi.get_state()["messageCount"] == len(run_messages)

    # (h) A warm process: the next prompt reaches the model faster. No new system message:
    # 1.6 writes one again only when the prompt or the tools change.
    n = len(lab.llm.requests)
    t2 = time.monotonic()
    again = pi.mark()
    pi.prompt("again")
    report("second prompt -> model request", lab.llm.wait_for_request(since=n).t - t2)
    end2 = pi.wait_event("agent_end", since=again)
    expect_settled(pi, end2)
    assert "message_start:system" not in kinds(pi.log[again:])
    assert pi.close() == 0


# ---- b: prompt / steer while running -------------------------------------------------------


def test_steer_is_applied_after_the_tool_batch(lab: Lab) -> None:
    """RPC steer / follow_up / prompt+streamingBehavior during a run, and a steer while idle.

    Holds for: 0.73.1; 1.6.0 (same order and queue_updates, plus the first run's system
    message, `agent_settled` at the end and `disposition: "queued"` on each queued input).
    """
    gate1, gate2 = threading.Event(), threading.Event()
    lab.llm.add(
        last_user_contains("TASK-S"),
        tool_call("bash", {"command": "echo one"}, hold=gate1),
        times=1,
    )
    lab.llm.add(last_user_contains("STEER-1"), text("saw steer 1", hold=gate2), times=1)
    lab.llm.add(last_user_contains("STEER-2"), text("saw steer 2"), times=1)
    lab.llm.add(last_user_contains("FOLLOW"), text("saw follow-up"), times=1)
    pi = lab.spawn_pi()
    pi.get_state()
    start = pi.mark()
    disposition(pi.prompt("TASK-S"), "started")
    lab.llm.wait_for_request(last_user_contains("TASK-S"))

    # While a run is active, a plain prompt is refused; steer is accepted at once.
    refused = pi.prompt("plain prompt while busy")
    assert refused["success"] is False
    assert refused["error"] == (
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
    )
    disposition(pi.send({"type": "steer", "message": "STEER-1"}), "queued")
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
    disposition(pi.send({"type": "follow_up", "message": "FOLLOW"}), "queued")
    disposition(pi.prompt("STEER-2", streamingBehavior="steer"), "queued")
    gate2.set()
    end = pi.wait_event("agent_end", since=start, timeout=20)
    expect_settled(pi, end)
    lines = pi.log[start : pi.index_of(end) + 1]
    assert [k for k in kinds(lines) if not k.startswith("response:")] == first_run(
        [
            "agent_start",
            "turn_start",
            "message_start:user",
            "message_end:user",
            "queue_update",  # STEER-1 queued
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
            "queue_update",
            "message_start:user",
            "message_end:user",  # STEER-1
            "queue_update",
            "queue_update",  # FOLLOW, STEER-2 queued
            "message_start:assistant",
            "message_update",
            "message_end:assistant",
            "turn_end",
            "turn_start",
            "queue_update",
            "message_start:user",
            "message_end:user",  # STEER-2
            "message_start:assistant",
            "message_update",
            "message_end:assistant",
            "turn_end",
            "turn_start",
            "queue_update",
            "message_start:user",
            "message_end:user",  # FOLLOW
            "message_start:assistant",
            "message_update",
            "message_end:assistant",
            "turn_end",
            "agent_end",
        ]
    )
    users = [
        e["message"]["content"][0]["text"]
        for e in lines
        if e["type"] == "message_end" and e["message"]["role"] == "user"
    ]
    assert users == ["TASK-S", "STEER-1", "STEER-2", "FOLLOW"]
    assert [e["steering"] for e in lines if e["type"] == "queue_update"][-1] == []

    # A steer while idle starts nothing: it waits for the next prompt and then follows the
    # prompt's own message into the first request.
    idle = pi.mark()
    disposition(pi.send({"type": "steer", "message": "IDLE-STEER"}), "queued")
    state = pi.get_state()
    assert state["isStreaming"] is False and state["pendingMessageCount"] == 1
    assert "agent_start" not in kinds(pi.log[idle:])
    lab.llm.add(last_user_contains("IDLE-STEER"), text("both"), times=1)
    run_settled(pi, "NEXT")
    assert [m["content"][0]["text"] for m in lab.llm.requests[-1]["messages"][-2:]] == [
        "NEXT",
        "IDLE-STEER",
    ]


# ---- c, e: session files -------------------------------------------------------------------


def test_session_file_create_resume_and_empty_file(lab: Lab) -> None:
    """`--session FILE`: made where, restored how, which cwd; an empty existing FILE.

    Holds for: 0.73.1; 1.6.0 (the restored history starts with the system message; an empty
    file also gets `model_change` and `thinking_level_change` at start-up).
    """
    session = lab.root / "deep" / "er" / "s.jsonl"
    lab.llm.add(last_user_contains("first"), text("first answer"))
    lab.llm.add(last_user_contains("where"), tool_call("bash", {"command": "pwd"}), times=1)
    pi = lab.spawn_pi(session=session)
    state = pi.get_state()
    assert state["sessionFile"] == str(session) and state["messageCount"] == 0
    # The directories are made at start-up, the file only with the first run (see l).
    assert session.parent.is_dir() and not session.exists()
    run_settled(pi, "first")
    assert session.exists()
    assert pi.close() == 0

    # Resume from another cwd: history is restored, the header's cwd is kept.
    other = lab.root / "elsewhere"
    other.mkdir()
    pi2 = lab.spawn_pi(session=session, cwd=other)
    state2 = pi2.get_state()
    restored = ["system", "user", "assistant"] if V1 else ["user", "assistant"]
    assert state2["messageCount"] == len(restored) and state2["sessionId"] == state["sessionId"]
    assert roles(pi2.call("get_messages")["messages"]) == restored
    run_settled(pi2, "where are you")
    pwd_result = lab.llm.requests[-1]["messages"][-1]
    assert pwd_result["role"] == "tool" and pwd_result["content"].strip() == str(lab.work)
    sent = lab.llm.requests[-1]["messages"]
    assert sent[0]["role"] == "system" and sent[1]["content"][0]["text"] == "first"
    assert pi2.close() == 0
    header = read_session(session)[0]
    assert header["cwd"] == str(lab.work)
    assert sum(1 for e in read_session(session) if e["type"] == "session") == 1

    # An existing empty file: pi writes the header at start-up (1.6: with the model and
    # thinking level entries).
    empty = lab.root / "empty.jsonl"
    empty.touch()
    pi3 = lab.spawn_pi(session=empty)
    state3 = pi3.get_state()
    assert [e["type"] for e in read_session(empty)] == (
        ["session", "model_change", "thinking_level_change"] if V1 else ["session"]
    )
    assert read_session(empty)[0]["id"] == state3["sessionId"]


# ---- d: what follows agent_end -------------------------------------------------------------


def test_auto_retry_follows_agent_end_before_any_later_response() -> None:
    """A retryable model error: `auto_retry_start` is the line after `agent_end`, before the
    response to any command sent on seeing `agent_end`.

    Holds for: 0.73.1; 1.6.0 (`agent_end.willRetry` says so; a `context_edit` entry hides the
    failed attempt, also on resume; `isStreaming` stays true during the back-off; one
    `agent_settled` after the retry's `agent_end`).
    """
    # A back-off long enough that the probe surely lands inside it.
    with Lab(llm=True, pi_settings={"retry": {"baseDelayMs": 1000}}) as lab:
        _retry_scenario(lab)


def _retry_scenario(lab: Lab) -> None:
    lab.llm.add(last_user_contains("TASK-R"), error(500, "upstream exploded"), times=1)
    lab.llm.add(last_user_contains("TASK-R"), text("recovered"))
    session = lab.root / "r.jsonl"
    pi = lab.spawn_pi(session=session)
    pi.get_state()
    start = pi.mark()
    pi.prompt("TASK-R")
    first_end = pi.wait_event("agent_end", since=start)
    # Ask at once, as a worker would on seeing agent_end.
    probe = pi.send({"type": "get_state"})
    retry = pi.wait_event("auto_retry_start", since=start)
    assert pi.index_of(first_end) < pi.index_of(retry) < pi.index_of(probe)
    assert pi.index_of(retry) == pi.index_of(first_end) + 1
    # Busy or not during the back-off: 0.73 says idle, 1.6 says streaming.
    assert probe["data"]["isStreaming"] is V1
    failed = first_end["messages"][-1]
    assert failed["role"] == "assistant" and failed["stopReason"] == "error"
    assert "500" in failed["errorMessage"] and "upstream exploded" in failed["errorMessage"]
    assert retry["attempt"] == 1 and retry["maxAttempts"] == 3 and retry["delayMs"] == 1000
    assert retry["errorMessage"] == failed["errorMessage"]
    if V1:
        assert first_end["willRetry"] is True
    else:
        assert "willRetry" not in first_end

    second_end = pi.wait_event("agent_end", since=pi.index_of(retry) + 1, timeout=20)
    expect_settled(pi, second_end)
    lines = pi.log[start : pi.index_of(second_end) + 1]
    seq = [k for k in kinds(lines) if k != "response:get_state"]
    assert seq == first_run(
        [
            "response:prompt",
            "agent_start",
            "turn_start",
            "message_start:user",
            "message_end:user",
            "message_start:assistant",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "auto_retry_start",
            *(["entry_appended"] if V1 else []),  # the context_edit that hides the failure
            "agent_start",
            "turn_start",
            "message_start:assistant",
            "message_update",
            "message_end:assistant",
            "auto_retry_end",
            "turn_end",
            "agent_end",
        ]
    )
    assert "agent_settled" not in kinds(pi.log[start : pi.index_of(second_end)])
    retry_end = next(e for e in lines if e["type"] == "auto_retry_end")
    assert retry_end == {"type": "auto_retry_end", "success": True, "attempt": 1}
    if V1:
        assert second_end["willRetry"] is False
    state = pi.get_state()
    # The failed attempt left the context (messageCount counts 1.6's system message too)...
    live = ["system", "user", "assistant"] if V1 else ["user", "assistant"]
    assert state["messageCount"] == len(live)
    assert roles(pi.call("get_messages")["messages"]) == live
    # ...but stays in the file; 1.6 appends a context_edit that omits it from the context.
    entries = read_session(session)
    assert session_roles(session) == [*(["system"] if V1 else []), "user", "assistant", "assistant"]
    failed_entry = next(
        e for e in entries if e["type"] == "message" and e["message"].get("stopReason") == "error"
    )
    edits = [e for e in entries if e["type"] == "context_edit"]
    if V1:
        edit = next(e for e in lines if e["type"] == "entry_appended")["entry"]
        assert edits == [edit]
        assert edit["targetId"] == failed_entry["id"] and edit["replacement"] is None
        assert edit["parentId"] == failed_entry["id"]
    else:
        assert edits == []
    assert pi.close() == 0
    # On resume 0.73 puts the failed attempt back in the context (it is on the entry chain);
    # 1.6 keeps it out (the context_edit is on the chain too).
    resumed = lab.spawn_pi(session=session)
    assert resumed.get_state()["messageCount"] == 3
    restored = resumed.call("get_messages")["messages"]
    if V1:
        assert roles(restored) == ["system", "user", "assistant"]
        assert restored[-1]["stopReason"] == "stop"
    else:
        assert roles(restored) == ["user", "assistant", "assistant"]
        assert [m["stopReason"] for m in restored[1:]] == ["error", "stop"]


def test_compaction_follows_agent_end_before_any_later_response() -> None:
    """Threshold compaction after a run: `compaction_start` is the line after `agent_end`,
    before the response to any command sent on seeing `agent_end`.

    Holds for: 0.73.1; 1.6.0 (skips compaction when nothing falls outside
    `compaction.keepRecentTokens`, e.g. a first exchange with the default 20000; when it
    compacts, `isStreaming` stays true and `agent_settled` follows `compaction_end`).
    """
    # 10000 prompt tokens > 20000 - reserveTokens(16384): over the threshold.
    with Lab(llm=True, context_window=20000) as lab:
        lab.llm.add(last_user_contains("TASK-C"), text("big answer", usage=(10000, 10)), times=1)
        lab.llm.set_default(text("summary of the conversation"))
        pi = lab.spawn_pi(session=lab.root / "c.jsonl")
        pi.get_state()
        start = pi.mark()
        pi.prompt("TASK-C")
        end = pi.wait_event("agent_end", since=start)
        probe = pi.send({"type": "get_state"})
        if V1:
            # Nothing to summarize: the whole exchange is within keepRecentTokens. Settled at
            # once, before the answer to the probe.
            settled = expect_settled(pi, end)
            assert settled is not None and pi.index_of(settled) < pi.index_of(probe)
            assert probe["data"]["isCompacting"] is False
            assert "compaction_start" not in kinds(pi.log[start:])
            assert len(lab.llm.requests) == 1
        else:
            comp = pi.wait_event("compaction_start", since=start)
            assert pi.index_of(end) + 1 == pi.index_of(comp) < pi.index_of(probe)
            assert probe["data"]["isCompacting"] is True
            pi.wait_event("compaction_end", since=start, timeout=20)
            assert len(lab.llm.requests) == 2  # the summary is a request of its own

    # With a tiny keepRecentTokens both compact the first exchange.
    with Lab(llm=True, context_window=20000, pi_settings={"compaction": {"keepRecentTokens": 1}}) as lab:
        lab.llm.add(last_user_contains("TASK-C"), text("big answer", usage=(10000, 10)), times=1)
        summary_gate = threading.Event()  # keeps the compaction in progress for the probe
        lab.llm.set_default(text("summary of the conversation", hold=summary_gate))
        pi = lab.spawn_pi(session=lab.root / "c.jsonl")
        pi.get_state()
        start = pi.mark()
        pi.prompt("TASK-C")
        end = pi.wait_event("agent_end", since=start)
        probe = pi.send({"type": "get_state"})
        comp = pi.wait_event("compaction_start", since=start)
        assert pi.index_of(end) + 1 == pi.index_of(comp) < pi.index_of(probe)
        assert comp == {"type": "compaction_start", "reason": "threshold"}
        assert probe["data"]["isCompacting"] is True
        assert probe["data"]["isStreaming"] is V1  # 1.6: still busy until settled
        assert lab.llm.wait_for_request(since=1).rule is None  # the summary request, held
        summary_gate.set()
        done = pi.wait_event("compaction_end", since=start, timeout=20)
        print("\n[compaction_end]", json.dumps(done)[:300])
        assert done["reason"] == "threshold" and done["willRetry"] is False
        assert done["aborted"] is False
        assert "summary of the conversation" in done["result"]["summary"]
        result_keys = {"summary", "firstKeptEntryId", "tokensBefore", "details"}
        if V1:
            result_keys |= {"estimatedTokensAfter", "usage"}
        assert set(done["result"]) == result_keys
        if FEATURES.settled_event:
            settled = pi.wait_event("agent_settled", since=start)
            assert pi.index_of(settled) == pi.index_of(done) + 1 and settled == SETTLED
        state = pi.get_state()
        assert state["isCompacting"] is False and state["isStreaming"] is False
        kept = ["system", "compactionSummary", "assistant"] if V1 else ["compactionSummary", "assistant"]
        assert roles(pi.call("get_messages")["messages"]) == kept
        assert [e["type"] for e in read_session(lab.root / "c.jsonl")][-1] == "compaction"
        assert kinds(pi.log[start:]).count("agent_settled") == (1 if FEATURES.settled_event else 0)


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


def test_extension_send_message_ui_and_session_info(lab: Lab) -> None:
    """An extension: what it knows, `pi.sendMessage` idle and busy, dialogs from a tool.

    Holds for: 0.73.1; 1.6.0 (the first run, even one a custom message starts, opens with
    the system message; `agent_settled` ends each run).
    """
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
    lab.llm.add(last_user_contains("TASK-UI"), tool_call("ask_user", {"question": "Colour?"}), times=1)
    lab.llm.add(last_is_tool_result("ask_user"), text("thanks"), times=1)
    pi = lab.spawn_pi(
        session=session,
        extensions=[ext],
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
        custom = {"customType": "x", "content": "hello-idle", "display": True, "details": {"seq": 1}}
        assert ch.ask(
            {"op": "send", "message": custom, "options": {"deliverAs": "steer", "triggerTurn": True}}
        )["wasIdle"]
        end = pi.wait_event("agent_end", since=start)
        expect_settled(pi, end)
        lines = pi.log[start : pi.index_of(end) + 1]
        assert kinds(lines)[: 6 if V1 else 4] == first_run(
            [
                "agent_start",
                "turn_start",
                "message_start:custom",
                "message_end:custom",
            ]
        )
        msg = next(
            e["message"] for e in lines if e["type"] == "message_end" and e["message"]["role"] == "custom"
        )
        assert msg == {**custom, "role": "custom", "timestamp": msg["timestamp"]}
        assert [m["role"] for m in end["messages"]] == [*(["system"] if V1 else []), "custom", "assistant"]
        req = lab.llm.requests[-1]
        assert req["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "hello-idle"}]}
        # Role "custom" in the state (after 1.6's system message).
        assert pi.call("get_messages")["messages"][1 if V1 else 0] == msg
        stored = [e for e in read_session(session) if e["type"] == "custom_message"]
        assert len(stored) == 1
        assert {k: stored[0][k] for k in ("customType", "content", "display", "details")} == custom

        # Idle without triggerTurn: stored and announced, no run.
        start = pi.mark()
        quiet = {"customType": "x", "content": "quiet note", "display": False, "details": {"seq": 2}}
        ch.ask({"op": "send", "message": quiet, "options": {"triggerTurn": False}})
        m_end = pi.wait_event("message_end", since=start)
        assert m_end["message"]["content"] == "quiet note"
        pi.get_state()  # a round trip: anything the message caused has been printed
        assert [e["type"] for e in pi.log[start:]] == ["message_start", "message_end", "response"]

        # Busy + deliverAs steer: applied after the tool batch; not counted as pending.
        start = pi.mark()
        n_requests = len(lab.llm.requests)
        pi.prompt("TASK-X")
        lab.llm.wait_for_request(last_user_contains("TASK-X"), since=n_requests)
        busy = {"customType": "x", "content": "hello-busy", "display": True, "details": {"seq": 3}}
        assert (
            ch.ask({"op": "send", "message": busy, "options": {"deliverAs": "steer", "triggerTurn": True}})[
                "wasIdle"
            ]
            is False
        )
        assert pi.get_state()["pendingMessageCount"] == 0
        gate.set()
        end = pi.wait_event("agent_end", since=start, timeout=20)
        expect_settled(pi, end)
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
        sel = pi.wait_event("extension_ui_request", lambda e: e["method"] == "select", since=start)
        assert sel == {
            "type": "extension_ui_request",
            "id": sel["id"],
            "method": "select",
            "title": "Colour?",
            "options": ["red", "green"],
        }
        assert pi.get_state()["isStreaming"] is True
        pi.answer_ui(sel["id"], value="green")
        conf = pi.wait_event("extension_ui_request", lambda e: e["method"] == "confirm", since=start)
        assert conf == {
            "type": "extension_ui_request",
            "id": conf["id"],
            "method": "confirm",
            "title": "Sure?",
            "message": "Really sure?",
        }
        pi.answer_ui(conf["id"], confirmed=True)
        inp = pi.wait_event("extension_ui_request", lambda e: e["method"] == "input", since=start)
        assert inp == {
            "type": "extension_ui_request",
            "id": inp["id"],
            "method": "input",
            "title": "Name?",
            "placeholder": "type a name",
        }
        pi.answer_ui(inp["id"], cancelled=True)
        end = pi.wait_event("agent_end", since=start, timeout=20)
        expect_settled(pi, end)
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


# ---- i: agent_settled ------------------------------------------------------------------------


def test_agent_settled_once_per_prompt_after_retry_and_compaction() -> None:
    """`agent_settled` closes a prompt's work: right after a plain run's `agent_end`, after
    the retry's `agent_end` when a run is retried, after `compaction_end` when the run is
    followed by a compaction; exactly one per prompt. roost's worker settles on it
    (PiFeatures.settled_event) instead of probing with `get_state` after `agent_end`.

    Holds for: 1.6.0 (`{"type":"agent_settled","aborted":false}`); 0.73.1 prints none.
    """
    with Lab(llm=True, context_window=20000, pi_settings={"compaction": {"keepRecentTokens": 1}}) as lab:
        lab.llm.add(last_user_contains("PLAIN"), text("plain answer"), times=1)
        lab.llm.add(last_user_contains("RETRY"), error(503, "busy upstream"), times=1)
        lab.llm.add(last_user_contains("RETRY"), text("second try worked"), times=1)
        # 10000 prompt tokens > 20000 - reserveTokens(16384): compaction after the run.
        lab.llm.add(last_user_contains("BIG"), text("big answer", usage=(10000, 10)), times=1)
        lab.llm.set_default(text("summary"))
        pi = lab.spawn_pi(session=lab.root / "s.jsonl")
        pi.get_state()

        # A plain run.
        lines = run_settled(pi, "PLAIN")
        if FEATURES.settled_event:
            assert kinds(lines)[-2:] == ["agent_end", "agent_settled"] and lines[-1] == SETTLED

        # A retried run: agent_end (willRetry), back-off, the retry's run, then settled.
        start = pi.mark()
        disposition(pi.prompt("RETRY"), "started")
        retry_end = pi.wait_event("auto_retry_end", since=start, timeout=20)
        end = pi.wait_event("agent_end", since=pi.index_of(retry_end) + 1)
        if FEATURES.settled_event:
            settled = pi.wait_event("agent_settled", since=start, timeout=20)
            assert pi.index_of(settled) == pi.index_of(end) + 1 and settled == SETTLED
        seq = [k for k in kinds(pi.log[start:]) if not k.startswith("response:")]
        assert seq.count("agent_end") == 2 and seq.count("auto_retry_start") == 1

        # A run followed by a threshold compaction: settled once the compaction is done.
        start = pi.mark()
        disposition(pi.prompt("BIG"), "started")
        end = pi.wait_event("agent_end", since=start)
        comp = pi.wait_event("compaction_start", since=start)
        done = pi.wait_event("compaction_end", since=start, timeout=20)
        assert pi.index_of(end) < pi.index_of(comp) < pi.index_of(done)
        assert done["result"] is not None and done["willRetry"] is False
        if FEATURES.settled_event:
            settled = pi.wait_event("agent_settled", since=start)
            assert pi.index_of(settled) == pi.index_of(done) + 1 and settled == SETTLED

        # Nothing more comes: one agent_settled per prompt (none on 0.73).
        state = pi.get_state()
        assert state["isStreaming"] is False and state["isCompacting"] is False
        settles = [e for e in pi.log if e["type"] == "agent_settled"]
        assert len(settles) == (3 if FEATURES.settled_event else 0)
        assert pi.close() == 0


# ---- j: the prompt response's disposition ------------------------------------------------------

LEGACY_EXT_TS = r"""
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";
import { Text } from "@mariozechner/pi-tui";

export default function (pi: ExtensionAPI) {
  const label = new Text("tui text", 0, 0);
  pi.registerCommand("cmd", {
    description: "A test command",
    handler: async (args, ctx) => {
      ctx.ui.notify(`cmd ran: ${args}`, "info");
    },
  });
  pi.registerTool({
    name: "probe_tool",
    label: "Probe",
    description: `Text is a ${typeof Text} (${label.constructor.name})`,
    parameters: Type.Object({ q: Type.String() }),
    async execute(_id, params) {
      return { content: [{ type: "text", text: `q=${params.q}` }], details: { q: params.q } };
    },
  });
}
"""


def test_prompt_response_disposition(lab: Lab) -> None:
    """What a `prompt` response says happened to the prompt: `started` a run (idle),
    `queued` into the running one (`streamingBehavior: "steer"`), or `handled` by an
    extension command (no message, no run follows). roost's worker finishes a handled item
    at once (PiFeatures.prompt_disposition).

    Holds for: 1.6.0; 0.73.1 answers `{success: true}` with no `data` in all three cases.
    """
    ext = lab.root / "legacy.ts"
    ext.write_text(LEGACY_EXT_TS)
    gate = threading.Event()
    lab.llm.add(last_user_contains("TASK-D"), text("answer", hold=gate), times=1)
    lab.llm.add(last_user_contains("STEER-D"), text("saw the steer"), times=1)
    pi = lab.spawn_pi(extensions=[ext])
    pi.get_state()

    # An extension command while idle: handled, its notify comes first; nothing follows.
    start = pi.mark()
    resp = pi.prompt("/cmd hello")
    disposition(resp, "handled")
    note = pi.wait_event("extension_ui_request", since=start)
    assert pi.index_of(note) < pi.index_of(resp)
    assert {k: note[k] for k in ("method", "message", "notifyType")} == {
        "method": "notify",
        "message": "cmd ran: hello",
        "notifyType": "info",
    }
    pi.get_state()
    assert [k for k in kinds(pi.log[start:])] == [
        "extension_ui_request",
        "response:prompt",
        "response:get_state",
    ]
    assert lab.llm.requests == []

    # Idle: started. During the run: a steer is queued, an extension command is handled.
    start = pi.mark()
    disposition(pi.prompt("TASK-D"), "started")
    lab.llm.wait_for_request(last_user_contains("TASK-D"))
    disposition(pi.prompt("STEER-D", streamingBehavior="steer"), "queued")
    resp = pi.prompt("/cmd busy")
    disposition(resp, "handled")  # it ran at once, in the middle of the run
    note = pi.wait_event("extension_ui_request", since=start)
    assert note["message"] == "cmd ran: busy" and pi.index_of(note) < pi.index_of(resp)
    gate.set()
    end = pi.wait_event("agent_end", since=start, timeout=20)
    expect_settled(pi, end)
    users = [
        e["message"]["content"][0]["text"]
        for e in pi.log[start:]
        if e["type"] == "message_end" and e["message"]["role"] == "user"
    ]
    assert users == ["TASK-D", "STEER-D"]  # the command never became a message
    assert kinds(pi.log[start:]).count("agent_start") == 1


# ---- k: shutdown by signal in the middle of a tool ------------------------------------------


def _start_long_tool_with_queued_steer(lab: Lab, name: str) -> tuple[PiRpc, Path, list[psutil.Process]]:
    """A pi running `bash: sleep` with an extension steer queued behind it; its session
    file, and the tool's processes."""
    ext = lab.root / "ext.ts"
    ext.write_text(EXTENSION_TS)
    sock = lab.root / f"{name}.sock"
    session = lab.root / f"{name}.jsonl"
    lab.llm.add(
        last_user_contains(f"TASK-{name}"),
        tool_call("bash", {"command": "echo started; sleep 60; echo never"}),
        times=1,
    )
    pi = lab.spawn_pi(session=session, extensions=[ext], extra_env={"PITEST_EXT_SOCK": str(sock)})
    pi.get_state()
    ch = ExtSocket(sock)
    try:
        start = pi.mark()
        pi.prompt(f"TASK-{name}")
        pi.wait_event(
            "tool_execution_update", lambda e: "started" in json.dumps(e["partialResult"]), since=start
        )
        steer = {"customType": "x", "content": f"STEER-{name}", "display": True}
        assert (
            ch.ask({"op": "send", "message": steer, "options": {"deliverAs": "steer", "triggerTurn": True}})[
                "wasIdle"
            ]
            is False
        )
    finally:
        ch.close()
    pi.get_state()  # a round trip: the steer is queued

    def tool_processes() -> list[psutil.Process] | None:
        procs = psutil.Process(pi.proc.pid).children(recursive=True)
        try:  # a forked child may not have exec'd `sleep` yet
            return procs if sorted(p.name() for p in procs) == ["bash", "sleep"] else None
        except psutil.NoSuchProcess:
            return None

    return pi, session, wait_until(tool_processes, 10, "the tool's bash and sleep")


def test_sigterm_mid_tool_with_queued_extension_steer(lab: Lab) -> None:
    """SIGTERM to pi while a tool runs and an extension steer (`pi.sendMessage(...,
    {deliverAs: "steer", triggerTurn: true})`) waits: what the session keeps. roost's
    transcript.interrupted() reads such an ending as a run cut short. SIGKILL writes nothing.

    Holds for: 1.6.0 (exit 143 after writing the aborted tool result, the queued
    custom_message and an empty `aborted` assistant message; the model never got the steer);
    0.73.1 (exit 143 at once, writes nothing more: the file ends with the tool call, the
    steer is lost). Both: no stdout line after the signal; SIGTERM ends the tool's processes,
    SIGKILL leaves them running.
    """
    pi, session, tools = _start_long_tool_with_queued_steer(lab, "T")
    before = session.read_bytes()
    n = pi.mark()
    os.kill(pi.proc.pid, signal.SIGTERM)
    assert pi.proc.wait(10) == 143
    assert pi.log[n:] == []  # no agent_end, no agent_settled
    _, alive = psutil.wait_procs(tools, timeout=5)
    for p in alive:
        p.kill()
    assert alive == []  # pi ended the tool's processes
    entries = read_session(session)
    calls = [
        e
        for e in entries
        if e["type"] == "message"
        and e["message"]["role"] == "assistant"
        and e["message"].get("stopReason") == "toolUse"
    ]
    assert len(calls) == 1
    tail = entries[entries.index(calls[0]) + 1 :]
    if V1:
        result, steer, aborted = tail
        tc_id = calls[0]["message"]["content"][0]["id"]
        assert result["message"] == {
            "role": "toolResult",
            "toolCallId": tc_id,
            "toolName": "bash",
            # the output so far, then the abort
            "content": [{"type": "text", "text": "started\n\n\nCommand aborted"}],
            "details": {},
            "isError": True,
            "durationMs": result["message"]["durationMs"],
            "timestamp": result["message"]["timestamp"],
        }
        assert steer["type"] == "custom_message" and steer["content"] == "STEER-T"
        assert steer["parentId"] == result["id"] and aborted["parentId"] == steer["id"]
        answer = aborted["message"]
        assert answer["role"] == "assistant" and answer["content"] == []
        assert answer["stopReason"] == "aborted"
        assert answer["errorMessage"] == "This operation was aborted"
        assert answer["usage"]["totalTokens"] == 0  # no model request was made for it
    else:
        assert tail == [] and session.read_bytes() == before
    assert len(lab.llm.requests) == 1
    assert "STEER-T" not in json.dumps(lab.llm.requests[0]["messages"])

    # SIGKILL: nothing more is written, and the tool's processes are orphaned. bash leads a
    # process group of its own: killing pi's group would not reach it either.
    pi2, session2, tools2 = _start_long_tool_with_queued_steer(lab, "K")
    before = session2.read_bytes()
    try:
        bash = next(p for p in tools2 if p.name() == "bash")
        assert os.getpgid(bash.pid) == bash.pid != os.getpgid(pi2.proc.pid)
        os.kill(pi2.proc.pid, signal.SIGKILL)
        assert pi2.proc.wait(10) == -signal.SIGKILL
        assert all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tools2)
        assert session2.read_bytes() == before
        assert session_roles(session2)[-2:] == ["user", "assistant"]
    finally:
        for p in tools2:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


# ---- l: when the session file is first written ------------------------------------------------


def test_session_file_is_written_at_the_first_user_message(lab: Lab) -> None:
    """Is a new session on disk before the model has answered, e.g. if pi dies then?

    Holds for: 1.6.0 (yes: the file is created with the first user message, before the
    model request: header, model_change, thinking_level_change, system and user messages,
    and a resumed pi has them); 0.73.1 (no: only at the first assistant message, so a pi
    killed before the answer leaves no file and the prompt is lost).
    """
    session = lab.root / "new" / "s.jsonl"
    gate = threading.Event()
    lab.llm.add(last_user_contains("TASK-W"), text("late answer", hold=gate), times=1)
    pi = lab.spawn_pi(session=session)
    pi.get_state()
    assert not session.exists()
    start = pi.mark()
    pi.prompt("TASK-W")
    lab.llm.wait_for_request(last_user_contains("TASK-W"))  # pi has sent the request
    if V1:
        assert [e["type"] for e in read_session(session)] == [
            "session",
            "model_change",
            "thinking_level_change",
            "message",
            "message",
        ]
        assert session_roles(session) == ["system", "user"]
        user = read_session(session)[-1]["message"]
        ended = pi.wait_event("message_end", lambda e: e["message"]["role"] == "user", since=start)
        assert user == ended["message"]
    else:
        assert not session.exists()
    os.kill(pi.proc.pid, signal.SIGKILL)
    pi.proc.wait(10)
    gate.set()

    resumed = lab.spawn_pi(session=session)
    restored = resumed.call("get_messages")["messages"]
    if V1:
        assert roles(restored) == ["system", "user"]
        assert restored[1]["content"] == [{"type": "text", "text": "TASK-W"}]
    else:
        assert restored == [] and not session.exists()


# ---- m: extension imports ---------------------------------------------------------------------


def test_extension_with_legacy_imports_loads(lab: Lab) -> None:
    """An extension importing `Text` from "@mariozechner/pi-tui" and `Type` from "typebox"
    (as roost's own extension does) loads, and its TypeBox tool works.

    Holds for: 0.73.1 (its own package names); 1.6.0 (maps the legacy `@mariozechner/*`
    names to its modules: docs/extensions.md "Available Imports").
    """
    ext = lab.root / "legacy.ts"
    ext.write_text(LEGACY_EXT_TS)
    lab.llm.add(last_user_contains("TASK-L"), tool_call("probe_tool", {"q": "x"}), times=1)
    lab.llm.add(last_is_tool_result("probe_tool"), text("done"), times=1)
    pi = lab.spawn_pi(extensions=[ext])
    pi.get_state()
    lines = run_settled(pi, "TASK-L")
    tools = {t["function"]["name"]: t["function"] for t in lab.llm.requests[0]["tools"]}
    assert tools["probe_tool"]["description"] == "Text is a function (Text)"
    assert tools["probe_tool"]["parameters"]["required"] == ["q"]
    tool_end = next(e for e in lines if e["type"] == "tool_execution_end")
    assert tool_end["isError"] is False and tool_end["result"]["details"] == {"q": "x"}
    assert lab.llm.requests[-1]["messages"][-1]["content"] == "q=x"
    assert not [e for e in pi.log if e["type"] == "extension_error"]
