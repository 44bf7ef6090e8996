"""What the pages compute from roostd's rows and forms: the job tree's order, money,
a device's name, and a form turned into a `run` or `budget` request (a bad value is one
ValueError line, shown as the page's notice)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from roost.events.log import matches, read_events
from roost.host import paths
from roost.job.tree import group_folder
from roost.text.rows import state_text as state_text  # a state as a person reads it

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


STATE_FILTERS = {
    "waiting": ("needs_input",),
    "active": ("starting", "running", "queued", "waiting"),
    "failed": ("failed",),
    "done": ("done", "reaped"),
    "stopped": ("stopped",),
}
"""The job list's state filter (`/?state=`): a word for a person and the states it means."""


def _matches(row: dict[str, Any], state: str, text: str) -> bool:
    if state in STATE_FILTERS and row.get("state") not in STATE_FILTERS[state]:
        return False
    if not text:
        return True
    fields = (
        row.get("name"),
        row.get("id"),
        row.get("cwd"),
        row.get("summary"),
        row.get("question"),
        row.get("error"),
        group_folder(row),
        (row.get("worktree") or {}).get("branch"),
    )
    return text.lower() in " ".join(str(f) for f in fields if f).lower()


def _waits(subtree: list[tuple[int, dict[str, Any]]]) -> bool:
    return any(row.get("state") == "needs_input" for _, row in subtree)


def job_list(rows: dict[str, dict[str, Any]], state: str = "", text: str = "") -> list[dict[str, Any]]:
    """The web's job list: groups by folder (`roost.job.tree.group_folder`, as roost view),
    each `{folder, label, rows: [(depth, row)], waiting}`; a group with a waiting job comes
    first, and within a group a tree with one; children under their parent. A filter keeps
    the rows that match (and no empty group)."""
    groups: dict[str, list[list[tuple[int, dict[str, Any]]]]] = {}
    last = ""
    for depth, row in tree(rows):
        if depth and last:  # a child, in its own worktree or not, stays under its parent
            groups[last][-1].append((depth, row))
            continue
        last = group_folder(row)
        groups.setdefault(last, []).append([(0, row)])
    out = []
    for folder, trees in groups.items():
        trees.sort(key=lambda t: not _waits(t))  # stable: waiting trees first, else by creation
        shown = [(d, r) for t in trees for d, r in t if _matches(r, state, text.strip())]
        if shown:
            home = os.path.expanduser("~")
            label = "~" + folder[len(home) :] if folder == home or folder.startswith(home + "/") else folder
            out.append({"folder": folder, "label": label, "rows": shown, "waiting": _waits(shown)})
    out.sort(key=lambda g: not g["waiting"])
    return out


def badges(row: dict[str, Any]) -> list[tuple[str, str]]:
    """A row's badges, `(word, title)`: worktree, schedule, result, budget."""
    out = []
    if row.get("worktree"):
        out.append(("worktree", f"branch {row['worktree'].get('branch')}"))
    if row.get("schedule"):
        out.append(("schedule", f"started by schedule {row['schedule'].get('name')}"))
    if row.get("result") is not None:
        out.append(("result", "it has a structured result (roost result)"))
    usage = row.get("usage") or {}
    if usage.get("budget") or usage.get("budgetTokens") or usage.get("maxTurns"):
        limit = (
            money(usage["budget"])
            if usage.get("budget")
            else (
                f"{usage['budgetTokens']} tokens"
                if usage.get("budgetTokens")
                else f"{usage['maxTurns']} turns"
            )
        )
        out.append(("budget", f"budget {limit}"))
    return out


def known_dirs(rows: dict[str, dict[str, Any]]) -> list[str]:
    """The folders jobs were started in, the last used first (the new-job form's choices)."""
    ordered = sorted(rows.values(), key=lambda r: str(r.get("created") or ""), reverse=True)
    out: list[str] = []
    for row in ordered:
        folder = group_folder(row)
        if folder and folder not in out:
            out.append(folder)
    return out


def plain(value: Any) -> str:
    """An event's value as a person reads it: `yes`/`no`, JSON for a list or an object,
    never Python's repr (`dialog=False`)."""
    import json

    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return str(value)


def device_name(user_agent: str) -> str:
    """A short name for a paired browser, from its User-Agent (printable ASCII only)."""
    ua = "".join(c for c in user_agent if 32 <= ord(c) < 127)
    for marker, name in (
        ("iPhone", "iPhone"),
        ("Android", "Android"),
        ("iPad", "iPad"),
        ("Macintosh", "Mac"),
        ("Windows", "Windows"),
        ("Linux", "Linux"),
    ):
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
    cwd = form.get("cwd", "").strip() or form.get("pick", "").strip()  # typed, else picked
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
    args = {
        "budget": _number(form, "budget"),
        "budgetTokens": _number(form, "budgetTokens", True),
        "maxTurns": _number(form, "maxTurns", True),
    }
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


def merge_state(row: dict[str, Any]) -> str:
    """Whether a worktree job's branch can be merged: `merged` (its commits are all in the
    branch its starting checkout is on), `empty` (it committed nothing), `open`, or `""` when
    git cannot say (the merge button stays: roostd's merge says why)."""
    from roost.worktrees import git

    worktree = row.get("worktree") or {}
    path, branch, origin = worktree.get("path"), worktree.get("branch"), worktree.get("origin")
    if not (path and branch and origin and os.path.isdir(path) and os.path.isdir(origin)):
        return ""
    try:
        into = git.current_branch(origin)
        if not git.branch_exists(path, branch):
            return ""
        ahead = int(
            git.git(
                ["rev-list", "--count", f"{worktree['base']}..refs/heads/{branch}", "--"],
                path,
                doing="counting the branch's commits",
            ).stdout.strip()
            or 0
        )
        if ahead == 0:
            return "empty"
        if into and git.unmerged_count(path, branch, into) == 0:
            return "merged"
    except git.GitError:
        return ""
    return "open"


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
