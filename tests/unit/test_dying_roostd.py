"""A roostd killed a moment ago: its main thread gone (a zombie, which roost counts as not
alive) while another of its threads still held its files. A CLI that connected in that
moment was reset ("roost: [Errno 104] Connection reset by peer": test_job_env's restart
test under load), and the roostd it would start found the lock still held."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import portalocker
import pytest

from roost.supervise import admission
from roost.wire import client


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Path:
    path = Path(tempfile.mkdtemp(prefix="rd-", dir="/tmp"))  # short: a socket path
    os.chmod(path, 0o700)
    monkeypatch.setenv("ROOST_HOME", str(path))
    return path


def test_a_connection_reset_before_the_greeting_is_no_roostd(home: Path) -> None:
    path = str(home / "roostd.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(4)  # never accepts: the dying roostd's last thread holds it
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(_try(path)))
    reader.start()
    ready, _, _ = select.select([listener], [], [], 10)  # the client's connection is queued
    assert ready, got
    listener.close()  # the process's end: its queued connection is reset
    reader.join(10)
    assert got == [None], got


def _try(path: str) -> object:
    try:
        return client._try_connect(path)
    except Exception as exc:  # noqa: BLE001 - what the CLI printed
        return exc


def test_a_dying_roostds_lock_is_waited_for_a_live_ones_is_not(home: Path) -> None:
    lock = home / "roostd.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, portalocker\n"
                f"h = open({str(lock)!r}, 'a+')\n"
                "portalocker.lock(h, portalocker.LOCK_EX)\n"
                "print('held', flush=True)\n"
                "sys.stdin.readline()\n"
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with open(lock, "a+") as handle:
            started = time.monotonic()
            assert not admission.take_daemon_lock(handle, lambda: holder.pid)  # alive
            assert time.monotonic() - started < admission.DYING_WAIT / 2
            # Its pid says dead (as a zombie leader's does) while the lock is still held:
            # taken once the holder lets go.
            threading.Timer(0.5, lambda: holder.communicate("\n")).start()
            assert admission.take_daemon_lock(handle, lambda: None)
            portalocker.unlock(handle)
    finally:
        holder.kill()
        holder.wait()
