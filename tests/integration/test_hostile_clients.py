"""Clients that take more than their share (docs/security.md, door 4).

Each attack runs against a real roostd; during it a normal client's `list` (what `roost ls`
sends) must answer within 1 s, and roostd's memory must stay within a stated bound.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from kit.lab import Lab
from kit.procs import wait_until

from roost.wire import protocol

LS_SECONDS = 1.0  # the acceptance check


def ls_seconds(lab: Lab) -> float:
    """A fresh connection, the greeting and a `list`: what `roost ls` waits for (its
    connect blocks while roostd's listen backlog is full; here: tried again)."""
    from roost.wire.client import Client

    t0 = time.monotonic()
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5.0)
        try:
            sock.connect(str(lab.socket_path))
            break
        except BlockingIOError:
            sock.close()
            if time.monotonic() - t0 > 5.0:
                raise
            time.sleep(0.005)
    with Client(sock) as client:
        client.request("list", timeout=5.0)
    return time.monotonic() - t0


def assert_ls_fast(lab: Lab, what: str) -> None:
    try:
        took = ls_seconds(lab)
    except (OSError, protocol.ProtocolError) as exc:
        raise AssertionError(f"`roost ls` got no answer {what}: {exc!r}") from None
    assert took < LS_SECONDS, f"`roost ls` took {took:.2f}s {what}"


def roostd(lab: Lab) -> psutil.Process:
    assert lab.daemon is not None
    return psutil.Process(lab.daemon.pid)


def rss_mb(lab: Lab) -> float:
    return roostd(lab).memory_info().rss / 2**20


def start(lab: Lab, nofile: tuple[int, int] | None = None) -> None:
    """roostd in the lab (its pid known), under an open-file limit when given."""
    argv = [sys.executable, "-m", "roost.cli.main", "daemon", "run"]
    if nofile is not None:
        argv = ["prlimit", f"--nofile={nofile[0]}:{nofile[1]}", "--", *argv]
    lab.start_daemon(argv)
    # `roost daemon run` execs roostd: it answered, so it is the pid the lab holds.
    assert "roost.supervise" in roostd(lab).cmdline()


def raw(lab: Lab, timeout: float = 10.0) -> socket.socket:
    sock = lab.connect(timeout)
    sock.recv(4096)  # the greeting
    return sock


class Sampler:
    """roostd's highest RSS while the block runs (sampled every 20 ms)."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.base = rss_mb(lab)
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            try:
                self.peak = max(self.peak, rss_mb(self.lab))
            except psutil.Error:
                return

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth(self) -> float:
        return self.peak - self.base


HOLDER = """
import socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    deadline = time.monotonic() + 5  # a full listen backlog answers EAGAIN: try again
    while True:
        try:
            s.connect(sys.argv[1])
            socks.append(s)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                break
            time.sleep(0.001)
        except OSError:
            break
