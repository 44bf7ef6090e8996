"""Shared helpers for the end-to-end tests that drive the real `roost` CLI and the real pi.

`RoostLab` is one isolated roost installation: a temp `ROOST_HOME`, a temp `HOME`, a pi
agent dir whose only model is a FakeLLM running in the test process, and the environment
every CLI call (and so roostd, its workers and their pi) gets. `close()` stops the daemon
with its jobs and then kills anything left that belongs to this `ROOST_HOME`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import psutil
from support import is_pi, pid_alive, wait_until  # noqa: F401 - re-exported

from roost.testkit.fakellm import FakeLLM
from roost.testkit.pi import make_agent_dir, pi_env, read_session
from roost.transcript import content_text

CLI_TIMEOUT = 60.0
"""A CLI call that takes longer than this is a hang (start-up of roostd is ~0.5 s)."""


def processes_of_home(home: Path) -> list[psutil.Process]:
    """Every live process whose environment has ROOST_HOME=`home` (roostd, workers, pi)."""
    wanted = str(home)
    found = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("ROOST_HOME") == wanted:
                found.append(proc)
    return found


def kill_processes_of_home(home: Path) -> list[int]:
    procs = processes_of_home(home)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=5)
    return [p.pid for p in procs]


def user_texts(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """The text of every user message in a session file's entries, in order."""
    return [content_text(entry["message"].get("content")) for entry in entries
            if entry.get("type") == "message" and (entry.get("message") or {}).get("role") == "user"]


def request_user_texts(request: Mapping[str, Any]) -> list[str]:
    """The text of every user message of a recorded model request, in order."""
    return [content_text(m.get("content")) for m in request.get("messages") or []
            if m.get("role") == "user"]


class RoostLab:
    """An isolated roost + pi installation under `root`, driven through the CLI."""

    def __init__(
        self,
        root: Path,
        llm: FakeLLM,
        *,
        roost_settings: Mapping[str, Any] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.llm = llm
        # Short: a job's socket (ROOST_HOME/jobs/<id>/ext.sock) must fit in 107 bytes,
        # which a deep pytest tmp_path may not.
        self.roost_home = Path(tempfile.mkdtemp(prefix="roost-e2e-", dir="/tmp"))
        self.home = self.root / "home"
        self.work = self.root / "work"
        for d in (self.home, self.work):
            d.mkdir(parents=True, exist_ok=True)
        self.agent_dir = make_agent_dir(self.root / "agent", llm.base_url)
        if roost_settings:
            (self.agent_dir / "roost.json").write_text(json.dumps(dict(roost_settings)))
        extra = {"ROOST_HOME": str(self.roost_home), "ROOST_LOG_LEVEL": "INFO"}
        extra.update(extra_env or {})
        self.env = pi_env(self.agent_dir, self.home, extra=extra)

    # -- the CLI -----------------------------------------------------------------------
    def cli(
        self, *args: str, check: bool = True, timeout: float = CLI_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        """`roost ARGS...` with this lab's environment, from its work dir."""
        proc = subprocess.run(
            [sys.executable, "-m", "roost.cli.main", *args],
            env=self.env, cwd=self.work, capture_output=True, text=True, timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"roost {' '.join(args)} exited {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}\n{self.diagnostics()}"
            )
        return proc

    def run_job(self, *args: str) -> str:
        job = self.cli("run", *args).stdout.strip()
        assert len(job) == 8, job
        return job

    def ls(self) -> list[dict[str, Any]]:
        return json.loads(self.cli("ls", "--json").stdout)

    def row(self, job: str) -> dict[str, Any]:
        rows = [r for r in self.ls() if r["id"] == job]
        assert len(rows) == 1, rows
        return rows[0]

    def show(self, job: str) -> dict[str, Any]:
        return json.loads(self.cli("show", job, "--json").stdout)

    def wait(self, job: str, timeout: float = 60.0) -> str:
        """`roost wait JOB`: the state it printed (fails on a timeout)."""
        return self.cli("wait", job, "--timeout", str(timeout), timeout=timeout + 30).stdout.strip()

    def daemon_status(self) -> dict[str, Any]:
        proc = self.cli("daemon", "status", "--json", check=False)
        return json.loads(proc.stdout)

    # -- files (cheap to poll: the daemon writes job.json atomically) --------------------
    def job_dir(self, job: str) -> Path:
        return self.roost_home / "jobs" / job

    def record(self, job: str) -> dict[str, Any]:
        try:
            return json.loads((self.job_dir(job) / "job.json").read_text())
        except (OSError, ValueError):
            return {}

    def wait_state(self, job: str, *states: str, timeout: float = 60.0) -> dict[str, Any]:
        return wait_until(
            lambda: (r := self.record(job)).get("state") in states and r,
            timeout, f"job {job} to be {'/'.join(states)} (job.json: {self.record(job)})",
        )

    def session(self, job: str) -> list[dict[str, Any]]:
        path = self.job_dir(job) / "session.jsonl"
        return read_session(path) if path.exists() else []

    def pi_of(self, worker_pid: int) -> list[psutil.Process]:
        """The node (pi) processes under a worker."""
        try:
            children = psutil.Process(worker_pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [c for c in children if is_pi(c)]

    # -- teardown -----------------------------------------------------------------------
    def diagnostics(self) -> str:
        parts = []
        log = self.roost_home / "roostd.log"
        if log.exists():
            parts.append("--- roostd.log (tail) ---\n" + log.read_text()[-4000:])
        jobs = self.roost_home / "jobs"
        if jobs.is_dir():
            for wl in sorted(jobs.glob("*/worker.log")):
                parts.append(f"--- {wl} (tail) ---\n" + wl.read_text(errors="replace")[-3000:])
        return "\n".join(parts)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.cli("daemon", "stop", "--jobs", check=False, timeout=40)
        kill_processes_of_home(self.roost_home)
        # Keep the logs (and job files) beside the test's tmp_path for post-mortems.
        with contextlib.suppress(OSError):
            shutil.copytree(self.roost_home, self.root / "roost-home", symlinks=True,
                            ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(self.roost_home, ignore_errors=True)


def kill(pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Send `sig` and wait until the process is gone (or a zombie nobody reaped yet)."""
    os.kill(pid, sig)
    wait_until(lambda: not pid_alive(pid), 10, f"pid {pid} to die")
