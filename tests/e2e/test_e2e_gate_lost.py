"""The approval gate (roost/extension/toolgate.ts) when its worker goes away while a call
waits: the loss decides nothing. A call is asked again of a worker that answers, and
otherwise waits until pi aborts the run, so the session ends cut short and a restarted
worker continues the run (docs/known-limits.md, "A run cut short by a crash is continued by
itself"). A `block` on the loss was the call's result: pi asked the model again before its
parent-death signal shut it down, and a fast answer ended the run (the restarted worker
then saw a settled run: `done`, not continued, about one kill in three on pi 1.6).

The first test plays the worker's end of the extension socket itself, so what the gate does
on a lost connection is seen whatever pi's shutdown would race; the second kills a real
worker while a call waits for approval, a few times over.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.lab import EXTENSION, Lab
from kit.matchers import after_tool, fresh, new_user_has, task
from kit.testpi import read_session
from kit.wait import wait_until

from roost.fakellm import last_tool_result_contains, text, tool_call
from roost.pi.transcript import interrupted
from roost.wire import protocol

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("real_pi")]

T = 60.0


class WorkerEnd:
    """The worker's end of a job's extension socket, as the test plays it: the greeting,
    `ext_hello` (approvals on), and each `gate` request handed to the test to answer.
    `refuse`: connections are accepted and closed at once (no worker answers)."""

    def __init__(self, path: Path) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.gates: queue.Queue[tuple[socket.socket, dict[str, Any]]] = queue.Queue()
        self.connections = 0
        self.refuse = False
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            if self.refuse:
                conn.close()
                continue
            self.open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.send(conn, protocol.greeting("roost-worker"))
            for line in conn.makefile("rb"):
                request = json.loads(line)
                if request.get("op") == "ext_hello":
                    self.send(conn, protocol.ok(request["id"], {"job": "j", "name": "j", "gate": True}))
                elif request.get("op") == "gate":
                    self.gates.put((conn, request))

    @staticmethod
    def send(conn: socket.socket, frame: dict[str, Any]) -> None:
        conn.sendall(json.dumps(frame).encode() + b"\n")

    def next_gate(self) -> tuple[socket.socket, dict[str, Any]]:
        return self.gates.get(timeout=T)

    def close(self) -> None:
        self.server.close()
        for conn in self.open:
            with contextlib.suppress(OSError):
                conn.close()


@pytest.fixture
def lab() -> Iterator[Lab]:
    with Lab(llm=True) as lab_:
        yield lab_


def drop(conn: socket.socket) -> None:
    """The worker's end goes as a killed worker's does (the kernel closes its socket)."""
    conn.shutdown(socket.SHUT_RDWR)
    conn.close()


def test_a_lost_worker_decides_no_call_and_an_abort_leaves_the_run_cut_short(lab: Lab) -> None:
    lab.llm.add(fresh("GATE-LOST"), tool_call("bash", {"command": "echo RAN-ONE"}))
    lab.llm.add(last_tool_result_contains("RAN-ONE"), tool_call("bash", {"command": "echo RAN-TWO"}))
    lab.llm.add(after_tool("GATE-LOST", "bash"), text("finished"))  # never reached
    sock = lab.root / "ext.sock"
    worker = WorkerEnd(sock)
    session = lab.root / "s.jsonl"
    try:
        pi = lab.spawn_pi(
            session=session,
            extensions=[EXTENSION],
            extra_env={"ROOST_EXT_SOCK": str(sock), "ROOST_JOB_ID": "gatelost"},
        )
        pi.get_state()
        pi.prompt("GATE-LOST go")

        # The worker goes away while the first call waits: the call is asked again, the same
        # call, once a worker answers (here at once), and runs on its answer.
        conn, first = worker.next_gate()
        drop(conn)
        wait_until(lambda: not worker.gates.empty() or len(lab.llm.requests) > 1, T, "the call asked again")
        assert len(lab.llm.requests) == 1, (
            "the lost worker's call was decided without it: "
            + json.dumps(lab.llm.requests[-1]["messages"][-1])[:300]
        )
        conn, again = worker.next_gate()
        assert again["call"] == first["call"]
        worker.send(conn, protocol.ok(again["id"], {"block": False}))

        # The second call's worker goes for good: no answer decides the call (no request
        # reaches the model) until the run is aborted, as pi's shutdown does.
        conn, second = worker.next_gate()
        assert second["input"] == {"command": "echo RAN-TWO"}
        worker.refuse = True
        seen = worker.connections
        drop(conn)
        wait_until(
            lambda: worker.connections >= seen + 2,
            T,
            lambda: (
                f"the call asked again ({len(lab.llm.requests)} model requests: "
                f"{json.dumps(lab.llm.requests[-1]['messages'][-1])[:300]})"
            ),
        )
        assert len(lab.llm.requests) == 2
        start = pi.mark()
        pi.call("abort")
        pi.wait_event("agent_end", since=start, timeout=T)
    finally:
        worker.close()
    assert len(lab.llm.requests) == 2
    entries = read_session(session)
    results = [
        e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == "toolResult"
    ]
    assert "RAN-ONE" in json.dumps(results[0]["content"])
    assert "RAN-TWO" not in json.dumps(results)
    # What a restarted worker reads: a run cut short (roost.worker.restore continues it).
    assert interrupted(entries)


@pytest.mark.parametrize("attempt", range(3))
def test_a_worker_killed_while_a_call_waits_for_approval_has_its_run_continued(
    make_lab: Any, tmp_path: Path, attempt: int
) -> None:
    """The restarted worker continues the run: the model gets roost's note (the run once
    went `done` with the model's answer to 'roost could not ask for this call's approval')."""
    lab = make_lab()
    marker = tmp_path / "ran.txt"
    lab.llm.add(fresh("MK-GONE"), tool_call("bash", {"command": f"echo ran >> {marker}"}))
    lab.llm.add(after_tool("MK-GONE", "bash"), text("answered the lost call"))
    lab.llm.add(
        task("MK-GONE") & new_user_has("[roost] Your previous run was interrupted"),
        text("CONTINUED"),
        first=True,
    )
    job = lab.run_job("--approvals", "ask", "MK-GONE go", cwd=tmp_path)
    wait_until(
        lambda: [e for e in lab.cli_json("inbox", "--json") if e["kind"] == "approval"],
        T,
        "the call's approval entry",
    )
    wait_until(lambda: '"toolCall"' in json.dumps(lab.session(job)), T, "the call in the session")
    worker = lab.show(job)["worker"]["pid"]
    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: lab.show(job)["worker"]["pid"] not in (None, worker), T, "a new worker")
    assert lab.wait(job, T) == "done"
    assert lab.row(job)["summary"] == "CONTINUED"
    assert "answered the lost call" not in json.dumps(lab.session(job))
    assert not marker.exists()  # never approved: never ran
