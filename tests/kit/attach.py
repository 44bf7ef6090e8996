"""Helpers for tests/e2e/test_e2e_attach.py: the interactive pi under tmux, a writer-lock
watcher, a raw foreground peer, and session-file checks.

- `Tmux`: one private tmux server (`tmux -L <unique socket>`) with one session running a
  command; `capture()` reads the screen (and scrollback), `send_keys()` types, `close()`
  kills that server (and so everything in its panes).
- `attach_wrapper()`: a shell script that exports the lab's environment and execs
  `<venv python> -m roost.cli.main attach JOB` (what a person types in a terminal).
- `LockWatch`: a thread that samples, every 20 ms, the writer lock of one session file and
  the live pi processes working on it; `check()` asserts there never were two writers.
- `RawPeer`: the test process as a foreground peer over a raw roostd socket.
- `assert_single_branch()`: every entry of a session file continues the previous one.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from kit.testpi import read_session
from roost.locks import SessionLock, holder_is_alive, read_holder
from roost.wire.client import Client


# -- tmux ------------------------------------------------------------------------------------
class Tmux:
    """A private tmux server with one detached session; always `close()` it."""

    def __init__(self, name: str, width: int = 160, height: int = 48) -> None:
        token = secrets.token_hex(4)
        self.socket = f"roost-attach-{os.getpid()}-{token}"
        self.name = f"{name}-{token}"
        self.width, self.height = width, height
        self.started = False

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=20,
            check=check,
        )

    def start(self, command: str) -> None:
        # remain-on-exit: the pane (and what roost attach printed last) stays readable after
        # the command ended; set in the same server round trip as the session is created.
        self.tmux(
            "new-session",
            "-d",
            "-s",
            self.name,
            "-x",
            str(self.width),
            "-y",
            str(self.height),
            command,
            ";",
            "set-option",
            "-t",
            self.name,
            "remain-on-exit",
            "on",
            ";",
            "set-option",
            "-t",
            self.name,
            "history-limit",
            "5000",
        )
        self.started = True

    def capture(self) -> str:
        """The pane's scrollback and screen as plain text."""
        proc = self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.name, check=False)
        return proc.stdout

    def send_keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def type_text(self, text_: str) -> None:
        """Literal text (no key-name lookup), without Enter."""
        self.tmux("send-keys", "-t", self.name, "-l", text_)

    def pane(self, fmt: str) -> str:
        return self.tmux("display-message", "-p", "-t", self.name, fmt, check=False).stdout.strip()

    def pane_pid(self) -> int:
        return int(self.pane("#{pane_pid}"))

    def pane_dead(self) -> bool:
        return self.pane("#{pane_dead}") == "1"

    def exit_status(self) -> int | None:
        """The exit code of the pane's command once it ended, else None.

        tmux reports `pane_dead_status` once it reaped the process; here tmux 3.3a now and
        then leaves an exited pane process a zombie for good (pane_dead=1, no status), so a
        zombie's code is read from /proc/PID/stat (its last field, in waitpid's format).
        """
        status = self.pane("#{pane_dead_status}")
        if status.lstrip("-").isdigit():
            return int(status)
        with contextlib.suppress(ValueError, OSError):
            pid = self.pane_pid()
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] in ("Z", "X"):
                code = int(fields[-1])
                return code >> 8 if code & 0x7F == 0 else -(code & 0x7F)
        return None

    def close(self) -> None:
        if self.started:
            self.tmux("kill-server", check=False)
            self.started = False


def attach_wrapper(path: Path, env: Mapping[str, str], job: str, cwd: Path) -> Path:
    """A script that exports the lab's environment and execs `roost attach JOB`."""
    keep = (
        "ROOST_HOME",
        "PI_CODING_AGENT_DIR",
        "HOME",
        "PI_OFFLINE",
        "PATH",
        "PI_SKIP_VERSION_CHECK",
        "ROOST_LOG_LEVEL",
        "ROOST_PI",
        "ROOST_PI_PREFIX",
        "PYTHONUNBUFFERED",
        "LANG",
        "LC_ALL",
    )
    lines = ["#!/bin/sh", "set -e"]
    for key in keep:
        if key in env:
            lines.append(f"export {key}={shlex.quote(env[key])}")
    lines.append(f"cd {shlex.quote(str(cwd))}")
    lines.append(f"exec {shlex.quote(sys.executable)} -m roost.cli.main attach {shlex.quote(job)}")
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


# -- processes -------------------------------------------------------------------------------
def _session_arg(cmdline: list[str]) -> str | None:
    for i, part in enumerate(cmdline[:-1]):
        if part == "--session":
            return os.path.abspath(cmdline[i + 1])
    return None


