"""Helpers for tests, benchmarks and the demo that run the real pi against a FakeLLM.

- `make_agent_dir(root, llm_base_url)`, `pi_env(agent_dir, home)`: an isolated pi agent
  dir whose only model is the FakeLLM, and the environment for such a pi (from
  roost.fakellm.sandbox, re-exported);
- `PiRpc`: a small synchronous driver for `pi --mode rpc`;
- `node_has_compile_cache(node)`: whether that node has node's compile cache (22.1 on).

All of it in one temp dir, with roost around it, is kit.lab.Lab.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from roost.fakellm.sandbox import make_agent_dir as make_agent_dir
from roost.fakellm.sandbox import pi_env as pi_env
from roost.pi.locate import find_pi

SETUP_HINT = "run scripts/setup (it installs the pinned pi into .runtime/pi)"


def node_has_compile_cache(node: str) -> bool:
    """Whether `node` has node's compile cache (`module.enableCompileCache`, 22.1 and on)."""
    probe = [node, "-p", "typeof require('node:module').enableCompileCache"]
    return subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip() == "function"


class PiRpcError(RuntimeError):
    """pi answered a command with `success: false`, or the process died or timed out."""


def require_pi() -> list[str]:
    """The command that starts pi, or an error that says how to get it."""
    try:
        cmd = find_pi().argv
    except FileNotFoundError as e:
        raise FileNotFoundError(f"pi is not installed: {SETUP_HINT}. ({e})") from e
    exe = Path(cmd[0])
    if exe.is_absolute() and not exe.exists():
        raise FileNotFoundError(f"pi command {cmd[0]} does not exist: {SETUP_HINT}")
    return cmd


Event = dict[str, Any]


