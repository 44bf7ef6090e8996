"""roost.wire.protocol: a too-large frame is its own error, and a pushed event is checked against
its declaration in PUSHED_EVENTS."""

from __future__ import annotations

import asyncio

import pytest

from roost.wire import protocol
from roost.wire.connection import Connection, serve_connection
from roost.wire.protocol import MAX_FRAME, FrameTooLarge, ProtocolError


def test_a_frame_over_the_limit_raises_frame_too_large() -> None:
    with pytest.raises(FrameTooLarge):
        protocol.decode(b"[" * (MAX_FRAME + 1))
    with pytest.raises(FrameTooLarge):
        protocol.encode({"text": "x" * MAX_FRAME})
    assert issubclass(FrameTooLarge, ProtocolError)  # callers that catch any bad frame still do
    with pytest.raises(ProtocolError) as bad:
        protocol.decode(b"{nope")
    assert not isinstance(bad.value, FrameTooLarge)


async def _answers_to(lines: list[bytes]) -> list[dict[str, object]]:
    """What serve_connection answers to raw `lines` on an in-process socket pair."""
    import socket

    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=theirs, limit=MAX_FRAME + 1)
    server = asyncio.create_task(serve_connection(Connection(reader, writer), {}, {}, lambda conn, op: None))
    c_reader, c_writer = await asyncio.open_connection(sock=ours, limit=MAX_FRAME * 2)
    for line in lines:
        c_writer.write(line)
    await c_writer.drain()
    answers = [protocol.decode(await c_reader.readline()) for _ in lines]
    c_writer.close()
    await server
    return answers


def test_the_server_answers_a_too_large_frame_by_its_type() -> None:
    answers = asyncio.run(
        _answers_to([b"x" * (MAX_FRAME + 10) + b"\n", b"{nope\n", b'{"id": 1, "op": "nothing"}\n'])
    )
    codes = [a["error"]["code"] for a in answers]  # type: ignore[index]
    assert codes == [protocol.FRAME_TOO_LARGE, protocol.BAD_FRAME, protocol.UNKNOWN_OP]


def test_an_event_is_built_only_as_declared() -> None:
    assert protocol.event("stop", reason="stopped") == {"type": "event", "event": "stop", "reason": "stopped"}
    assert protocol.event("kick") == {"type": "event", "event": "kick"}
    fields = {"budget": 1.0, "budgetTokens": None, "maxTurns": None, "treeExhausted": None}
    assert protocol.event("budget", **fields)["budget"] == 1.0
    assert protocol.event("budget", **fields, treeWarning="low")["treeWarning"] == "low"
    with pytest.raises(ValueError, match="undeclared event 'zap'"):
        protocol.event("zap")
    with pytest.raises(ValueError, match="missing"):
        protocol.event("stop")
    with pytest.raises(ValueError, match="undeclared"):
        protocol.event("kick", extra=1)


def test_every_event_has_a_known_direction() -> None:
    ends = {protocol.ROOSTD, protocol.WORKER, protocol.EXTENSION, protocol.CLIENT}
    for event in protocol.PUSHED_EVENTS.values():
        assert event.sender in {protocol.ROOSTD, protocol.WORKER} and event.receiver in ends
        assert event.sender != event.receiver and event.doc
        assert not {"type", "event"} & set(event.fields + event.optional)
    assert protocol.PUSHED_EVENTS["deliver"].direction == "roostd->extension"
