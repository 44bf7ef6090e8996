"""A command's output as a terminal of a given size shows it: `in_pty()` runs it with its
stdout on a pseudo-terminal of `columns` x `rows` (COLUMNS and LINES set to match) and
returns what it wrote, colours removed. `columns_of()` cuts a table's lines at its headers."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def roost_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "roost.cli", *args]  # the console script's entry


def in_pty(
    argv: Sequence[str],
    env: Mapping[str, str],
    columns: int,
    rows: int = 24,
    cwd: Path | None = None,
    stdin: str | None = None,
    timeout: float = 60.0,
) -> str:
    """The command's stdout (and stderr) as written to a `columns`-wide terminal, without
    colours, with `\\n` line ends; AssertionError when it exits non-zero or hangs."""
    colours = {key: value for key, value in env.items() if key != "NO_COLOR"}
    code, raw = on_pty(argv, colours, columns, rows, cwd, stdin, timeout)
    text = ANSI.sub("", raw).replace("\r\n", "\n")
    if code != 0:
        raise AssertionError(f"{argv} exited {code}:\n{text}")
    return text


def on_pty(
    argv: Sequence[str],
    env: Mapping[str, str],
    columns: int = 200,
    rows: int = 50,
    cwd: Path | None = None,
    stdin: str | None = None,
    timeout: float = 60.0,
) -> tuple[int, str]:
    """(exit code, every byte written, as text) by `argv` with its stdout and stderr on a
    `columns` x `rows` pseudo-terminal; AssertionError when it hangs."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    full_env = {**env, "COLUMNS": str(columns), "LINES": str(rows), "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        list(argv),
        env=full_env,
        cwd=cwd,
        stdout=slave,
        stderr=slave,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
    )
    os.close(slave)
    if stdin is not None and proc.stdin is not None:
        proc.stdin.write(stdin.encode())
        proc.stdin.close()
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the last writer closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            raise AssertionError(f"{argv} did not finish in {timeout}s")
    finally:
        os.close(master)
    return proc.wait(timeout=10), b"".join(chunks).decode("utf-8", "replace")


def columns_of(lines: Sequence[str], header: str) -> dict[str, list[str]]:
    """Each column's text per line of a table whose header line is `header` (the columns
    begin where their header does; "SUMMARY / QUESTION" counts as one header)."""
    starts = [m.start() for m in re.finditer(r"(?<!\S)(?:SUMMARY / QUESTION|\S+)", header)]
    names = [header[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
    out: dict[str, list[str]] = {name: [] for name in names}
    for line in lines:
        for name, s, e in zip(names, starts, [*starts[1:], None], strict=True):
            out[name].append(line[s:e].strip())
    return out
