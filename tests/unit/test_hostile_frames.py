"""Frames that are not what they claim (docs/security.md, door 3), on the shared JSON-lines server
(roost/wire/connection.py, which roostd and the worker's extension channel both run): a string
that is not valid Unicode anywhere in a request is refused with `bad_request` before any
handler sees it; an answer that cannot be encoded becomes an `internal` error for its own
request, and the connection and the other requests go on; a push that cannot be encoded
is dropped, not the connection. And the rule for names (roost.text.unicode.clean_name)."""

from __future__ import annotations

import asyncio
import json
import socket
import unicodedata
from typing import Any

import pytest

from roost.text import unicode as unitext
from roost.wire import protocol
from roost.wire.connection import Connection, serve_connection
from roost.wire.protocol import MAX_FRAME, Op

LONE = "\ud800"


@pytest.mark.parametrize(
    "frame, where",
    [
        ({"op": "run", "name": LONE}, "name"),
        ({"op": "run", "task": "ok", "env": {"A": "x" + LONE}}, "env.A"),
        ({"op": "run", "command": ["true", "a", LONE + "b"]}, "command[2]"),
        ({"op": "run", "env": {LONE: "x"}}, "a key of env"),
        ({"op": LONE}, "op"),
        ({"op": "send", "message": {"deep": [[{"x": "\udfff"}]]}}, "message.deep[0][0].x"),
    ],
)
def test_a_lone_surrogate_anywhere_is_found(frame: dict[str, Any], where: str) -> None:
    assert protocol.invalid_text(frame) == where


def test_valid_text_passes() -> None:
    frame = json.loads('{"op": "run", "name": "\\ud83d\\ude00 ok", "env": {"Ключ": "数学"}}')
    assert protocol.invalid_text(frame) is None


def test_scrub_text_replaces_only_lone_surrogates() -> None:
    frame = json.loads('{"a": ["x\\ud83d", {"\\udc00k": "\\ud83d\\ude00 ok"}], "n": 1}')
    assert protocol.scrub_text(frame) == {"a": ["x\ufffd", {"\ufffdk": "\U0001f600 ok"}], "n": 1}
    assert protocol.invalid_text(protocol.scrub_text(frame)) is None


# -- the server ------------------------------------------------------------------------------------
OPS = {name: Op(name, "any") for name in ("echo", "bad_answer", "huge_answer", "push_bad")}


