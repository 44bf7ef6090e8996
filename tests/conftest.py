"""Shared fixtures for roost's tests.

- `wait_until(predicate, timeout)`: poll a condition instead of sleeping a fixed time.
- `roost_env`: an isolated roost installation (temp ROOST_HOME, pi agent dir, HOME, work
  dir) with `roost(*args)` to run the real CLI, `request(op, ...)` to talk to roostd
  directly, and a teardown that stops roostd and kills every process it left behind.
- `fake_pi_env`: `roost_env` whose jobs run tests/fakepi/fakepi.py instead of pi.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from agents_support import AgentLab
from support import wait_until  # noqa: F401 - re-exported to the tests

from roost.testkit.fakellm import FakeLLM
from roost.testkit.pi import KEEP_ROOST_VARS, SETUP_HINT, require_pi

TESTS_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTS_DIR.parent
FAKE_PI = TESTS_DIR / "fakepi" / "fakepi.py"



class RoostEnv:
    """One isolated roost: its directories, environment and helpers.

    Paths are kept short (a temp dir under /tmp, not pytest's tmp_path) because Unix
    socket paths are limited to 107 bytes and job sockets live in ROOST_HOME/jobs/<id>/.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"  # ROOST_HOME
        self.user_home = root / "user"  # HOME
        self.agent_dir = self.user_home / ".pi" / "agent"  # PI_CODING_AGENT_DIR
        self.work = root / "work"  # the cwd of CLI calls, hence of jobs
        for directory in (self.user_home, self.agent_dir, self.work):
            directory.mkdir(parents=True, exist_ok=True)
        # The pi under test (ROOST_PI, ROOST_PI_PREFIX, ROOST_NODE) is kept; nothing else of
        # the caller's roost or pi reaches the jobs.
        env = {k: v for k, v in os.environ.items()
               if k in KEEP_ROOST_VARS or not k.startswith(("ROOST_", "PI_", "XDG_STATE_HOME"))}
        env.update(
            ROOST_HOME=str(self.home),
            PI_CODING_AGENT_DIR=str(self.agent_dir),
            HOME=str(self.user_home),
            PI_OFFLINE="1",
            PYTHONUNBUFFERED="1",
        )
        self.env: dict[str, str] = env

    # -- configuration ---------------------------------------------------------------------
    def configure(self, **settings: Any) -> None:
        """Merge `settings` into the user-level `<agent dir>/roost.json`."""
        path = self.agent_dir / "roost.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(settings)
        path.write_text(json.dumps(data))

    # -- the CLI -------------------------------------------------------------------------------
    def roost(self, *args: str, timeout: float = 60.0, cwd: Path | None = None,
              input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run `roost ARGS...` (python -m roost.cli.main) in this environment."""
        return subprocess.run(
            [sys.executable, "-m", "roost.cli.main", *args],
            env=self.env, cwd=cwd or self.work, capture_output=True, text=True,
            timeout=timeout, input=input,
        )

    def roost_ok(self, *args: str, **kwargs: Any) -> str:
        """`roost(...)` that must exit 0; its stdout."""
        proc = self.roost(*args, **kwargs)
        assert proc.returncode == 0, (
            f"roost {' '.join(args)} exited {proc.returncode}\n"
            f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
        )
        return proc.stdout

    # -- roostd directly ---------------------------------------------------------------------
    @property
    def socket_path(self) -> Path:
        return self.home / "roostd.sock"

    def connect(self, timeout: float = 10.0) -> socket.socket:
        """A raw connection to roostd (which must be running); its greeting is unread."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(str(self.socket_path))
        return sock

    def request(self, op: str, timeout: float = 10.0, **args: Any) -> dict[str, Any]:
        """One request to the running roostd; its result (RequestError when it failed)."""
        from roost.client import Client

        with Client(self.connect(timeout)) as client:
            return client.request(op, timeout=timeout, **args)

    def wait_settled(self, job: str, timeout: float = 30.0) -> dict[str, Any]:
        """roostd's `wait` op (what `roost wait` does, without a CLI process): the job's row
        once its run has settled; AssertionError when it did not within `timeout`."""
        from roost.client import Client

        with Client(self.connect(timeout + 30)) as client:
            result = client.call("wait", {"job": job, "timeout": timeout}, timeout + 30)
        assert result["settled"], f"job {job} did not settle in {timeout:g}s: {result['row']}"
        return result["row"]

    def show(self, job: str) -> dict[str, Any]:
        return self.request("show", job=job)["job"]

    def daemon_pid(self) -> int | None:
        try:
            return int((self.home / "roostd.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def job_dir(self, job_id: str) -> Path:
        return self.home / "jobs" / job_id

    # -- cleanup -------------------------------------------------------------------------------
    def leftover_processes(self) -> list[psutil.Process]:
        """Every process (but this one) whose command line or environment names our root."""
        marker = str(self.root)
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            if proc.pid == os.getpid():
                continue
            try:
                if any(marker in part for part in proc.info["cmdline"] or ()):
                    found.append(proc)
                    continue
                if any(marker in value for value in proc.environ().values()):
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return found

    def diagnostics(self) -> str:
        """The daemon log and every worker log (printed at teardown, shown on failure)."""
        parts = []
        for log in [self.home / "roostd.log", *sorted(self.home.glob("jobs/*/worker.log"))]:
            with contextlib.suppress(OSError):
                parts.append(f"==== {log}\n{log.read_text(errors='replace')[-6000:]}")
        return "\n".join(parts)

    def close(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.roost("daemon", "stop", "--jobs", timeout=30)
        leftovers = self.leftover_processes()
        for proc in leftovers:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(leftovers, timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def roost_env() -> Iterator[RoostEnv]:
    """An isolated roost (temp ROOST_HOME, agent dir, HOME); roostd and all its workers and
    their children are gone after the test."""
    env = RoostEnv(Path(tempfile.mkdtemp(prefix="roost-", dir="/tmp")))
    try:
        yield env
    finally:
        print(env.diagnostics())
        env.close()


@pytest.fixture
def fake_pi_env(roost_env: RoostEnv) -> RoostEnv:
    """`roost_env` whose pi jobs run the fake pi (tests/fakepi/fakepi.py)."""
    roost_env.env["ROOST_PI"] = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_PI))}"
    return roost_env


@pytest.fixture(scope="session")
def real_pi() -> list[str]:
    """The pinned pi (end-to-end tests): a clear failure, never a skip, when it is missing."""
    try:
        return require_pi()
    except FileNotFoundError as e:
        pytest.fail(f"these tests need the real pi; {SETUP_HINT}: {e}", pytrace=False)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """roost's scripted model on 127.0.0.1 (a held reply waits at most two minutes)."""
    with FakeLLM(hold_timeout=120.0) as server:
        yield server


@pytest.fixture
def make_lab() -> Iterator[Callable[..., AgentLab]]:
    """Real-pi labs (tests/agents_support.AgentLab), closed after the test with their
    diagnostics printed: `make_lab(**roost_json_settings)`."""
    labs: list[AgentLab] = []

    def make(**settings: Any) -> AgentLab:
        lab = AgentLab(settings or None)
        labs.append(lab)
        return lab

    try:
        yield make
    finally:
        for lab in labs:
            print(lab.diagnostics())
            lab.close()
