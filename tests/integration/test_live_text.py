"""Live text: pi's streamed deltas, coalesced by the worker (roost.worker.streaming), kept
by roostd in memory (handlers/streamed.py) and pushed to `follow_partials` clients; the
`writing` status; `roost logs -f`'s live line. The fake pi's `[[stream N MS GATE]]`
streams N words MS ms apart and ends the message once the file GATE exists."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
from typing import Any

from kit.lab import Lab
from kit.wait import wait_until

WAIT = 30.0


class Follower:
    """A `follow_partials` client on a thread: every pushed partial, with its arrival time."""

    def __init__(self, env: Lab, job: str | None = None) -> None:
        self.client = env.client()
        self.first = self.client.request("follow_partials", **({"job": job} if job else {}))
        self.seen: list[tuple[float, str, dict[str, Any] | None]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for event in self.client.events():
                if event.get("event") == "partial":
                    self.seen.append((time.monotonic(), event["job"], event["partial"]))
        except Exception:
            return

    def texts(self, job: str) -> list[str]:
        out = []
        for _, name, partial in self.seen:
            if name == job and partial and partial.get("message"):
                out.append("".join(b.get("text", "") for b in partial["message"]["content"]))
        return out

    def close(self) -> None:
        self.client.interrupt()
        self.client.close()


def _ls_status(env: Lab, job: str) -> str:
    rows = json.loads(env.roost_ok("ls", "--json"))
    return next(r for r in rows if r["id"] == job)["status"]


def test_partials_are_coalesced_kept_in_memory_and_dropped_at_the_end(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.start_daemon()
    follower = Follower(env)
    try:
        job = env.run("[[stream 60 10 gate]]")
        wait_until(
            lambda: any(t.endswith(" w60") for t in follower.texts(job)),
            WAIT,
            what="the whole streamed text in a partial",
        )
        texts = follower.texts(job)
        # 60 deltas 10 ms apart, sent at most every 80 ms: far fewer partials than deltas.
        assert 2 <= len(texts) < 30, len(texts)
        assert all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))  # it grows
        # The state says what happens: `writing`, in `roost ls --json` too.
        wait_until(lambda: _ls_status(env, job) == "writing", WAIT, what="status writing")
        # A client that comes now (a page opened mid-stream) gets the text so far.
        late = env.request("follow_partials", job=job)["partials"][job]
        assert late["message"]["content"][0]["text"].endswith(" w60")
        # Nothing of it is written anywhere: not in the mailbox, not in the job's files.
        for path in env.job_dir(job).rglob("*"):
            if path.is_file() and path.name != "session.jsonl" and not path.name.endswith(".sock"):
                assert b"w60" not in path.read_bytes(), path
        (env.work / "gate").touch()
        env.wait_state(job, "done", timeout=WAIT)
        wait_until(
            lambda: follower.seen and follower.seen[-1][2] is None,
            WAIT,
            what="the partial dropped at the message's end",
        )
        assert env.request("follow_partials")["partials"] == {}
        assert "streamed: w1 w2" in json.dumps(env.session(job))
    finally:
        follower.close()


def test_a_running_tool_shows_in_the_partial_and_the_status(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.start_daemon()
    follower = Follower(env)
    try:
        job = env.run("[[hold tool-gate]]")
        wait_until(lambda: _ls_status(env, job) == "running hold", WAIT, what="running hold")
        wait_until(
            lambda: any(p and p["tools"] for _, j, p in follower.seen if j == job),
            WAIT,
            what="the running tool in a partial",
        )
        tool = next(p for _, j, p in follower.seen if j == job and p and p["tools"])["tools"][0]
        assert tool["name"] == "hold" and "tool-gate" in tool["summary"]
        (env.work / "tool-gate").touch()
        env.wait_state(job, "done", timeout=WAIT)
        wait_until(lambda: follower.seen[-1][2] is None, WAIT, what="the tool's partial dropped")
    finally:
        follower.close()


def test_a_workers_partial_goes_with_its_connection(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.start_daemon()
    job = env.run("[[stream 3 10 gate2]]")
    wait_until(lambda: job in env.request("follow_partials")["partials"], WAIT, what="the partial")
    env.roost_ok("stop", job)
    wait_until(
        lambda: job not in env.request("follow_partials")["partials"],
        WAIT,
        what="the partial dropped with its worker",
    )


def test_logs_follow_shows_the_text_being_written_on_a_terminal_only(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.start_daemon()
    job = env.run("[[stream 5 10 logs-gate]]")
    wait_until(lambda: job in env.request("follow_partials")["partials"], WAIT, what="a partial")
    primary, secondary = pty.openpty()
    follow = subprocess.Popen(
        [sys.executable, "-m", "roost.cli", "logs", "-f", job],
        env=env.env,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        cwd=env.work,
    )
    os.close(secondary)
    piped = subprocess.Popen(
        [sys.executable, "-m", "roost.cli", "logs", "-f", job],
        env=env.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=env.work,
    )
    seen = bytearray()

    def read_some() -> bytes:
        while select.select([primary], [], [], 0.05)[0]:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen.extend(chunk)
        return bytes(seen)

    try:
        wait_until(
            lambda: b"streamed: w1 w2 w3 w4 w5" in read_some(), WAIT, what="the live line on the terminal"
        )
        assert b"\r\x1b[K" in seen  # drawn in place, not printed as a line
        (env.work / "logs-gate").touch()
        env.wait_state(job, "done", timeout=WAIT)
        wait_until(
            lambda: (
                b"assistant" in read_some().rpartition(b"\x1b[K")[2]
                or read_some().count(b"streamed: w1 w2 w3 w4 w5") >= 2
            ),
            WAIT,
            what="the complete message printed",
        )
    finally:
        follow.terminate()
        piped.terminate()
        follow.wait(10)
        out = piped.communicate(timeout=10)[0]
        os.close(primary)
    # To a pipe: the complete message once, no live line.
    assert out.count(b"streamed: w1 w2 w3 w4 w5") == 1 and b"\x1b[K" not in out, out
