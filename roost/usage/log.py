"""The durable usage log: `$ROOST_HOME/usage.jsonl`, one line per removed job's part.

`roost rm` deletes a job's directory (and the session file roost made for it), so before
that roostd appends the job's usage per (day, model) here, which `roost usage` adds to the
live jobs' figures. A live job is never in the log and a removed one only there, so nothing
is counted twice. Lines are appended with one `write(2)` each (O_APPEND) and fsynced; a
torn or unreadable line is skipped when reading, never fatal.

A line: `{"job", "name", "rootSession", "session", "day", "model", "input", "output",
"cacheRead", "cacheWrite", "cost" (null without prices), "requests", "removed"}`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from roost.host import paths
from roost.host.fsutil import utc_now
from roost.usage.account import Usage, breakdown

log = logging.getLogger(__name__)


def log_path() -> Path:
    return paths.roost_home() / "usage.jsonl"


def lines_for(job: dict[str, Any], entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The log lines of one job (`job`: id, name, session, rootSession) from its entries."""
    removed = utc_now()
    out = []
    for (day, model), usage in sorted(breakdown(entries).items()):
        out.append(
            {
                "job": job.get("id"),
                "name": job.get("name"),
                "session": job.get("session"),
                "rootSession": job.get("rootSession"),
                "day": day,
                "model": model,
                **usage.to_json(),
                "removed": removed,
            }
        )
    return out


def append(lines: list[dict[str, Any]], path: Path | None = None) -> None:
    if not lines:
        return
    path = path or log_path()
    data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: Path | None = None) -> Iterator[dict[str, Any]]:
    path = path or log_path()
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = json.loads(raw)
            except (ValueError, RecursionError):
                log.warning("%s:%d: skipping an unreadable line", path, number)
                continue
            if isinstance(line, dict) and isinstance(line.get("job"), str):
                yield line


def removed_tree_costs(path: Path | None = None) -> dict[str, Usage]:
    """Usage of removed jobs per tree (root session), for the trees' totals and budgets."""
    trees: dict[str, Usage] = {}
    for line in read(path):
        root = line.get("rootSession") or line.get("session")
        if isinstance(root, str):
            trees.setdefault(root, Usage()).add_usage(Usage.from_json(line))
    return trees
