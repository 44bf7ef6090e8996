"""Helpers for the agent-messaging end-to-end tests (tests/test_e2e_agents.py).

`AgentLab` is one isolated roost + real pi installation: a FakeLLM in the test process, a
pi agent dir pointing at it (plus the user-level `roost.json`), a temp `ROOST_HOME`, `HOME`
and work dir, and the `roost` CLI (`python -m roost.cli.main`) run with that environment.
`close()` stops roostd with its jobs, then kills whatever process of that ROOST_HOME is
left (psutil), then stops the FakeLLM.

The model is scripted per job: every rule is keyed on `first_user_contains(<task marker>)`
so each job (whose task is its first user message) gets its own script. Agent items reach
the model as `role: "user"` messages starting `<agent-message`; tool results are
`role: "tool"` messages.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import psutil
from support import wait_until  # noqa: F401 - re-exported

from roost.protocol import CUSTOM_TYPE
from roost.testkit.fakellm import FakeLLM, Matcher, first_user_contains
from roost.testkit.fakellm.requests import content_text, message_text, messages, tool_results
from roost.testkit.pi import make_agent_dir, pi_env, read_session

REPO_DIR = Path(__file__).resolve().parent.parent
EXTENSION = REPO_DIR / "roost" / "extension" / "roost.ts"
CLI_TIMEOUT = 60.0

_ENVELOPE = re.compile(
    r"<agent-message (?P<attrs>[^\n]*)>\n(?P<body>.*?)\n</agent-message>", re.DOTALL
)
_ATTR = re.compile(r'(\w+)="([^"]*)"')


# -- matchers -------------------------------------------------------------------------------
def _last(request: Mapping[str, Any]) -> dict[str, Any]:
    msgs = messages(request)
    return msgs[-1] if msgs else {}


def last_user_has(text: str) -> Matcher:
    """The LAST message of the request is a user message containing `text` (so a rule keyed
    on it fires once per arrival, not again after the tool results that follow)."""

    def fn(r: Mapping[str, Any]) -> bool:
        last = _last(r)
        return last.get("role") == "user" and text in message_text(last)

    return Matcher(fn, f"last_user_has({text!r})")


def new_user_has(text: str) -> Matcher:
    """The request ends with user messages (those since the model last spoke) and one of
    them contains `text`: like `last_user_has`, but also when two items arrived together
    (e.g. a user reply and a report at the same tool boundary)."""

    def fn(r: Mapping[str, Any]) -> bool:
        return any(text in line for line in new_user_texts(r))

    return Matcher(fn, f"new_user_has({text!r})")


def new_user_texts(request: Mapping[str, Any]) -> list[str]:
    """The texts of the user messages since the model last spoke (what a request adds)."""
    tail = []
    for message in reversed(messages(request)):
        if message.get("role") != "user":
            break
        tail.append(message_text(message))
    return tail[::-1]


def task(marker: str) -> Matcher:
    """Requests of the job whose task (first user message) contains `marker`."""
    return first_user_contains(marker)


def fresh(marker: str) -> Matcher:
    """The first model request of that job: its only user message is the task."""

    def fn(r: Mapping[str, Any]) -> bool:
        users = [m for m in messages(r) if m.get("role") == "user"]
        return len(users) == 1 and _last(r).get("role") == "user"

    return first_user_contains(marker) & Matcher(fn, "fresh")


def after_tool(marker: str, tool: str) -> Matcher:
    """The last message is the result of `tool` in the job of `marker`."""

    def fn(r: Mapping[str, Any]) -> bool:
        last = _last(r)
        if last.get("role") != "tool":
            return False
        results = tool_results(r)
        return bool(results) and results[-1].get("name") == tool

    return first_user_contains(marker) & Matcher(fn, f"after_tool({tool!r})")


# -- reading requests -----------------------------------------------------------------------
def envelopes(text: str) -> list[dict[str, Any]]:
    """Every `<agent-message ...>` frame in `text`: its attributes plus `body`."""
    out = []
    for match in _ENVELOPE.finditer(text):
        attrs = dict(_ATTR.findall(match.group("attrs")))
        attrs["body"] = match.group("body")
        attrs["raw"] = match.group(0)
        out.append(attrs)
    return out


def user_messages(request: Mapping[str, Any]) -> list[str]:
    return [message_text(m) for m in messages(request) if m.get("role") == "user"]


def agent_messages_in(request: Mapping[str, Any]) -> list[str]:
    """User-role messages of a request that are agent envelopes."""
    return [t for t in user_messages(request) if t.startswith("<agent-message")]


def all_tool_results(requests: Iterable[Mapping[str, Any]], tool: str | None = None
                     ) -> list[dict[str, Any]]:
    """Tool results across requests, once each (by tool_call_id), oldest first; each with
    `name` and `text`."""
    seen: set[str] = set()
    out = []
    for request in requests:
        for result in tool_results(request):
            call_id = str(result.get("tool_call_id"))
            if call_id in seen:
                continue
            seen.add(call_id)
            if tool is not None and result.get("name") != tool:
                continue
            out.append({**result, "text": content_text(result.get("content"))})
    return out


def session_custom_messages(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries
            if e.get("type") == "custom_message" and e.get("customType") == CUSTOM_TYPE]


def session_user_texts(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    out = []
    for entry in entries:
        message = entry.get("message") or {}
        if entry.get("type") == "message" and message.get("role") == "user":
            out.append(content_text(message.get("content")))
    return out


def entry_text(entry: Mapping[str, Any]) -> str:
    return content_text(entry.get("content"))


def wait_file_command(path: Path, limit: float = 60.0) -> str:
    """A bash command that returns once `path` exists (bounded, so nothing hangs forever)."""
    rounds = int(limit / 0.05)
    return (f"for i in $(seq 1 {rounds}); do [ -e '{path}' ] && break; sleep 0.05; done; "
            f"echo released")


# -- the lab -------------------------------------------------------------------------------
class AgentLab:
    """An isolated roost + real pi + FakeLLM, driven through the CLI."""

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        # Short paths: Unix socket paths are limited to 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="ra-", dir="/tmp"))
        self.llm = FakeLLM(hold_timeout=120.0).start()
        self.roost_home = self.root / "rh"
        self.home = self.root / "home"
        self.work = self.root / "work"
        for directory in (self.home, self.work):
            directory.mkdir(parents=True, exist_ok=True)
        self.agent_dir = make_agent_dir(self.root / "agent", self.llm.base_url)
        if settings:
            self.configure(**settings)
        self.env = pi_env(self.agent_dir, self.home, extra={
            "ROOST_HOME": str(self.roost_home), "ROOST_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        })
        self._fg: list[Any] = []

    # -- configuration ---------------------------------------------------------------------
    def configure(self, **settings: Any) -> None:
        """Merge `settings` into the user-level `<agent dir>/roost.json` (a new mtime)."""
        path = self.agent_dir / "roost.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(settings)
        before = path.stat().st_mtime_ns if path.exists() else None
        path.write_text(json.dumps(data))
        if before is not None and path.stat().st_mtime_ns == before:  # coarse clock: bump
            os.utime(path, ns=(before + 1_000_000, before + 1_000_000))

    # -- the CLI ---------------------------------------------------------------------------
    def cli(self, *args: str, check: bool = True, timeout: float = CLI_TIMEOUT,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "roost.cli.main", *args],
            env=self.env, cwd=cwd or self.work, capture_output=True, text=True, timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"roost {' '.join(args)} exited {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def run(self, task_text: str, name: str | None = None, cwd: Path | None = None) -> str:
        args = ["run"]
        if name is not None:
            args += ["--name", name]
        job = self.cli(*args, task_text, cwd=cwd).stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{8}", job), job
        return job

    def reply(self, job: str, text: str) -> str:
        return self.cli("reply", job, text).stdout.strip()

    def ls(self, tree: bool = False) -> list[dict[str, Any]]:
        args = ["ls", "--json"] + (["--tree"] if tree else [])
        return json.loads(self.cli(*args).stdout)

    def wait(self, job: str, timeout: float = 90.0) -> str:
        return self.cli("wait", job, "--timeout", str(timeout), timeout=timeout + 30).stdout.strip()

    # -- files -----------------------------------------------------------------------------
    def job_dir(self, job: str) -> Path:
        return self.roost_home / "jobs" / job

    def record(self, job: str) -> dict[str, Any]:
        try:
            return json.loads((self.job_dir(job) / "job.json").read_text())
        except (OSError, ValueError):
            return {}

    def wait_state(self, job: str, *states: str, timeout: float = 90.0) -> dict[str, Any]:
        return wait_until(
            lambda: (r := self.record(job)).get("state") in states and r, timeout,
            lambda: f"job {job} to be {'/'.join(states)} (job.json: {self.record(job)})",
        )

    def session(self, job: str) -> list[dict[str, Any]]:
        path = self.record(job).get("session") or str(self.job_dir(job) / "session.jsonl")
        return read_session(Path(path)) if Path(path).exists() else []

    def mailbox_files(self, job: str, sub: str = "new") -> list[dict[str, Any]]:
        directory = self.job_dir(job) / "mailbox" / sub
        out = []
        for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
            with contextlib.suppress(OSError, ValueError):
                out.append(json.loads(path.read_text()))
        return out

    def children(self, parent: str) -> list[dict[str, Any]]:
        """job.json records whose parentPeer is `parent`, by creation time."""
        out = []
        for path in sorted((self.roost_home / "jobs").glob("*/job.json")):
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text())
                if data.get("parentPeer") == parent:
                    out.append(data)
        return sorted(out, key=lambda d: d.get("created", ""))

    def job_named(self, name: str) -> dict[str, Any] | None:
        for path in (self.roost_home / "jobs").glob("*/job.json"):
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text())
                if data.get("name") == name:
                    return data
        return None

    # -- the model -------------------------------------------------------------------------
    def requests_of(self, marker: str) -> list[Any]:
        return self.llm.requests_matching(first_user_contains(marker))

    def tool_results_of(self, marker: str, tool: str | None = None) -> list[dict[str, Any]]:
        return all_tool_results(self.requests_of(marker), tool)

    def wait_tool_results(self, marker: str, tool: str, count: int = 1,
                          timeout: float = 90.0) -> list[dict[str, Any]]:
        return wait_until(
            lambda: len(r := self.tool_results_of(marker, tool)) >= count and r, timeout,
            lambda: f"{count} {tool} result(s) in the requests of {marker!r} "
                    f"(have {self.tool_results_of(marker)})",
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
    def foreground(self, session: Path, cwd: Path | None = None) -> Any:
        """`pi --mode rpc --session FILE -e roost.ts` outside roost, with this lab's env."""
        from roost.testkit.pi import PiRpc

        rpc = PiRpc(cwd=cwd or self.work, env=self.env, session=session, extensions=[EXTENSION])
        self._fg.append(rpc)
        return rpc

    # -- teardown --------------------------------------------------------------------------
    def diagnostics(self) -> str:
        parts = []
        log = self.roost_home / "roostd.log"
        if log.exists():
            parts.append("--- roostd.log ---\n" + log.read_text(errors="replace")[-5000:])
        for wl in sorted(self.roost_home.glob("jobs/*/worker.log")):
            parts.append(f"--- {wl} ---\n" + wl.read_text(errors="replace")[-3000:])
        return "\n".join(parts)

    def processes(self) -> list[psutil.Process]:
        wanted, marker, me = str(self.roost_home), str(self.root), os.getpid()
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            if proc.pid == me:
                continue
            with contextlib.suppress(psutil.Error):
                cmdline = proc.info["cmdline"] or ()
                if any(marker in part for part in cmdline) or (
                    proc.environ().get("ROOST_HOME") == wanted
                ):
                    found.append(proc)
        return found

    def close(self) -> None:
        for rpc in self._fg:
            with contextlib.suppress(Exception):
                rpc.close(timeout=3)
        with contextlib.suppress(Exception):
            self.cli("daemon", "stop", "--jobs", check=False, timeout=40)
        leftovers = self.processes()
        for proc in leftovers:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(leftovers, timeout=5)
        self.llm.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def kill_and_wait(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)

    def gone() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_until(gone, 10, f"pid {pid} to die")