class PiRpc:
    """`pi --mode rpc` as a subprocess, driven synchronously.

    Everything pi prints is kept in order in `log` (events and responses alike, with the
    receive time in `times`), so tests can reason about ordering. `wait_event` consumes
    events like a queue (a cursor moves past each one it returns) while `log` keeps them.
    """

    def __init__(
        self,
        *,
        cwd: Path,
        env: Mapping[str, str],
        session: Path | None = None,
        extensions: Iterable[Path] = (),
        args: Iterable[str] = (),
        command: list[str] | None = None,
    ) -> None:
        cmd = list(command) if command is not None else require_pi()
        cmd += ["--mode", "rpc", "--offline"]
        cmd += ["--session", str(session)] if session is not None else ["--no-session"]
        for ext in extensions:
            cmd += ["-e", str(ext)]
        cmd += list(args)
        self.argv = cmd
        self.log: list[Event] = []
        self.times: list[float] = []
        self._cursor = 0
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._stderr: list[bytes] = []
        self._closed = False
        self.spawned_at = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            cwd=str(cwd),
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._reader = threading.Thread(
            target=self._read_stdout, args=(self.proc.stdout,), daemon=True, name="pirpc-out"
        )
        self._err_reader = threading.Thread(
            target=self._read_stderr, args=(self.proc.stderr,), daemon=True, name="pirpc-err"
        )
        self._reader.start()
        self._err_reader.start()

    # ---- reading ---------------------------------------------------------------------

    def _read_stdout(self, stream: IO[bytes]) -> None:
        buf = b""
        fd = stream.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
            # pi frames records with \n only; a JSON string may hold U+2028, so never
            # use a generic line splitter here.
            *lines, buf = buf.split(b"\n")
            for line in lines:
                self._accept(line)
        if buf.strip():
            self._accept(buf)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _accept(self, line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            return
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                obj = {"type": "_nonjson", "raw": line.decode("utf-8", "replace")}
        except ValueError:
            obj = {"type": "_nonjson", "raw": line.decode("utf-8", "replace")}
        with self._cond:
            self.log.append(obj)
            self.times.append(time.monotonic())
            self._cond.notify_all()

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):
            self._stderr.append(chunk)

    def stderr_text(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    @property
    def events(self) -> list[Event]:
        """Everything but command responses, in order (a snapshot)."""
        with self._cond:
            return [e for e in self.log if e.get("type") != "response"]

    def mark(self) -> int:
        """The current end of `log`; pass as `since=` to look only at later lines."""
        with self._cond:
            return len(self.log)

    # ---- writing ---------------------------------------------------------------------

    def write(self, obj: Mapping[str, Any]) -> None:
        """Send one JSON line without waiting for anything."""
        assert self.proc.stdin is not None
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as e:
            raise PiRpcError(f"pi is gone (exit {self.proc.poll()}): {self._diag()}") from e

    def send(self, cmd: Mapping[str, Any], timeout: float = 15.0) -> dict[str, Any]:
        """Send a command with a fresh `id` and return its response (success or not)."""
        rid = f"r{next(self._ids)}"
        since = self.mark()  # the response can only come after the command is written
        self.write({**cmd, "id": rid})
        return self.wait_line(
            lambda o: o.get("type") == "response" and o.get("id") == rid,
            timeout,
            since=since,
            what=f"response to {cmd.get('type')}",
            consume=False,
        )

    def call(self, type_: str, timeout: float = 15.0, **fields: Any) -> Any:
        """`send({"type": type_, **fields})`, returning `data`; PiRpcError on failure."""
        resp = self.send({"type": type_, **fields}, timeout)
        if not resp.get("success"):
            raise PiRpcError(f"{type_} failed: {resp.get('error')}")
        return resp.get("data")

    def get_state(self, timeout: float = 15.0) -> dict[str, Any]:
        return dict(self.call("get_state", timeout))

    def prompt(self, message: str, timeout: float = 15.0, **fields: Any) -> dict[str, Any]:
        return self.send({"type": "prompt", "message": message, **fields}, timeout)

    def answer_ui(self, request_id: str, **fields: Any) -> None:
        """Answer an `extension_ui_request` dialog: value=..., confirmed=..., cancelled=True."""
        self.write({"type": "extension_ui_response", "id": request_id, **fields})

    # ---- waiting ---------------------------------------------------------------------

    def wait_line(
        self,
        pred: Callable[[Event], bool],
        timeout: float = 15.0,
        *,
        since: int | None = None,
        what: str = "line",
        consume: bool = True,
    ) -> Event:
        """The first line of `log` (from `since`, default the cursor) satisfying `pred`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            i = self._cursor if since is None else since
            while True:
                while i < len(self.log):
                    obj = self.log[i]
                    i += 1
                    if pred(obj):
                        if consume:
                            self._cursor = max(self._cursor, i)
                        return obj
                if self._closed:
                    raise PiRpcError(f"pi exited while waiting for {what}: {self._diag()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    recent = [e.get("type") for e in self.log[-15:]]
                    raise PiRpcError(f"timed out after {timeout}s waiting for {what}; last lines: {recent}")
                self._cond.wait(left)

    def wait_event(
        self,
        type_: str | None = None,
        predicate: Callable[[Event], bool] | None = None,
        timeout: float = 15.0,
        *,
        since: int | None = None,
    ) -> Event:
        """The next event of `type_` (and `predicate`) after the cursor (or `since`)."""

        def pred(o: Event) -> bool:
            if o.get("type") == "response":
                return False
            if type_ is not None and o.get("type") != type_:
                return False
            return predicate is None or predicate(o)

        return self.wait_line(pred, timeout, since=since, what=f"event {type_ or predicate}")

    def index_of(self, obj: Event) -> int:
        """Position of a line previously returned (identity) in `log`."""
        with self._cond:
            for i, o in enumerate(self.log):
                if o is obj:
                    return i
        raise ValueError("not a line of this log")

    def run_prompt(self, message: str, timeout: float = 30.0) -> list[Event]:
        """Prompt and wait for the run's agent_end; returns the lines from prompt to agent_end."""
        start = self.mark()
        resp = self.prompt(message)
        if not resp.get("success"):
            raise PiRpcError(f"prompt failed: {resp.get('error')}")
        end = self.wait_event("agent_end", timeout=timeout, since=start)
        return self.log[start : self.index_of(end) + 1]

    # ---- ending ----------------------------------------------------------------------

    def _diag(self) -> str:
        err = self.stderr_text().strip()
        return f"argv={self.argv!r} stderr={err[-2000:]!r}"

    def close(self, timeout: float = 5.0) -> int:
        """Close stdin (pi exits 0), wait; SIGTERM then SIGKILL if it lingers. Returns rc."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        self._reader.join(timeout=2)
        self._err_reader.join(timeout=2)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()
        return int(self.proc.returncode)

    def __enter__(self) -> PiRpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_session(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a pi session file (JSONL), in order.

    A line a SIGKILLed pi cut short is skipped, as pi skips it; any other line that is not
    JSON raises: above all, an entry glued onto such a fragment (roost.pi.sessiontail)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if not cut_short(line, exc):
                raise
    return out


def cut_short(line: str, exc: json.JSONDecodeError) -> bool:
    """Whether the decoder ran out of `line` (a prefix of an entry), rather than finding
    something other than JSON inside it."""
    return exc.pos >= len(line.rstrip()) or exc.msg.startswith("Unterminated string")