class PiSessions:
    """Which session file a pi process works on.

    pi sets `process.title = "pi"`, which overwrites its argv in place: /proc/PID/cmdline
    soon reads just "pi". So the session comes from pi's own command line when still
    readable, else from its parent: a worker (`python -m roost.worker JOB`: the job's
    session), `roost attach JOB` (the job's session), or a process whose pi the test
    started itself (`known`).
    """

    def __init__(self, roost_home: Path, known: Mapping[int, str] | None = None) -> None:
        self.roost_home = roost_home
        self.known: dict[int, str] = dict(known or {})
        self._cache: dict[tuple[int, float], str] = {}

    def job_session(self, job: str) -> str | None:
        try:
            data = json.loads((self.roost_home / "jobs" / job / "job.json").read_text())
        except (OSError, ValueError):
            return None
        session = data.get("session")
        return os.path.abspath(session) if session else None

    def _session_of(self, pid: int) -> str | None:
        """The session of pi `pid`; "" when it is not of this ROOST_HOME; None: unknown."""
        found: str | None = None
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.environ().get("ROOST_HOME") != str(self.roost_home):
                return ""
            found = _session_arg(proc.cmdline())
            if found is None:
                parent = proc.parent()
                pcmd = parent.cmdline() if parent is not None else []
                if parent is not None and parent.pid in self.known:
                    found = self.known[parent.pid]
                elif ("roost.worker" in pcmd and len(pcmd) >= 2) or pcmd[-2:-1] == ["attach"]:
                    found = self.job_session(pcmd[-1])  # a worker's or roost attach's job
        return found

    def pis_on(self, session: str) -> set[int]:
        """Live pi processes of this ROOST_HOME working on `session`.

        One read of /proc/PID/stat per process; what a (pid, start) is working on is
        worked out once and cached.
        """
        session = os.path.abspath(session)
        out = set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            comm = stat[stat.index(b"(") + 1 : stat.rindex(b")")]
            if comm not in (b"pi", b"node"):
                continue
            fields = stat[stat.rindex(b")") + 2 :].split()
            if fields[0] in (b"Z", b"X"):
                continue
            key = (int(name), float(fields[19]))
            if key not in self._cache:
                found = self._session_of(int(name))
                if found is None:
                    continue  # ours, but not known yet what it works on: ask again
                self._cache[key] = found
            if self._cache[key] == session:
                out.add(int(name))
        return out


# -- the writer lock, sampled ------------------------------------------------------------------
@dataclass
class Sample:
    t: float
    holder: int | None  # the live holder's pid (None: free, stale or unreadable)
    stale: int | None  # a holder pid named by the file whose process is gone
    pis: frozenset[int]  # live pi processes on the session


@dataclass
class LockWatch:
    """Sample the session's lock holder (`read_holder`: the process's ROOST_HOME must be the
    lab's) and its pi processes every `interval` seconds."""

    session: str
    sessions: PiSessions
    interval: float = 0.02
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.session = os.path.abspath(self.session)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="lockwatch")

    def start(self) -> LockWatch:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.sample()
            except Exception as exc:  # keep sampling; report at check()
                self.errors.append(repr(exc))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def sample(self) -> Sample:
        holder = read_holder(self.session)
        live = holder is not None and holder_is_alive(holder)
        pis = frozenset(self.sessions.pis_on(self.session))
        if live and holder is not None and holder.pid not in pis and not holder_is_alive(holder):
            live = False  # it ended between the two looks
        s = Sample(
            time.monotonic(),
            holder.pid if live and holder else None,
            holder.pid if holder and not live else None,
            pis,
        )
        with self._lock:
            self.samples.append(s)
        return s

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def snapshot(self) -> list[Sample]:
        with self._lock:
            return list(self.samples)

    def holders(self) -> list[int]:
        """Distinct live holders in the order they held the lock."""
        out: list[int] = []
        for s in self.snapshot():
            if s.holder is not None and (not out or out[-1] != s.holder):
                out.append(s.holder)
        return out

    def check(self) -> dict[str, Any]:
        """There never were two writers; a summary of what was seen."""
        samples = self.snapshot()
        assert not self.errors, self.errors[:5]
        assert len(samples) > 20, f"too few samples ({len(samples)})"
        ever_held: dict[int, float] = {}  # pid -> first time seen holding
        most = 0
        for s in samples:
            most = max(most, len(s.pis))
            if s.holder is not None:
                # The live holder is a pi process on this very session.
                assert s.holder in s.pis, (
                    f"the lock names live pid {s.holder}, not a pi on {self.session}: {s}"
                )
                # No other live pi on the session ever held the lock before: the lock never
                # passed from a pi that is still alive to another one.
                earlier = [p for p in s.pis if p != s.holder and p in ever_held]
                assert not earlier, (
                    f"pid {s.holder} holds the lock while {earlier}, an earlier holder, still "
                    f"runs on {self.session}"
                )
                ever_held.setdefault(s.holder, s.t)
        return {"samples": len(samples), "holders": self.holders(), "max_pis": most}


# -- a raw foreground peer ------------------------------------------------------------------------
class RawPeer:
    """The test process as a foreground pi would be: it holds the writer lock of a dummy
    session and registers over its own roostd connection (kept open: closing it
    unregisters the peer)."""

    def __init__(self, roost_home: Path, dummy_session: Path, name: str = "test-peer") -> None:
        self.lock = SessionLock(dummy_session)
        assert self.lock.acquire(), f"could not lock {dummy_session}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(roost_home / "roostd.sock"))
        self.client = Client(sock)
        result = self.client.request(
            "peer_register",
            timeout=30,
            session=str(dummy_session),
            pid=os.getpid(),
            name=name,
            cwd=str(dummy_session.parent),
        )
        self.id = str(result["id"])

    def send(self, to: str, message: str) -> dict[str, Any]:
        return self.client.request("send", timeout=60, to=to, message=message)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        with contextlib.suppress(Exception):
            self.lock.release()


# -- session files --------------------------------------------------------------------------------
def assert_single_branch(path: Path) -> list[dict[str, Any]]:
    """Every entry after the header continues the previous one (no fork)."""
    entries = read_session(path)
    assert entries and entries[0].get("type") == "session", entries[:1]
    previous: str | None = None
    for i, entry in enumerate(entries[1:], 1):
        assert entry.get("parentId") == previous, (
            f"{path}: entry {i} ({entry.get('type')}) has parentId {entry.get('parentId')!r}, "
            f"the previous entry is {previous!r}: the session forked"
        )
        previous = entry.get("id")
    return entries
