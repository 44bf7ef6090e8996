"""Asking a pi over RPC from the CLI: `roost doctor`'s extension load check
(`load_extension`) and the reader of pi's answers that the model probe
(`roost.cli.doctor.model`) shares. Standard library only at the top."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

LOAD_TIMEOUT = 20.0  # the whole load check: pi's start, two answers and its exit
JOB_VARIABLES = ("PI_JOB_TOKEN", "ROOST_EXT_SOCK", "ROOST_JOB_ID", "ROOST_ATTACH_JOB")
"""A job's variables: a pi started by the CLI must not act as the job's pi."""


class LoadOutcome:
    __slots__ = ("argv", "failure", "commands", "errors", "seconds")

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv  # the command run
        self.failure: str | None = None  # why pi did not answer, or None
        self.commands: list[str] = []  # what get_commands lists
        self.errors: list[dict[str, Any]] = []  # extension_error events
        self.seconds = 0.0


def load_extension(argv: list[str], extension: Path, timeout: float = LOAD_TIMEOUT) -> LoadOutcome:
    """`pi --mode rpc --no-session --offline -e EXTENSION`, `get_state`, `get_commands`."""
    import signal
    import subprocess
    import tempfile
    import time

    env = {k: v for k, v in os.environ.items() if k not in JOB_VARIABLES}
    env.setdefault("PI_SKIP_VERSION_CHECK", "1")
    outcome = LoadOutcome([*argv, "--mode", "rpc", "--no-session", "--offline", "-e", str(extension)])
    started = time.monotonic()
    deadline = started + timeout - 2.0  # the rest is for pi's exit
    requests = [
        {"id": "doctor-state", "type": "get_state"},
        {"id": "doctor-commands", "type": "get_commands"},
    ]
    # A scratch cwd: the check is about the person's pi and agent dir, not the project
    # doctor happens to be run in (its .pi/ could add extensions of its own).
    with tempfile.TemporaryDirectory(prefix="roost-doctor-") as cwd, tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(
                outcome.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            outcome.failure = f"pi did not start: {exc}"
            return outcome
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(OSError):  # when pi is gone already, its stderr says why
            proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
            proc.stdin.flush()
        answered = answers(proc.stdout, len(requests), deadline, outcome)
        outcome.seconds = time.monotonic() - started
        with contextlib.suppress(OSError):
            proc.stdin.close()  # pi's RPC mode exits 0 at the end of its input
        try:
            code: int | None = proc.wait(max(0.5, deadline + 2.0 - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    state, commands = (answered.get(str(r["id"])) for r in requests)
    waited = f"within {timeout - 2:.0f} s"
    if state is None or commands is None:
        if code is not None:
            said = first_error(stderr)
            outcome.failure = f"pi exited ({code}) before answering" + (f": {said}" if said else "")
        else:
            outcome.failure = f"pi did not answer {'get_state' if state is None else 'get_commands'} {waited}"
    elif not state.get("success"):
        outcome.failure = f"get_state failed: {state.get('error')}"
    elif commands.get("success"):
        listed = (commands.get("data") or {}).get("commands") or []
        outcome.commands = [str(c.get("name")) for c in listed if isinstance(c, dict)]
    return outcome


def answers(stdout: Any, wanted: int, deadline: float, outcome: LoadOutcome) -> dict[str, dict[str, Any]]:
    """pi's responses by id (its `extension_error` events go to `outcome.errors`) until
    `wanted` have come, pi closed its stdout, or the deadline."""
    import selectors
    import time

    answered: dict[str, dict[str, Any]] = {}
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        while len(answered) < wanted and (left := deadline - time.monotonic()) > 0:
            if not selector.select(min(left, 1.0)):
                continue
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:
                break
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                try:
                    frame = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(frame, dict):
                    continue
                if frame.get("type") == "response" and isinstance(frame.get("id"), str):
                    answered[frame["id"]] = frame
                elif frame.get("type") == "extension_error":
                    outcome.errors.append(frame)
    return answered


def first_error(stderr: str) -> str:
    """The first problem pi's stderr reports: pi's `Error: …` (with its continuation line) or
    node's `SyntaxError: …` (without the stack); not pi's warnings (no models, …) and hints."""
    import re

    blocks: list[list[str]] = []
    for line in stderr.splitlines():
        if line[:1].isspace() and blocks:
            if line.strip() and not line.strip().startswith("at "):
                blocks[-1].append(line.strip())
        elif line.strip():
            blocks.append([line.strip()])
    named = [b for b in blocks if re.match(r"\w*Error\b", b[0])]
    if not named:
        named = [b for b in blocks if not b[0].startswith(("Warning:", "Hint:"))]
    if not named:
        return ""
    more = f" (and {len(named) - 1} more)" if len(named) > 1 else ""
    return (" ".join(named[0]) + more)[:500]