print(len(socks), flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def test_idle_connections_never_lock_out_the_cli(
    roost_env: Lab, holders: list[subprocess.Popen[str]]
) -> None:
    """1,100 idle connections (from one process and from several) under a 1,024 fd limit:
    roostd keeps a reserve of descriptors, makes room by closing the oldest idle ones, and
    answers `roost ls` at once; its log stays small (repeats summarised)."""
    lab = roost_env
    start(lab, nofile=(1024, 1024))
    assert roostd(lab).rlimit(psutil.RLIMIT_NOFILE) == (1024, 1024)
    for count in (1100, 275, 275, 275, 275):  # one greedy process, then four more
        holders.append(
            subprocess.Popen(
                [sys.executable, "-c", HOLDER, str(lab.socket_path), str(count)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for proc in holders:
        assert proc.stdout is not None
        proc.stdout.readline()
    for _ in range(3):
        assert_ls_fast(lab, "with 2,200 idle connections opened")
    assert roostd(lab).num_fds() < 1024
    assert lab.cli("ls").returncode == 0
    log = (lab.roost_home / "roostd.log").read_text()
    assert len(log) < 200_000, f"roostd.log grew to {len(log)} bytes"
    # One line per window, not one per connection (RepeatFilter; its count: a unit test).
    assert 0 < log.count("oldest idle connection") < 20, log[-2000:]


def test_the_fd_limit_is_raised_to_the_hard_limit(roost_env: Lab) -> None:
    start(roost_env, nofile=(1024, 4096))
    assert roostd(roost_env).rlimit(psutil.RLIMIT_NOFILE) == (4096, 4096)


def test_pipelined_requests_that_are_never_read(fake_pi_env: Lab) -> None:
    """20k pipelined `list`s whose answers are never read: roostd stops reading that
    socket after a bounded number in flight instead of buffering every answer."""
    lab = fake_pi_env
    start(lab)
    for n in range(3):
        lab.run_job("--shell", "--name", f"row{n}", "--", "true")
    request = protocol.encode({"id": 1, "op": "list"})
    sock = raw(lab)
    sock.setblocking(False)
    sent = 0
    with Sampler(lab) as rss:
        deadline = time.monotonic() + 4.0
        data = request * 20_000
        while data and time.monotonic() < deadline:
            try:
                n = sock.send(data[:65536])
            except BlockingIOError:
                time.sleep(0.01)  # roostd holds us back: the point of the test
                continue
            sent += n
            data = data[n:]
        assert_ls_fast(lab, "while a client pipelines 20k requests")
        time.sleep(0.5)  # let roostd work through what it read
        assert_ls_fast(lab, "after a client pipelined 20k requests")
    sock.close()
    print(f"MEASURED {rss.growth:.1f} MB")
    assert rss.growth < 40, f"roostd grew by {rss.growth:.0f} MB ({sent} bytes sent)"


def test_unfinished_large_frames_are_bounded(roost_env: Lab) -> None:
    """60 connections each send 4 MiB of a frame and stop: what roostd holds for unfinished
    frames is bounded in all (the shared pool), not 240 MB."""
    lab = roost_env
    start(lab)
    chunk = b'{"id": 1, "op": "list", "x": "' + b"a" * (protocol.MAX_FRAME - 64)
    socks = [raw(lab) for _ in range(60)]

    def feed(sock: socket.socket) -> None:
        sock.settimeout(5)
        try:
            sock.sendall(chunk)
        except OSError:
            pass  # closed by roostd: its pool was full

    with Sampler(lab) as rss:
        threads = [threading.Thread(target=feed, args=(s,)) for s in socks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert_ls_fast(lab, "beside 60 unfinished 4 MiB frames")
    for s in socks:
        s.close()
    print(f"MEASURED {rss.growth:.1f} MB")
    assert rss.growth < 80, f"roostd grew by {rss.growth:.0f} MB"


def _frames(sock: socket.socket) -> list[dict[str, Any]]:
    """What is left to read on `sock` until roostd closes it (or 10 s)."""
    sock.settimeout(10)
    data = b""
    try:
        while chunk := sock.recv(1 << 20):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return [json.loads(line) for line in data.split(b"\n") if line.strip()]


def test_a_subscriber_that_never_reads_is_dropped(fake_pi_env: Lab) -> None:
    """A `subscribe` client that never reads, over thousands of job changes: its queue is
    bounded; it is dropped with a final `dropped` event (and would subscribe again)."""
    lab = fake_pi_env
    start(lab)
    job = lab.run_job("--name", "budgeted", "hello")
    lab.wait_settled(job)
    slow = raw(lab)
    slow.sendall(protocol.encode({"id": 1, "op": "subscribe"}))
    log = lab.roost_home / "roostd.log"
    with Sampler(lab) as rss, lab.client(30) as client:
        for n in range(6000):
            client.request("budget", job=job, budget=1.0 + n / 1000)
            if n % 1000 == 999:
                assert_ls_fast(lab, "while a subscriber does not read")
            if n % 50 == 49 and "dropping a connection" in log.read_text():
                break
    frames = _frames(slow)  # read at last (within the grace roostd gives it)
    slow.close()
    assert frames and frames[-1].get("event") == "dropped", frames[-1:]
    assert "did not read" in frames[-1]["reason"]
    print(f"MEASURED {rss.growth:.1f} MB")
    assert rss.growth < 40, f"roostd grew by {rss.growth:.0f} MB"


def test_a_hook_that_floods_stderr_costs_roostd_nothing(fake_pi_env: Lab) -> None:
    """300 MB of a hook's stderr: roostd keeps its head and tail, never all of it."""
    lab = fake_pi_env
    lab.configure(
        hooks={"job.created": ["sh", "-c", "head -c 300000000 /dev/zero | tr '\\0' x >&2"]},
        hookTimeoutSeconds=60,
    )
    start(lab)
    log = lab.roost_home / "roostd.log"
    with Sampler(lab) as rss:
        lab.run_job("--shell", "--", "true")
        wait_until(lambda: "hook sh for job.created" in log.read_text(), 60, "the hook to end")
    print(f"MEASURED {rss.growth:.1f} MB")
    assert rss.growth < 40, f"roostd grew by {rss.growth:.0f} MB"
    line = next(ln for ln in log.read_text().splitlines() if "hook sh for job.created" in ln)
    assert "exited 0" in line and "xxxx" in line and len(line) < 1000


def test_the_message_rate_limit_is_per_sender_not_per_connection(roost_env: Lab) -> None:
    """120 `send`s from one process, each on a new connection that registers anew: the
    limit of 30 a minute holds for the process, as it does for a job or a session."""
    lab = roost_env
    lab.configure(agentMessagesPerMinute=30, agentExternalMessages=True)
    start(lab)
    with lab.client() as target:
        target.request("peer_register", pid=os.getpid(), name="target")
        limited = 0
        for n in range(120):
            with lab.client() as sender:
                sender.request("peer_register", pid=os.getpid(), name=f"s{n}")
                try:
                    sender.request("send", to="target", message=f"m{n}")
                except protocol.RequestError as exc:
                    if "rate limit" in exc.message:
                        limited += 1
        assert limited >= 90, f"only {limited} of 120 messages were held to the rate limit"
