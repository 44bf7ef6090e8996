"""roost.wire.ops: each op's table entry is its arguments' TypedDict (roost.wire.requests), and a request
is checked against it once, where its frame arrives: a missing or wrong-typed argument is
answered `bad_request` naming the argument and what it must be."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from roost.wire import protocol
from roost.wire.connection import Bounds, Connection, serve_connection
from roost.wire.ops import DAEMON_OPS, EXTENSION_OPS, Op, run_request
from roost.wire.protocol import RequestError
from roost.wire.requests import JobRow, ReplyRequest, RunRequest, SpawnRequest


def test_every_ops_keys_are_its_typeddicts() -> None:
    for table in (DAEMON_OPS, EXTENSION_OPS):
        for name, op in table.items():
            assert op.name == name
            assert set(op.required) == set(op.args.__required_keys__), name  # type: ignore[attr-defined]
            assert set(op.optional) == set(op.args.__optional_keys__), name  # type: ignore[attr-defined]
            assert set(op.types) == set(op.required) | set(op.optional), name
    assert DAEMON_OPS["run"].args is RunRequest and DAEMON_OPS["spawn"].args is SpawnRequest
    assert DAEMON_OPS["spawn"].required == ("task",) and "queue" in DAEMON_OPS["spawn"].optional
    assert DAEMON_OPS["reply"].args is ReplyRequest and DAEMON_OPS["reply"].required == ("job",)
    assert DAEMON_OPS["message"].required == ("job", "message", "from")  # `from`: a keyword
    assert {"id", "state", "cwd", "usage"} <= JobRow.__required_keys__


@pytest.mark.parametrize(
    "request_, answer",
    [
        ({"task": "t"}, None),
        ({"task": "t", "priority": None, "model": None, "budget": 2}, None),  # null: left out
        ({"task": "t", "budget": 2.5, "after": ["a", "b"]}, None),
        ({"task": "t", "after": "a", "env": {"A": "1"}, "output_schema": "{}"}, None),
        ({"task": "t", "priority": "high"}, "priority must be a whole number, got a string"),
        ({"task": "t", "priority": True}, "priority must be a whole number, got true"),
        ({"task": "t", "priority": 1.5}, "priority must be a whole number, got a number"),
        ({"task": 7}, "task must be a string, got a number"),
        ({"task": "t", "worktree": "yes"}, "worktree must be true or false, got a string"),
        ({"task": "t", "budget": "5"}, "budget must be a number, got a string"),
        ({"task": "t", "after": [1]}, "after must be a string or a list of strings, got a list"),
        ({"task": "t", "env": ["A=1"]}, "env must be an object, got a list"),
        ({"shell": True, "command": "ls -l"}, "command must be a list of strings, got a string"),
        ({"task": "t", "output_schema": 3}, "output_schema must be an object or a string, got a number"),
    ],
)
def test_run_is_checked_by_its_arguments_types(request_: dict[str, Any], answer: str | None) -> None:
    assert DAEMON_OPS["run"].check(request_) == answer


def test_a_required_argument_null_or_empty_is_missing() -> None:
    op = DAEMON_OPS["wait_jobs"]
    assert op.check({"jobs": ["a"], "until": "done"}) is None
    assert op.check({"jobs": ["a"], "until": ""}) == "missing until"
    assert op.check({"until": "done", "jobs": None}) == "missing jobs"
    assert op.check({"jobs": "a", "until": "done"}) == "jobs must be a list of strings, got a string"
    assert DAEMON_OPS["peer_register"].check({"pid": "12"}) == "pid must be a whole number, got a string"
    assert DAEMON_OPS["status"].check({"anything": 1}) is None  # undeclared keys: an older client's


def test_a_run_inside_another_request_is_checked_as_run() -> None:
    assert run_request({"task": "t", "name": "n"}) == {"task": "t", "name": "n"}
    with pytest.raises(RequestError) as caught:
        run_request({"task": "t", "name": 3}, "run")
    assert caught.value.code == protocol.BAD_REQUEST
    assert caught.value.message == "run: name must be a string, got a number"


def test_a_frame_with_a_wrong_typed_field_is_answered_naming_it() -> None:
    """Through serve_connection, as roostd answers: the handler never sees the request."""

    async def go() -> list[dict[str, Any]]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        conn = Connection(reader, writer, Bounds())
        seen: list[dict[str, Any]] = []

        async def reply(_conn: Connection, request: ReplyRequest) -> dict[str, Any]:
            seen.append(dict(request))
            return {"status": "delivered"}

        ops: dict[str, Op] = {"reply": DAEMON_OPS["reply"]}
        server = asyncio.ensure_future(serve_connection(conn, {"reply": reply}, ops, lambda c, o: None))
        frames = [
            {"id": 1, "op": "reply", "job": "a1", "choice": "2"},
            {"id": 2, "op": "reply", "text": "hi"},
            {"id": 3, "op": "reply", "job": "a1", "text": "hi", "by": None},
        ]
        theirs.sendall(b"".join(protocol.encode(f) for f in frames))
        answers = []
        buffer = b""
        loop = asyncio.get_running_loop()
        theirs.setblocking(False)
        while len(answers) < 3:
            buffer += await asyncio.wait_for(loop.sock_recv(theirs, 65536), 30)
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                answers.append(protocol.decode(line))
        theirs.close()
        await server
        assert seen == [{"id": 3, "op": "reply", "job": "a1", "text": "hi", "by": None}]
        return sorted(answers, key=lambda a: a["id"])

    first, second, third = asyncio.run(go())
    assert first["ok"] is False and first["error"] == {
        "code": protocol.BAD_REQUEST,
        "message": "reply: choice must be a whole number, got a string",
    }
    assert second["ok"] is False and second["error"] == {
        "code": protocol.BAD_REQUEST,
        "message": "reply: missing job",
    }
    assert third["ok"] is True and third["result"] == {"status": "delivered"}
