"""FakeLLM over real HTTP: wire format, rule order and use counts, hold/delay, logging, CLI."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kit.procs import wait_until

from roost.fakellm import (
    FakeLLM,
    Request,
    any_message_contains,
    error,
    first_user_contains,
    has_tool,
    last_is_tool_result,
    last_tool_result_contains,
    last_user_contains,
    load_script,
    predicate,
    system_contains,
    text,
    tool_call,
    tool_calls,
)
from roost.fakellm.script import ScriptError
from roost.fakellm.server import _Handler

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def chat(
    messages: list[dict[str, Any]], *, stream: bool = True, tools: list[str] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "fake-model", "messages": messages, "stream": stream}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": n}} for n in tools]
    return body


def post(llm: FakeLLM, body: Any, path: str = "/chat/completions") -> tuple[int, dict, bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(llm.base_url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def sse_events(raw: bytes) -> list[Any]:
    """Parse `data: ...` SSE events; `[DONE]` becomes the string "[DONE]"."""
    out: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def user(text_: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text_}]}


# ---- wire format ---------------------------------------------------------------------------


def test_stream_text_is_openai_sse(llm: FakeLLM) -> None:
    llm.add(last_user_contains("hello"), text("Hello there, this is a longer answer " * 3))
    status, headers, raw = post(llm, chat([user("hello")]))
    assert status == 200
    assert headers["Content-Type"] == "text/event-stream"
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert content == "Hello there, this is a longer answer " * 3
    assert len([c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]) > 1
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finish] == ["stop"]
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0


def test_stream_tool_calls(llm: FakeLLM) -> None:
    llm.add(None, tool_calls(("bash", {"command": "echo hi"}), ("read", {"path": "a.txt"})))
    _, _, raw = post(llm, chat([user("go")]))
    chunks = [c for c in sse_events(raw)[:-1] if c["choices"]]
    calls: dict[int, dict[str, Any]] = {}
    for c in chunks:
        for tc in c["choices"][0]["delta"].get("tool_calls", []):
            slot = calls.setdefault(tc["index"], {"args": ""})
            if "id" in tc:
                slot["id"] = tc["id"]
                slot["name"] = tc["function"]["name"]
                assert tc["type"] == "function"
            slot["args"] += tc["function"].get("arguments", "")
    assert [calls[i]["name"] for i in sorted(calls)] == ["bash", "read"]
    assert json.loads(calls[0]["args"]) == {"command": "echo hi"}
    assert json.loads(calls[1]["args"]) == {"path": "a.txt"}
    assert calls[0]["id"] != calls[1]["id"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_text_plus_tool_call_and_fresh_ids(llm: FakeLLM) -> None:
    llm.add(None, text("let me look") + tool_call("bash", {"command": "ls"}))
    ids = []
    for _ in range(2):
        _, _, raw = post(llm, chat([user("x")]))
        chunks = [c for c in sse_events(raw)[:-1] if c["choices"]]
        assert chunks[1]["choices"][0]["delta"]["content"] == "let me look"
        ids += [
            tc["id"] for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", []) if "id" in tc
        ]
    assert len(ids) == 2 and ids[0] != ids[1]


def test_non_stream_json(llm: FakeLLM) -> None:
    llm.add(last_user_contains("a"), text("plain"), times=1)
    llm.add(None, tool_call("bash", {"command": "pwd"}))
    status, _, raw = post(llm, chat([user("a")], stream=False))
    body = json.loads(raw)
    assert status == 200 and body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "plain"}
    assert body["choices"][0]["finish_reason"] == "stop"
    _, _, raw = post(llm, chat([user("a")], stream=False))
    msg = json.loads(raw)["choices"][0]["message"]
    assert msg["content"] is None
    assert msg["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command":"pwd"}'}


def test_models_listing_and_errors(llm: FakeLLM) -> None:
    with urllib.request.urlopen(llm.base_url + "/models", timeout=5) as resp:
        assert json.loads(resp.read())["data"][0]["id"] == "fake-model"
    status, _, raw = post(llm, b"{not json")
    assert status == 400 and "could not decode" in json.loads(raw)["error"]["message"]
    status, _, _ = post(llm, chat([user("x")]), path="/nope")
    assert status == 404
    assert llm.requests == []  # neither reached the rules


def test_error_reply_is_not_retried_by_sdks(llm: FakeLLM) -> None:
    llm.add(None, error(503, "overloaded, try later"), times=1)
    status, headers, raw = post(llm, chat([user("x")]))
    assert status == 503
    assert headers["x-should-retry"] == "false"
    assert json.loads(raw)["error"]["message"] == "overloaded, try later"
    status, _, _ = post(llm, chat([user("x")]))
    assert status == 200  # used up: the default reply


# ---- rules ---------------------------------------------------------------------------------


def test_rule_order_times_and_default(llm: FakeLLM) -> None:
    first = llm.add(last_user_contains("x"), text("first"), times=2, name="first")
    llm.add(last_user_contains("x"), text("second"), name="second")
    llm.set_default("nothing matched")
    replies = []
    for msg in ["x", "x", "x", "y"]:
        _, _, raw = post(llm, chat([user(msg)], stream=False))
        replies.append(json.loads(raw)["choices"][0]["message"]["content"])
    assert replies == ["first", "first", "second", "nothing matched"]
    assert first.exhausted
    assert [r.rule for r in llm.requests] == ["first", "first", "second", None]
    assert [r.index for r in llm.unmatched] == [3]


def test_rules_added_and_cleared_while_running(llm: FakeLLM) -> None:
    t = threading.Thread(target=llm.add, args=(None, text("late rule")))
    t.start()
    t.join()
    _, _, raw = post(llm, chat([user("q")], stream=False))
    assert json.loads(raw)["choices"][0]["message"]["content"] == "late rule"
    llm.clear()
    assert llm.rules == []
    _, _, raw = post(llm, chat([user("q")], stream=False))
    assert json.loads(raw)["choices"][0]["message"]["content"] == "ok"
    llm.add(None, text("back of the line"))
    llm.add(None, text("front"), first=True)
    _, _, raw = post(llm, chat([user("q")], stream=False))
    assert json.loads(raw)["choices"][0]["message"]["content"] == "front"


def test_matchers() -> None:
    req = Request(
        {
            "messages": [
                {"role": "system", "content": "You are pi. ROOST"},
                user("TASK: job-a"),
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "bash", "arguments": '{"command":"ls"}'},
                        }
                    ],
                },
                {"role": "tool", "content": "file.txt", "tool_call_id": "c1"},
                user("steered text"),
                {"role": "tool", "content": "second result", "tool_call_id": "c1"},
            ],
            "tools": [{"type": "function", "function": {"name": "roost_send"}}],
        }
    )
    assert first_user_contains("job-a")(req)
    assert not first_user_contains("steered")(req)
    assert last_user_contains("steered")(req)
    assert not last_user_contains("job-a")(req)
    assert system_contains("ROOST")(req) and not system_contains("job-a")(req)
    assert any_message_contains('{"command":"ls"}')(req)
    assert any_message_contains("file.txt")(req)
    assert last_is_tool_result()(req) and last_is_tool_result("bash")(req)
    assert not last_is_tool_result("read")(req)
    assert last_tool_result_contains("second")(req)
    assert has_tool("roost_send")(req) and not has_tool("bash")(req)
    combo = first_user_contains("job-a") & last_is_tool_result("bash") & ~has_tool("bash")
    assert combo(req) and "first_user_contains" in combo.desc
    assert (first_user_contains("nope") | last_user_contains("steered"))(req)
    assert predicate(lambda r: len(r["messages"]) == 6)(req)


def test_callable_reply_and_its_errors(llm: FakeLLM) -> None:
    llm.add(last_user_contains("echo"), lambda r: text("you said " + r["messages"][-1]["content"]))

    def boom(r: Request) -> str:
        raise ZeroDivisionError("scripted failure")

    llm.add(last_user_contains("boom"), boom)
    _, _, raw = post(llm, chat([{"role": "user", "content": "echo me"}], stream=False))
    assert json.loads(raw)["choices"][0]["message"]["content"] == "you said echo me"
    status, _, _ = post(llm, chat([user("boom")], stream=False))
    assert status == 500
    assert "ZeroDivisionError" in llm.errors[0]


# ---- timing: hold, delay, chunk_delay --------------------------------------------------------


def test_hold_keeps_the_response_until_released(llm: FakeLLM) -> None:
    gate = threading.Event()
    llm.add(last_user_contains("slow"), text("released", hold=gate))
    result: dict[str, Any] = {}

    def client() -> None:
        result["resp"] = post(llm, chat([user("slow")]))
        result["at"] = time.monotonic()

    t = threading.Thread(target=client)
    t.start()
    req = llm.wait_for_request(last_user_contains("slow"), timeout=5)
    assert not req.completed and "resp" not in result
    released_at = time.monotonic()
    gate.set()
    t.join(5)
    assert result["at"] >= released_at
    assert b"released" in result["resp"][2]
    # The server marks the request completed after its last write, which the client may
    # have read first.
    wait_until(lambda: req.completed, 5, "the request marked completed")


def test_stop_releases_held_responses() -> None:
    gate = threading.Event()
    llm = FakeLLM().start()
    llm.add(None, text("x", hold=gate))
    t = threading.Thread(target=lambda: post(llm, chat([user("q")])), daemon=True)
    t.start()
    llm.wait_for_request(timeout=5)
    began = time.monotonic()
    llm.stop()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - began < 3


def test_delay_and_chunk_delay(llm: FakeLLM) -> None:
    llm.add(last_user_contains("d"), text("x", delay=0.3))
    llm.add(last_user_contains("c"), text("abcdef", chunk_size=1, chunk_delay=0.05))
    began = time.monotonic()
    post(llm, chat([user("d")]))
    assert time.monotonic() - began >= 0.3
    began = time.monotonic()
    _, _, raw = post(llm, chat([user("c")]))
    assert time.monotonic() - began >= 0.05 * 8  # role + 6 pieces + finish + usage + done
    assert (
        "".join(c["choices"][0]["delta"].get("content", "") for c in sse_events(raw)[:-1] if c["choices"])
        == "abcdef"
    )


def test_wait_for_request_since_and_timeout(llm: FakeLLM) -> None:
    post(llm, chat([user("one")]))
    mark = len(llm.requests)
    with pytest.raises(TimeoutError, match="one"):
        llm.wait_for_request(last_user_contains("one"), timeout=0.2, since=mark)
    threading.Timer(0.1, lambda: post(llm, chat([user("two")]))).start()
    req = llm.wait_for_request(last_user_contains("two"), timeout=5, since=mark)
    assert req.index == 1
    assert [r.index for r in llm.requests_matching(last_user_contains("o"))] == [0, 1]


# ---- logging -------------------------------------------------------------------------------


def test_request_log_file(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    with FakeLLM(log_path=log) as llm:
        llm.add(last_user_contains("a"), text("A"), name="rule-a")
        post(llm, chat([user("a")]))
        post(llm, chat([user("b")]))
        reqs = llm.requests
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(x["index"], x["rule"]) for x in lines] == [(0, "rule-a"), (1, None)]
    assert lines[0]["body"]["messages"] == [user("a")]
    assert reqs[0].t <= reqs[1].t and lines[0]["t"] == reqs[0].t


# ---- script format and CLI -----------------------------------------------------------------

SCRIPT = {
    "default": "default answer",
    "rules": [
        {"name": "once", "match": {"last_user_contains": "hi"}, "reply": "hello", "times": 1},
        {
            "match": {"first_user_contains": "job", "not": {"last_is_tool_result": True}},
            "reply": {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
        },
        {
            "match": {"any": [{"last_is_tool_result": "bash"}, {"system_contains": "zzz"}]},
            "reply": {"text": "done", "delay": 0.01},
        },
        {"match": {"last_user_contains": "fail"}, "reply": {"error": {"status": 500}}},
    ],
}


def test_load_script() -> None:
    rules, default = load_script(SCRIPT)
    assert [r.name for r in rules][0] == "once" and rules[0].times == 1
    assert default is not None and default.text == "default answer"
    assert rules[1].reply.tool_calls[0].name == "bash"  # type: ignore[union-attr]
    assert rules[3].reply.status == 500  # type: ignore[union-attr]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"rules": [{"match": {"nope": 1}, "reply": "x"}]}, "rules[0].match.nope"),
        ({"rules": [{"match": {}}]}, "needs a reply"),
        ({"rules": [{"reply": {"txt": "x"}}]}, "unknown reply keys"),
        ({"rules": [{"reply": "x", "times": 0}]}, "times"),
        ({"rulez": []}, "unknown keys"),
    ]
    for bad, where in cases:
        with pytest.raises(ScriptError, match=where.replace("[", r"\[").replace("]", r"\]")):
            load_script(bad)


def test_cli_serves_a_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    log = tmp_path / "log.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "roost.fakellm",
            "--port",
            "0",
            "--script",
            str(script),
            "--log",
            str(log),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("fakellm listening on http://127.0.0.1:"), line
        base = line.split()[-1]
        port = int(base.rsplit(":", 1)[1].split("/")[0])

        class Shim:
            base_url = base

        answers = []
        for messages in (
            [user("hi")],
            [user("hi")],
            [user("job 1")],
            [
                user("job 1"),
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "content": "hi", "tool_call_id": "c"},
            ],
        ):
            _, _, raw = post(Shim, chat(messages, stream=False))  # type: ignore[arg-type]
            msg = json.loads(raw)["choices"][0]["message"]
            answers.append(msg["content"] or msg["tool_calls"][0]["function"]["name"])
        assert answers == ["hello", "default answer", "bash", "done"]
        assert port > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(10)
    assert rc == 0
    assert [json.loads(x)["rule"] for x in log.read_text().splitlines()][0] == "once"


def test_cli_rejects_a_bad_script(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"rules": [{"match": {"wat": "x"}, "reply": "y"}]}))
    proc = subprocess.run(
        [sys.executable, "-m", "roost.fakellm", "--script", str(script)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=30,
        env={**os.environ},
    )
    assert proc.returncode == 2
    assert "rules[0].match.wat: unknown matcher" in proc.stderr


# ---- a client that hangs up --------------------------------------------------------------------


def _hang_up(client: socket.socket) -> None:
    """Close with a reset, as the kernel does for a killed process with unread data."""
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()


def _serve_one(fake: FakeLLM, talk: Any) -> list[BaseException]:
    """One connection handled by the server's own handler, in a thread: `talk(client)` then a
    reset; what the handler raised (socketserver prints it as a traceback)."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname()[:2])
    conn, addr = listener.accept()
    listener.close()
    raised: list[BaseException] = []

    def handle() -> None:
        try:
            _Handler(conn, addr, SimpleNamespace(fake=fake))  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - the test's finding
            raised.append(exc)
        finally:
            conn.close()

    thread = threading.Thread(target=handle, daemon=True)
    thread.start()
    try:
        talk(client)
    finally:
        _hang_up(client)
    thread.join(10)
    assert not thread.is_alive()
    return raised


def test_a_client_that_hangs_up_is_no_error() -> None:
    """pi killed by roost at a job's budget resets its connections: the idle keep-alive one
    (while the server waits for its next request), a stream being read, a body being sent.
    Each ends that connection quietly (no traceback on the demo's terminal)."""
    fake = FakeLLM()  # not started: its handler serves one socket per case below
    fake.add(last_user_contains("slow"), text("abcdef", chunk_size=1, chunk_delay=0.2))

    def idle_keep_alive(client: socket.socket) -> None:
        conn = http.client.HTTPConnection("127.0.0.1")
        conn.sock = client
        conn.request("GET", "/v1/models")
        assert conn.getresponse().read()  # a whole answer; the connection stays open

    def mid_stream(client: socket.socket) -> None:
        data = json.dumps(chat([user("slow")])).encode()
        client.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
        )
        assert client.recv(65536).startswith(b"HTTP/1.1 200")

    def mid_body(client: socket.socket) -> None:
        client.sendall(
            b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"model":'
        )

    for talk in (idle_keep_alive, mid_stream, mid_body):
        assert _serve_one(fake, talk) == [], talk.__name__
