"""Helpers for tests that drive jobs on a Lab's roostd (mostly the fake pi), and a raw
JSON-lines client for probing roostd's and a worker's sockets."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import psutil

from kit.lab import Lab
from kit.wait import pid_alive, wait_until
from roost.wire.protocol import MAX_FRAME

WAIT = "30"  # seconds a `roost wait` may take here (2 loaded cores); fast when unloaded

alive = pid_alive


def run_job(env: Lab, task: str, *options: str) -> str:
    job_id = env.roost_ok("run", *options, task).strip()
    assert re.fullmatch(r"[0-9a-f]{8}", job_id), job_id
    return job_id


def settle(env: Lab, job: str) -> str:
    """Wait until the job's run settled (roostd's `wait` op, in-process: a CLI process per
    wait costs ~0.4 s of CPU); its state. `roost wait` itself is tested on its own."""
    return str(env.wait_settled(job, float(WAIT))["state"])


def status_is(env: Lab, job: str, prefix: str) -> bool:
    return env.show(job)["status"].startswith(prefix)


def pi_child(worker_pid: int) -> psutil.Process:
    """The (fake) pi the worker runs."""
    children = wait_until(lambda: psutil.Process(worker_pid).children(), what="the pi child")
    assert len(children) == 1, children
    return children[0]


class Raw:
    """A raw JSON-lines connection to roostd."""

    def __init__(self, env: Lab) -> None:
        self.sock = env.connect()
        self.file = self.sock.makefile("rb")
        self.greeting = self.read()

    def read(self) -> dict:
        line = self.file.readline(MAX_FRAME + 2)
        assert line, "roostd closed the connection"
        return json.loads(line)

    def send(self, data: bytes) -> dict:
        self.sock.sendall(data)
        return self.read()

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def raw_unix(path: Path) -> Raw:
    """A Raw client on any roost socket (the worker's ext.sock too)."""
    raw = Raw.__new__(Raw)
    raw.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.sock.settimeout(10)
    raw.sock.connect(str(path))
    raw.file = raw.sock.makefile("rb")
    raw.greeting = raw.read()
    return raw


def error_code(frame: dict) -> str:
    assert frame["type"] == "response" and frame["ok"] is False, frame
    return str(frame["error"]["code"])


def request(raw: Raw, **frame: Any) -> dict:
    return raw.send(json.dumps({"id": 1, **frame}).encode() + b"\n")