async def _serve_pair(calls: list[str]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    left, right = socket.socketpair()

    async def echo(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        calls.append("echo")
        return {"name": request.get("name")}

    async def bad_answer(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        return {"name": LONE}  # what a job named by a lone surrogate made of every `list`

    async def huge_answer(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        return {"text": "x" * (MAX_FRAME + 10)}

    async def push_bad(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        dropped = await conn.send(protocol.event("log", entry={"text": LONE}))
        sent = await conn.send(protocol.event("log", entry={"text": "after"}))
        return {"dropped": dropped, "sent": sent, "closed": conn.closed.is_set()}

    handlers = {"echo": echo, "bad_answer": bad_answer, "huge_answer": huge_answer, "push_bad": push_bad}
    reader, writer = await asyncio.open_unix_connection(sock=left)
    server_reader, server_writer = await asyncio.open_unix_connection(sock=right, limit=MAX_FRAME + 2)
    conn = Connection(server_reader, server_writer)
    asyncio.get_running_loop().create_task(serve_connection(conn, handlers, OPS, lambda c, o: None))
    return reader, writer


async def _exchange(lines: list[bytes], answers: int) -> list[dict[str, Any]]:
    reader, writer = await _serve_pair([])
    for line in lines:
        writer.write(line + b"\n")
    await writer.drain()
    frames = []
    for _ in range(answers):
        line = await asyncio.wait_for(reader.readline(), 10)
        assert line, "the server closed the connection"
        frames.append(json.loads(line))
    writer.close()
    return frames


def by_id(frames: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {f.get("id"): f for f in frames if f.get("type") == "response"}


def test_a_request_with_a_lone_surrogate_is_refused_before_its_handler() -> None:
    calls: list[str] = []

    async def go() -> list[dict[str, Any]]:
        reader, writer = await _serve_pair(calls)
        writer.write(
            b'{"id": 1, "op": "echo", "name": "\\ud800"}\n'
            b'{"id": "\\udc00", "op": "echo"}\n'
            b'{"id": 3, "op": "echo", "name": "fine"}\n'
        )
        await writer.drain()
        frames = [json.loads(await asyncio.wait_for(reader.readline(), 10)) for _ in range(3)]
        writer.close()
        return frames

    answers = by_id(asyncio.run(go()))
    assert answers[1]["error"]["code"] == "bad_request" and "name" in answers[1]["error"]["message"]
    assert answers[None]["error"]["code"] == "bad_request"  # its id could not be echoed
    assert answers[3]["ok"] and answers[3]["result"] == {"name": "fine"}
    assert calls == ["echo"]  # only the valid request reached a handler


def test_an_unencodable_answer_is_an_internal_error_and_the_rest_go_on() -> None:
    frames = asyncio.run(
        _exchange(
            [
                b'{"id": 1, "op": "bad_answer"}',
                b'{"id": 2, "op": "huge_answer"}',
                b'{"id": 3, "op": "echo", "name": "still here"}',
            ],
            3,
        )
    )
    answers = by_id(frames)
    assert answers[1]["error"]["code"] == "internal"
    assert answers[2]["error"]["code"] == "internal"
    assert answers[3]["ok"] and answers[3]["result"]["name"] == "still here"


def test_a_push_that_cannot_be_encoded_is_dropped_not_the_connection() -> None:
    frames = asyncio.run(_exchange([b'{"id": 1, "op": "push_bad"}'], 2))
    events = [f for f in frames if f.get("type") == "event"]
    assert [e["entry"]["text"] for e in events] == ["after"]
    assert by_id(frames)[1]["result"] == {"dropped": False, "sent": True, "closed": False}


# -- names -----------------------------------------------------------------------------------------
def _format_chars() -> list[str]:
    return [chr(c) for c in range(0x80, 0x110000) if unicodedata.category(chr(c)) == "Cf"]


def test_every_format_character_is_refused_in_a_name() -> None:
    chars = _format_chars()
    assert len(chars) > 150
    for char in chars:
        with pytest.raises(ValueError):
            unitext.clean_name(f"job{char}x")


@pytest.mark.parametrize("char", ["\u202e", "\u202a", "\u2066", "\u2069", "\u200e", "\u200f", "\u061c"])
def test_bidi_controls_are_named_in_the_refusal(char: str) -> None:
    with pytest.raises(ValueError, match="bidi"):
        unitext.clean_name(f"report{char}fdp.exe")


@pytest.mark.parametrize(
    "char",
    [
        "\u034f",
        "\u115f",
        "\u1160",
        "\u3164",
        "\uffa0",
        "\ufe0f",
        "\U000e0100",
        "\u180b",
        "\u200b",
        "\u2060",
        "\U000e0061",
    ],
)
def test_invisible_characters_are_refused(char: str) -> None:
    with pytest.raises(ValueError, match="invisible"):
        unitext.clean_name(f"na{char}me")


@pytest.mark.parametrize("name", ["pаypal", "tеst-job", "bυild"])  # Cyrillic а, е; Greek υ
def test_letters_of_two_scripts_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="mixes letters"):
        unitext.clean_name(name)


@pytest.mark.parametrize(
    "raw, kept",
    [
        ("ｂｕｉｌｄ", "build"),
        ("ﬁx", "fix"),
        ("Ключ", "Ключ"),
        ("数学 review", "数学 review"),
        ("日本語のテスト job", "日本語のテスト job"),
        ("build 2", "build 2"),
    ],
)
def test_names_are_kept_nfkc_normalised(raw: str, kept: str) -> None:
    assert unitext.clean_name(raw) == kept


def test_a_lookalike_of_another_name_is_named() -> None:
    others = {"build": "job a1", "deploy": "job b2"}
    assert unitext.imitates("bui1d", others) == "job a1"  # digit one for l
    assert unitext.imitates("\u0501eploy", others) == "job b2"  # Cyrillic komi de
    assert unitext.imitates("build", others) is None  # itself: not an imitation
    assert unitext.imitates("test", others) is None
