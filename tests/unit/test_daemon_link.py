"""The worker's link to roostd (roost/worker/daemon_link.py) against a scripted roostd.

Found by benchmarks/torture.py: roostd SIGKILLed after it took a worker's `worker_hello`
but before it answered left the worker waiting for that answer forever: it never
reconnected, so the new roostd never heard from it again (state, hand-back report).
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest

from roost.job.record import JobRecord
from roost.job.states import JobKind
from roost.wire import protocol
from roost.worker.daemon_link import DaemonLink


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Path:
    path = Path(tempfile.mkdtemp(prefix="rl-", dir="/tmp"))  # short: a socket path
    monkeypatch.setenv("ROOST_HOME", str(path))
    return path


async def _roostd(
    home: Path, answer_hello: bool, seen: list[dict[str, Any]], reset: bool = False
) -> asyncio.base_events.Server:
    """A roostd that greets, reads frames and either answers `worker_hello` or dies (closes
    the connection, `reset`: as a killed process with unread input does) without answering
    it."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if reset:  # the hello stays unread in the kernel: closing resets the connection
            writer.transport.pause_reading()
        writer.write((json.dumps(protocol.greeting()) + "\n").encode())
        await writer.drain()
        if reset:
            sock = writer.get_extra_info("socket")
            for _ in range(500):
                try:
                    if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                        break
                except BlockingIOError:
                    pass
                await asyncio.sleep(0.01)
            seen.append({"op": "worker_hello"})  # (unread: its bytes are there)
            writer.close()
            return
        while line := await reader.readline():
            frame = json.loads(line)
            seen.append(frame)
            if frame.get("op") == "worker_hello" and not answer_hello:
                writer.close()  # killed before it answered
                return
            if "id" in frame:
                writer.write(
                    (
                        json.dumps({"type": "response", "id": frame["id"], "ok": True, "result": {}}) + "\n"
                    ).encode()
                )
                await writer.drain()
        writer.close()

    return await asyncio.start_unix_server(handle, path=str(home / "roostd.sock"))


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_a_roostd_that_dies_before_answering_the_hello_is_reconnected_to(home: Path, reset: bool) -> None:
    unseen: list[dict[str, Any]] = []  # what the loop reports: a task's exception nobody saw

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unseen.append(context))
        record = JobRecord(id="abcd1234", name="j", kind=JobKind.PI, cwd="/")
        link = DaemonLink(record, on_event=lambda frame: None, snapshot=lambda: {"state": "done"})
        first: list[dict[str, Any]] = []
        server = await _roostd(home, answer_hello=False, seen=first, reset=reset)
        task = asyncio.create_task(link.run())
        for _ in range(200):
            if any(f.get("op") == "worker_hello" for f in first):
                break
            await asyncio.sleep(0.01)
        server.close()
        await server.wait_closed()
        (home / "roostd.sock").unlink()
        second: list[dict[str, Any]] = []
        server = await _roostd(home, answer_hello=True, seen=second)  # the restarted roostd
        link.send_reliably("worker_handback", report="RESULT")
        try:
            for _ in range(300):
                if link.connected and any(f.get("op") == "worker_handback" for f in second):
                    break
                await asyncio.sleep(0.01)
            assert link.connected, first + second
            assert [f["op"] for f in second][:1] == ["worker_hello"], second
            assert any(f.get("op") == "worker_handback" for f in second), second
        finally:
            task.cancel()
            server.close()
        gc.collect()  # a task whose exception nobody retrieved says so when it is freed

    asyncio.run(scenario())
    assert [c["message"] for c in unseen if "never retrieved" in c["message"]] == []


def test_the_states_before_the_first_hello_reach_roostd_in_order(home: Path) -> None:
    """A fast pi can start its run and open a dialog before roostd answered the worker's
    hello: roostd hears `running` then `needs_input` (it showed starting -> needs_input,
    a run it never saw start)."""

    async def scenario() -> None:
        state = {"state": "starting"}
        record = JobRecord(id="abcd1234", name="j", kind=JobKind.PI, cwd="/")
        link = DaemonLink(record, on_event=lambda frame: None, snapshot=lambda: dict(state))
        for now in ("starting", "running", "running", "needs_input"):
            state["state"] = now
            link.update(dict(state))
        seen: list[dict[str, Any]] = []
        server = await _roostd(home, answer_hello=True, seen=seen)
        task = asyncio.create_task(link.run())

        def updates() -> list[str]:
            return [f["state"] for f in seen if f.get("op") == "worker_update"]

        try:
            for _ in range(300):
                if updates()[-1:] == ["needs_input"]:
                    break
                await asyncio.sleep(0.01)
            assert updates() == ["starting", "running", "needs_input"], seen
        finally:
            task.cancel()
            server.close()

    asyncio.run(scenario())
