"""The socket protocol under hostile input (hypothesis): arbitrary bytes, truncated,
non-UTF-8, deeply nested and oversize frames, and bursts of them, never take roostd down or
change a job; each frame gets its documented error (README: `bad_frame`, `frame_too_large`,
`unknown_op`, `bad_request`, ... never `internal`), and the connection keeps working."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kit.lab import Lab

from roost.wire import protocol
from roost.wire.protocol import MAX_FRAME, ProtocolError

OPS = [
    "status",
    "run",
    "list",
    "show",
    "reply",
    "wait",
    "stop",
    "start",
    "rm",
    "attach",
    "detach",
    "peers",
    "send",
    "spawn",
    "peer_register",
    "worker_hello",
    "handback",
    "no_such_op",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(st.binary(max_size=2000))
@settings(max_examples=300, deadline=None)
def test_decode_returns_an_object_or_raises_a_protocol_error(raw: bytes) -> None:
    try:
        frame = protocol.decode(raw)
    except ProtocolError:
        return
    assert isinstance(frame, dict)


def test_decode_refuses_deep_nesting_and_oversize() -> None:
    for raw in (
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b'"' + b"x" * (MAX_FRAME + 1) + b'"',
    ):
        with pytest.raises(ProtocolError):
            protocol.decode(raw)


class Raw:
    """A raw connection to roostd: write bytes, read its JSON lines."""

    def __init__(self, env: Lab) -> None:
        self.sock = env.connect(timeout=20)
        self.file = self.sock.makefile("rb")
        assert json.loads(self.file.readline())["type"] == "hello"

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self) -> dict[str, Any]:
        line = self.file.readline(MAX_FRAME + 2)
        assert line, "roostd closed the connection"
        return json.loads(line)

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@pytest.fixture
def live(fake_pi_env: Lab) -> Iterator[tuple[Lab, list[dict[str, Any]]]]:
    env = fake_pi_env
    env.roost_ok("run", "--name", "keeper", "a job that must not change")
    before = env.request("list")["jobs"]
    yield env, before


def _error_code(raw: Raw) -> str | None:
    frame = raw.answer()
    assert frame.get("type") == "response", frame
    return None if frame.get("ok") else frame["error"]["code"]


def _frames() -> st.SearchStrategy[tuple[bytes, set[str | None]]]:
    """(bytes ending in a newline, the error codes that frame may get)."""
    anything: set[str | None] = {
        protocol.BAD_FRAME,
        protocol.BAD_REQUEST,
        protocol.UNKNOWN_OP,
        protocol.NOT_FOUND,
        protocol.REFUSED,
        protocol.UNAUTHORIZED,
    }
    garbage = (
        st.binary(min_size=1, max_size=300)
        .filter(lambda b: b"\n" not in b and b.strip())
        .map(lambda b: (b + b"\n", anything))
    )
    not_utf8 = st.just((b'{"op": "status", "x": "\xff\xfe"}\n', {protocol.BAD_FRAME}))
    not_object = json_values.filter(lambda v: not isinstance(v, dict)).map(
        lambda v: (json.dumps(v).encode() + b"\n", {protocol.BAD_FRAME})
    )
    nested = st.integers(min_value=2_000, max_value=200_000).map(
        lambda n: (b"[" * n + b"]" * n + b"\n", {protocol.BAD_FRAME})
    )
    no_op = st.dictionaries(st.text(max_size=8).filter(lambda k: k != "op"), json_values, max_size=4).map(
        lambda d: (json.dumps(d).encode() + b"\n", {protocol.BAD_REQUEST})
    )
    # Any op with arguments of any type: a refusal, never an internal error or a crash.
    wrong_args = st.tuples(
        st.sampled_from(OPS),
        st.dictionaries(
            st.sampled_from(
                [
                    "job",
                    "text",
                    "timeout",
                    "task",
                    "to",
                    "message",
                    "cwd",
                    "name",
                    "session",
                    "pid",
                    "token",
                    "cause",
                    "peer",
                ]
            ),
            json_values,
            max_size=5,
        ),
    ).map(lambda t: (json.dumps({"id": 7, "op": t[0], **t[1]}).encode() + b"\n", anything | {None}))
    return st.one_of(garbage, not_utf8, not_object, nested, no_op, wrong_args)


@given(burst=st.lists(_frames(), min_size=1, max_size=8))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_hostile_frames_get_their_error_and_change_nothing(
    live: tuple[Lab, list[dict[str, Any]]], burst: list[tuple[bytes, set[str | None]]]
) -> None:
    env, before = live
    raw = Raw(env)
    try:
        raw.send(b"".join(frame for frame, _ in burst))  # all at once: a burst
        # Requests are answered concurrently, so answers need not come in frame order:
        # every frame gets exactly one answer, each one an answer some frame may get.
        codes = [_error_code(raw) for _ in burst]
        allowed_any = set().union(*(allowed for _, allowed in burst))
        assert protocol.INTERNAL not in codes, codes
        assert all(code in allowed_any for code in codes), (codes, [f[:80] for f, _ in burst])
        if len(burst) == 1:
            assert codes[0] in burst[0][1], (burst[0][0][:120], codes[0])
        raw.send(protocol.encode({"id": 1, "op": "status"}))
        assert raw.answer()["ok"]  # the same connection still works
    finally:
        raw.close()
    after = env.request("list")["jobs"]
    assert [(j["id"], j["name"], j["kind"]) for j in after if j["id"] in {b["id"] for b in before}] == [
        (j["id"], j["name"], j["kind"]) for j in before
    ]


def test_oversize_truncated_and_closed_frames(live: tuple[Lab, list[dict[str, Any]]]) -> None:
    env, before = live
    raw = Raw(env)
    raw.send(b"{" + b"x" * (MAX_FRAME + 10) + b"\n")
    assert _error_code(raw) == protocol.FRAME_TOO_LARGE
    raw.send(protocol.encode({"id": 2, "op": "status"}))
    assert raw.answer()["ok"]
    raw.send(b'{"id": 3, "op": "sta')  # cut short, then the client goes away
    raw.sock.shutdown(socket.SHUT_WR)
    raw.close()
    assert env.request("status")["pid"] == env.daemon_pid()
    assert [j["id"] for j in env.request("list")["jobs"]] == [j["id"] for j in before]
