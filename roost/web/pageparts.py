"""What the pages compute from roostd's rows and forms: the job tree's order, money,
a device's name, and a form turned into a `run` or `budget` request (a bad value is one
ValueError line, shown as the page's notice)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from roost import paths
from roost.eventlog import matches, read_events
from roost.rowtext import state_text as state_text  # a state as a person reads it

DIFF_MAX = 400_000
"""The most characters of a diff a page shows (the rest: `roost diff`)."""
EVENTS_SHOWN = 500

STATE_CLASS = {"needs_input": "ask", "failed": "bad", "running": "run", "starting": "run"}


def money(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"
    return "—"


def tree(rows: dict[str, dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Every row with its depth: roots by creation, each followed by its children."""
    ordered = sorted(rows.values(), key=lambda r: str(r.get("created") or ""))
    sessions = {r["session"] for r in ordered if r.get("session")}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for row in ordered:
        parent = row.get("parentSession")
        children.setdefault(parent if parent in sessions else None, []).append(row)
    out: list[tuple[int, dict[str, Any]]] = []
    seen: set[str] = set()

    def walk(parent: str | None, depth: int) -> None:
        for row in children.get(parent, []):
            if row["id"] in seen:  # a session that is its own ancestor: shown once
                continue
            seen.add(row["id"])
            out.append((depth, row))
            if row.get("session"):
                walk(row["session"], depth + 1)

    walk(None, 0)
    out.extend((0, r) for r in ordered if r["id"] not in seen)
    return out


def device_name(user_agent: str) -> str:
    """A short name for a paired browser, from its User-Agent (printable ASCII only)."""
    ua = "".join(c for c in user_agent if 32 <= ord(c) < 127)
    for marker, name in (("iPhone", "iPhone"), ("Android", "Android"), ("iPad", "iPad"),
                         ("Macintosh", "Mac"), ("Windows", "Windows"), ("Linux", "Linux")):
        if marker in ua:
            browser = next((b for b in ("Firefox", "Edg", "Chrome", "Safari") if b in ua), "browser")
            return f"{browser.replace('Edg', 'Edge')} on {name}"
    return ua[:40] or "browser"


def _number(form: dict[str, str], key: str, integer: bool = False) -> float | int | None:
    raw = form.get(key, "").strip().lstrip("$")
    if not raw:
        return None
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise ValueError(f"{key} must be a number, got {raw[:40]!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{key} must be > 0")
    return value


def run_args(form: dict[str, str]) -> dict[str, Any]:
    task = form.get("task", "")
    if not task.strip():
        raise ValueError("the task is empty")
    cwd = form.get("cwd", "").strip()
    if not cwd.startswith("/"):
        raise ValueError("the directory must be an absolute path")
    args: dict[str, Any] = {"task": task, "cwd": cwd}
    for key in ("name", "model", "agent"):
        if form.get(key, "").strip():
            args[key] = form[key].strip()
    if form.get("worktree") == "on":
        args["worktree"] = True
    budget = _number(form, "budget")
    if budget is not None:
        args["budget"] = budget
    return args


def budget_args(form: dict[str, str]) -> dict[str, Any]:
    args = {"budget": _number(form, "budget"), "budgetTokens": _number(form, "budgetTokens", True),
            "maxTurns": _number(form, "maxTurns", True)}
    if all(v is None for v in args.values()):
        raise ValueError("give a budget, a token budget or a number of turns")
    return {k: v for k, v in args.items() if v is not None}


def job_diff(row: dict[str, Any]) -> tuple[str, str]:
    """A worktree job's diff against its base, as `roost diff` shows it; or why there is none."""
    from roost.worktrees import CHECKOUT_MARKER, git

    worktree = row.get("worktree")
    if not worktree:
        return "", "this job has no worktree"
    if not os.path.isdir(worktree["path"]):
        return "", f"its worktree ({worktree['path']}) is gone"
    if (Path(row["dir"]) / CHECKOUT_MARKER).exists():
        return "", "its worktree is still being written (the job is starting)"
    try:
        text = git.diff(worktree["path"], worktree["base"])
    except git.GitError as exc:
        return "", str(exc)
    if len(text) > DIFF_MAX:
        text = text[:DIFF_MAX] + "\n… (cut: `roost diff` shows it all)\n"
    return text, "" if text else "no changes"


def diff_lines(text: str) -> list[tuple[str, str]]:
    """Each line of a diff with its class: add, del, hunk, file or ctx."""
    out = []
    for line in text.splitlines():
        if line.startswith(("+++", "---", "diff --git", "index ")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append((kind, line))
    return out


def recent_events(types: tuple[str, ...], job: str | None) -> list[dict[str, Any]]:
    """The newest EVENTS_SHOWN events of the log that match, newest first."""
    found = [e for e in read_events(paths.roost_home()) if matches(e, types or None, job)]
    return found[-EVENTS_SHOWN:][::-1]
