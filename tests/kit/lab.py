"""One isolated roost for tests and benchmarks: the `Lab`, a `roost.fakellm.sandbox.Sandbox`
with the test harness around it.

A lab is a short temp root (Unix socket paths are limited to 107 bytes, and a job's
`ext.sock` lives in ROOST_HOME/jobs/<id>/) holding

    rh/             ROOST_HOME (not created: roostd makes it, `roost doctor` checks it)
    home/           HOME
    home/.pi/agent  PI_CODING_AGENT_DIR (models.json and settings.json when there is a model;
                    roost.json from `settings`)
    work/           the cwd of CLI calls, hence of jobs

with the environment every CLI call, roostd, its workers and their pi get: nothing of the
caller's roost or pi (no `ROOST_*`, `PI_*`, `*_API_KEY`, `XDG_STATE_HOME`) but the choice of
pi (`ROOST_PI`, `ROOST_PI_PREFIX`, `ROOST_NODE`), offline, unbuffered, logging at INFO.
A job runs with the environment of the CLI call that created it (`cli(..., env=...)` adds
variables to one call, as an `export` in the caller's shell would), roost's own on top.

```python
with Lab(pi="fake") as lab:                       # jobs run tests/fakepi/fakepi.py
    job = lab.run_job("--shell", "--", "true")
with Lab(llm=True, settings={"agentExternalMessages": True}) as lab:   # the real pi
    lab.llm.add(first_user_contains("T1"), text("hi"))
    job = lab.run("T1 say hi"); assert lab.wait(job) == "done"
```

- the CLI: `cli()` (fails loudly unless `check=False`; `env=` adds variables to one call,
  as a caller's shell would), `roost()` (never checks),
  `roost_ok()` (its stdout), `cli_json()`; `run()`, `run_job()`, `reply()`, `ls()`, `row()`,
  `wait()`, `daemon_status()`;
- roostd directly: `client()`, `connect()`, `request()`, `show()`, `wait_settled()`,
  `start_daemon()` (a roostd of the caller's choosing, e.g. a benchmark's probe);
- this process: `activate()` (roost.wire.client here talks to the lab), `use_bytecode_cache()`;
- files: `record()` (job.json through roost.job.record.load_record), `wait_state()`, `session()`,
  `mailbox_files()`, `children()`, `job_named()`;
- the model (a FakeLLM, shared or the lab's own): `requests_of()`, `tool_results_of()`,
  `wait_tool_results()`, `wait_request()`, `reports_seen()`, `messages_seen()`;
- a foreground pi: `spawn_pi()` (any extensions), `foreground()` (with roost's extension);
- `diagnostics()` (roostd's and the workers' logs), `processes()` (the one process finder),
  `shutdown()` (roostd with its jobs), `stop()` (and kill what is left), `close()` (and
  remove the root unless `keep`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kit.procs import wait_until
from kit.testpi import PiRpc, read_session
from roost.fakellm import FakeLLM, Matcher, first_user_contains
from roost.fakellm.requests import all_tool_results, envelopes, message_text, messages
from roost.fakellm.sandbox import Sandbox
from roost.job.record import load_record

REPO_DIR = Path(__file__).resolve().parents[2]
EXTENSION = REPO_DIR / "roost" / "extension" / "roost.ts"
FAKE_PI = REPO_DIR / "tests" / "fakepi" / "fakepi.py"
"""The fake pi (tests/fakepi): there in a checkout of roost, not in an installed package."""

CLI_TIMEOUT = 60.0
"""A CLI call that takes longer than this is a hang (start-up of roostd is ~0.5 s)."""


# -- the lab -------------------------------------------------------------------------------------
class Lab(Sandbox):
    """An isolated roost (+ pi, + scripted model) under a temp root; see the module doc.

    `pi`: None runs the selected real pi (ROOST_PI, ROOST_PI_PREFIX, ROOST_NODE of the
    caller, else the pinned one); "fake" the fake pi; a command (list) that program.
    `llm`: a FakeLLM to use (the caller starts and stops it), True for the lab's own
    (started now, stopped by `close()`), False for none. With a model, the agent dir's
    models.json points pi at it (`pi_settings`, `context_window` and the model's `prices`, per
    million tokens, go to make_agent_dir).
    `settings`: the user-level roost.json. `env`: extra variables. `keep`: `close()` leaves
    the root (and prints where) for a post-mortem. `tmp`: where the root is made (short:
    Unix socket paths are limited).
    """

    def __init__(
        self,
        *,
        pi: str | Sequence[str] | None = None,
        llm: FakeLLM | bool = False,
        settings: Mapping[str, Any] | None = None,
        pi_settings: Mapping[str, Any] | None = None,
        context_window: int | None = None,
        prices: Mapping[str, float] | None = None,
        env: Mapping[str, str] | None = None,
        keep: bool = False,
        prefix: str = "roost-",
        hold_timeout: float = 120.0,
        tmp: str | Path = "/tmp",
    ) -> None:
        super().__init__(
            llm=llm,
            settings=settings,
            pi_settings=pi_settings,
            context_window=context_window,
            prices=prices,
            keep=keep,
            prefix=prefix,
            hold_timeout=hold_timeout,
            tmp=tmp,
        )
        if pi == "fake":
            pi = [sys.executable, str(FAKE_PI)]
        if pi is not None:
            self.env["ROOST_PI"] = pi if isinstance(pi, str) else shlex.join(pi)
        self.env.update(env or {})
        self.daemon: subprocess.Popen[bytes] | None = None
        self._pis: list[PiRpc] = []

    # -- configuration ---------------------------------------------------------------------
    def use_bytecode_cache(self) -> None:
        """Like an installed package: roost's modules compiled once (into a shared
        PYTHONPYCACHEPREFIX), not by every process (benchmarks; a sandbox may set
        PYTHONDONTWRITEBYTECODE=1 and roost/ then has no pyc)."""
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "roost-bench-pycache")

    # -- the CLI ---------------------------------------------------------------------------
    def cli(
        self,
        *args: str,
        check: bool = True,
        timeout: float = CLI_TIMEOUT,
        cwd: Path | None = None,
        input: str | None = None,
        env: Mapping[str, str | None] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """`roost ARGS...` (python -m roost.cli, as the console script runs it) with this
        lab's environment (`env`: variables added for this call only; None removes one),
        from its work dir;
        AssertionError (with the logs) when it exits non-zero, unless `check=False`."""
        call_env = dict(self.env)
        for key, value in (env or {}).items():
            if value is None:
                call_env.pop(key, None)
            else:
                call_env[key] = value
        proc = subprocess.run(
            [sys.executable, "-m", "roost.cli", *args],
            env=call_env,
            cwd=cwd or self.work,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"roost {' '.join(args)} exited {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}\n{self.diagnostics()}"
            )
        return proc

    def roost(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """`cli(..., check=False)`: for tests of the exit code and the error text."""
        return self.cli(*args, check=False, **kwargs)

    def roost_ok(self, *args: str, **kwargs: Any) -> str:
        """`roost ARGS...` that must exit 0: its stdout."""
        return self.cli(*args, **kwargs).stdout

    def cli_json(self, *args: str, **kwargs: Any) -> Any:
        """The JSON that `roost ARGS...` (which must exit 0) printed."""
        return json.loads(self.cli(*args, **kwargs).stdout)

    def run_job(
        self, *args: str, cwd: Path | None = None, env: Mapping[str, str | None] | None = None
    ) -> str:
        """`roost run ARGS...` (`env`: variables of this call only, see `cli`): the new
        job's id."""
        job = self.cli("run", *args, cwd=cwd, env=env).stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{8}", job), job
        return job

    def run(self, task_text: str, name: str | None = None, cwd: Path | None = None) -> str:
        """`roost run [--name NAME] TASK`: the new job's id."""
        return self.run_job(*(["--name", name] if name is not None else []), task_text, cwd=cwd)

    def reply(self, job: str, text: str) -> str:
        """`roost reply JOB TEXT`: the outcome it printed."""
        return self.cli("reply", job, text).stdout.strip()

    def ls(self, tree: bool = False) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.cli_json("ls", "--json", *(["--tree"] if tree else []))
        return rows

    def row(self, job: str) -> dict[str, Any]:
        """The job's row of `roost ls --json`."""
        rows = [r for r in self.ls() if r["id"] == job]
        assert len(rows) == 1, rows
        return rows[0]

    def wait(self, job: str, timeout: float = 90.0) -> str:
        """`roost wait JOB`: the state it printed (fails on a timeout; a failed job, which
        exits 1, is its state)."""
        proc = self.roost("wait", job, "--timeout", str(timeout), timeout=timeout + 30)
        state = proc.stdout.strip()
        if proc.returncode != 0 and not (proc.returncode == 1 and state == "failed"):
            raise AssertionError(
                f"roost wait {job} exited {proc.returncode}\nstdout: "
                f"{proc.stdout}\nstderr: {proc.stderr}\n{self.diagnostics()}"
            )
        return state

    def daemon_status(self) -> dict[str, Any]:
        status: dict[str, Any] = json.loads(self.roost("daemon", "status", "--json").stdout)
        return status

    # -- roostd directly -------------------------------------------------------------------
    @property
    def socket_path(self) -> Path:
        return self.roost_home / "roostd.sock"

    def connect(self, timeout: float = 10.0) -> socket.socket:
        """A raw connection to roostd (which must be running); its greeting is unread."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(self.socket_path))
        except OSError:
            sock.close()
            raise
        return sock

    def client(self, timeout: float = 60.0) -> Any:
        """A roost.wire.client.Client on the running roostd (no autostart)."""
        from roost.wire.client import Client

        return Client(self.connect(timeout))

    def request(self, op: str, timeout: float = 10.0, **args: Any) -> dict[str, Any]:
        """One request to the running roostd; its result (RequestError when it failed)."""
        with self.client(timeout) as client:
            result: dict[str, Any] = client.request(op, timeout=timeout, **args)
            return result

    def show(self, job: str, *, cli: bool = False) -> dict[str, Any]:
        """The job's detail row: from the running roostd, or (`cli`) by `roost show JOB
        --json`, which starts roostd when it is not running."""
        if cli:
            shown: dict[str, Any] = self.cli_json("show", job, "--json")
            return shown
        return self.request("show", job=job)["job"]

    def wait_settled(self, job: str, timeout: float = 30.0) -> dict[str, Any]:
        """roostd's `wait` op (what `roost wait` does, without a CLI process): the job's row
        once its run has settled; AssertionError when it did not within `timeout`."""
        with self.client(timeout + 30) as client:
            result = client.call("wait", {"job": job, "timeout": timeout}, timeout + 30)
        assert result["settled"], f"job {job} did not settle in {timeout:g}s: {result['row']}"
        row: dict[str, Any] = result["row"]
        return row

    def start_daemon(self, argv: Sequence[str] | None = None, timeout: float = 30.0) -> None:
        """Start roostd (`roost daemon run`, or `argv`) in this lab, logging to roostd.log,
        and return once it answers; `close()` shuts it down."""
        self.roost_home.mkdir(mode=0o700, parents=True, exist_ok=True)
        argv = list(argv or [sys.executable, "-m", "roost.cli.main", "daemon", "run"])
        with open(self.roost_home / "roostd.log", "ab") as log:
            self.daemon = subprocess.Popen(
                argv,
                env=self.env,
                cwd=self.roost_home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.connect().close()
                return
            except OSError:
                if time.monotonic() > deadline or self.daemon.poll() is not None:
                    raise
                time.sleep(0.02)  # start-up wait only: the socket appears once

    def daemon_pid(self) -> int | None:
        try:
            return int((self.roost_home / "roostd.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    # -- files (cheap to poll: roostd and the worker write job.json atomically) ------------
    def job_dir(self, job: str) -> Path:
        return self.roost_home / "jobs" / job

    def record(self, job: str) -> dict[str, Any]:
        """The job's job.json as its JSON (through roost.job.record.load_record); {} while there is
        none or it does not load."""
        try:
            return load_record(self.job_dir(job) / "job.json").to_json()
        except (OSError, ValueError):
            return {}

    def wait_state(self, job: str, *states: str, timeout: float = 90.0) -> dict[str, Any]:
        """The job's record once its state is one of `states`."""
        return wait_until(
            lambda: (r := self.record(job)).get("state") in states and r,
            timeout,
            lambda: f"job {job} to be {'/'.join(states)} (job.json: {self.record(job)})",
        )

    def session(self, job: str) -> list[dict[str, Any]]:
        """The entries of the job's pi session file ([] while there is none)."""
        path = Path(self.record(job).get("session") or self.job_dir(job) / "session.jsonl")
        return read_session(path) if path.exists() else []

    def mailbox_files(self, job: str, sub: str = "new") -> list[dict[str, Any]]:
        """The items in the job's mailbox/`sub` (new: pending, cur: acknowledged), by name."""
        directory = self.job_dir(job) / "mailbox" / sub
        out = []
        for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
            with contextlib.suppress(OSError, ValueError):
                out.append(json.loads(path.read_text()))
        return out

    def _records(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted((self.roost_home / "jobs").glob("*/job.json")):
            with contextlib.suppress(OSError, ValueError):
                out.append(load_record(path).to_json())
        return out

    def children(self, parent: str) -> list[dict[str, Any]]:
        """The records whose links.parentPeer is `parent`, by creation time."""
        return sorted(
            (r for r in self._records() if r["links"]["parentPeer"] == parent),
            key=lambda r: r.get("created", ""),
        )

    def job_named(self, name: str) -> dict[str, Any] | None:
        return next((r for r in self._records() if r.get("name") == name), None)

    # -- the model -------------------------------------------------------------------------
    def requests_of(self, marker: str) -> list[Any]:
        """The model requests of the job whose task (first user message) has `marker`."""
        return self.llm.requests_matching(first_user_contains(marker))

    def tool_results_of(self, marker: str, tool: str | None = None) -> list[dict[str, Any]]:
        return all_tool_results(self.requests_of(marker), tool)

    def wait_tool_results(
        self, marker: str, tool: str, count: int = 1, timeout: float = 90.0
    ) -> list[dict[str, Any]]:
        return wait_until(
            lambda: len(r := self.tool_results_of(marker, tool)) >= count and r,
            timeout,
            lambda: (
                f"{count} {tool} result(s) in the requests of {marker!r} "
                f"(have {self.tool_results_of(marker)})"
            ),
        )

    def wait_request(self, match: Matcher, timeout: float = 90.0, since: int = 0) -> Any:
        try:
            return self.llm.wait_for_request(match, timeout=timeout, since=since)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.diagnostics()}") from None

    def reports_seen(self, marker: str) -> list[dict[str, Any]]:
        """Distinct report envelopes the model of `marker` was shown, in order."""
        return self._distinct_envelopes(marker, "report")

    def messages_seen(self, marker: str) -> list[dict[str, Any]]:
        return self._distinct_envelopes(marker, "message")

    def _distinct_envelopes(self, marker: str, kind: str) -> list[dict[str, Any]]:
        # A job's history only grows (no compaction in these tests), so a message keeps its
        # position in every later request: (position, text) identifies one arrival.
        found: dict[tuple[int, str], dict[str, Any]] = {}
        for request in self.requests_of(marker):
            for index, message in enumerate(messages(request)):
                text = message_text(message)
                if message.get("role") != "user" or not text.startswith("<agent-message"):
                    continue
                for env in envelopes(text):
                    if env.get("kind") == kind:
                        found.setdefault((index, env["raw"]), env)
        return [found[key] for key in sorted(found)]

    # -- a foreground pi -------------------------------------------------------------------
    def spawn_pi(
        self,
        *,
        session: Path | None = None,
        extensions: Iterable[Path] = (),
        extra_env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        args: Iterable[str] = (),
    ) -> PiRpc:
        """`pi --mode rpc` outside roost (`--no-session` unless `session`) with this lab's
        environment; closed by `close()`."""
        rpc = PiRpc(
            cwd=cwd or self.work,
            env={**self.env, **(extra_env or {})},
            session=session,
            extensions=extensions,
            args=args,
        )
        self._pis.append(rpc)
        return rpc

    def foreground(self, session: Path, cwd: Path | None = None) -> PiRpc:
        """`pi --mode rpc --session FILE -e roost.ts`: a foreground peer of this roost."""
        return self.spawn_pi(session=session, extensions=[EXTENSION], cwd=cwd)

    # -- diagnostics and teardown ----------------------------------------------------------
    def diagnostics(self) -> str:
        """The tails of roostd's log and of every worker's (printed at teardown)."""
        parts = []
        for log in [self.roost_home / "roostd.log", *sorted(self.roost_home.glob("jobs/*/worker.log"))]:
            with contextlib.suppress(OSError):
                parts.append(f"--- {log} ---\n" + log.read_text(errors="replace")[-5000:])
        return "\n".join(parts)

    def shutdown(self) -> None:
        """Close the foreground pis and stop roostd with its jobs (what is left is not
        killed: see `processes()`)."""
        for rpc in self._pis:
            with contextlib.suppress(Exception):
                rpc.close(timeout=3)
        self._pis = []
        if self.daemon is not None:
            with contextlib.suppress(Exception), self.client() as client:
                client.request("shutdown", timeout=60, jobs=True)
            try:
                self.daemon.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(self.daemon.pid, signal.SIGKILL)
                self.daemon.wait()
        else:
            super().shutdown()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
