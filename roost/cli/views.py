"""Terminal views of jobs: the table (grouped by directory or state, as a tree), details,
transcripts and mailboxes. Pure functions of JobRows plus files; no daemon calls here.

Every `roost` process imports this module (`roost ls --tree --json` needs `tree_order`), so
rich, the mailbox package, the transcript reader and watchdog (together 50-80 ms of
imports) are imported by the functions that draw or read with them, not at the top
(benchmarks/cli_bench.py).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

HEADERS = ("ID", "NAME", "STATE", "STATUS", "COST", "TREE", "SUMMARY / QUESTION", "META")
"""The job table's columns (TREE, the tree's total on a root's row: `ls --tree` and the view)."""
STATE_ORDER = ("needs_input", "running", "starting", "failed", "done", "reaped", "stopped")
"""Grouped by state, the most urgent first."""
STATE_STYLE = {
    "running": "bold green",
    "starting": "cyan",
    "done": "dim",
    "needs_input": "bold yellow",
    "failed": "bold red",
    "stopped": "magenta",
    "reaped": "dim",
}


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
_CONTROL[0x0A] = "\\n"
_CONTROL[0x09] = "\\t"
DISPLAY_KEYS = ("name", "status", "summary", "question", "cwd", "error", "task", "state",
                "model")


def printable(text: Any) -> str:
    """`text` with every control character (ESC, CSI, BEL, newline, ...) shown as an escape:
    names, summaries and questions come from agents and models, and must not drive the
    terminal of whoever lists them. Rich would pass ESC through as it is."""
    return str(text).translate(_CONTROL)


def display_row(row: dict[str, Any]) -> dict[str, Any]:
    """A JobRow for a terminal: its free-text fields through `printable`."""
    out = dict(row)
    for key in DISPLAY_KEYS:
        if isinstance(out.get(key), str):
            out[key] = printable(out[key])
    if isinstance(out.get("command"), list):
        out["command"] = [printable(part) for part in out["command"]]
    return out


def console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def _children(rows: list[dict[str, Any]]) -> dict[str | None, list[dict[str, Any]]]:
    sessions = {row["session"] for row in rows if row.get("session")}
    by_parent: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        parent = row.get("parentSession")
        key = parent if parent in sessions else None
        by_parent.setdefault(key, []).append(row)
    return by_parent


def tree_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows ordered parent first, each child right under its parent, with `depth`."""
    by_parent = _children(rows)
    out: list[dict[str, Any]] = []
    seen: set[int] = set()  # each row once, even when parent links form a cycle

    def walk(members: list[dict[str, Any]], depth: int) -> None:
        for row in members:
            if id(row) in seen:
                continue
            seen.add(id(row))
            out.append({**row, "depth": depth})
            if row.get("session"):
                walk(by_parent.get(row["session"], []), depth + 1)

    walk(by_parent.get(None, []), 0)
    walk([row for row in rows if id(row) not in seen], 0)  # unreachable (a cycle): top level
    return out


def clip(text: str, limit: int | None) -> str:
    """One line of at most `limit` characters (an ellipsis marks a cut); no limit: as is."""
    if limit is None:
        return text
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def home_relative(directory: str) -> str:
    home = str(Path.home())
    if directory == home or directory.startswith(home + os.sep):
        return "~" + directory[len(home):]
    return directory


def job_groups(rows: list[dict[str, Any]], group: str = "dir"
               ) -> list[tuple[str, list[dict[str, Any]]]]:
    """The job table's groups, in order: by directory (children under their parent, rows
    with `depth`), or by state (most urgent first, oldest first within)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    if group == "state":
        rank = {state: i for i, state in enumerate(STATE_ORDER)}
        ordered = sorted(rows, key=lambda r: (rank.get(r["state"], len(rank)), r["state"],
                                              r.get("created") or ""))
        for row in ordered:
            groups.setdefault(row["state"], []).append(row)
    else:
        last: str | None = None
        for row in tree_order(rows):
            if row.get("worktree") and row.get("parentSession") and last:
                groups[last].append(row)  # a child in its own worktree stays under its parent
                continue
            last = home_relative(row["cwd"])
            groups.setdefault(last, []).append(row)
    return list(groups.items())


def meta_text(row: dict[str, Any], names: dict[str, str], group: str) -> str:
    """The META cell: the parent's name (grouped by state), the worktree's branch, the
    agent, pending items."""
    parts = []
    if group == "state" and row.get("parentSession") in names:
        parts.append(f"↳ {names[row['parentSession']]}")
    if row.get("worktree"):
        parts.append(f"⎇ {row['worktree']['branch']}")
    if row.get("agent"):
        parts.append(f"@{row['agent']}")
    pending = row.get("pending") or {}
    count = int(pending.get("replies") or 0) + int(pending.get("agent") or 0)
    if count:
        parts.append(f"✉{count}")
    return " ".join(parts)


def headers(tree: bool) -> tuple[str, ...]:
    return HEADERS if tree else tuple(h for h in HEADERS if h != "TREE")


def job_cells(row: dict[str, Any], names: dict[str, str], group: str, tree: bool = True,
              summary_max: int | None = None, status_max: int | None = None) -> tuple[Text, ...]:
    """One job's cells, in `headers(tree)` order, for `roost ls` and `roost view` alike
    (Text, not str: a str cell is rich markup, and "[" in a name is not markup)."""
    from rich.text import Text

    name = row["name"]
    depth = int(row.get("depth") or 0)
    if group == "dir" and depth:
        name = "  " * (depth - 1) + "↳ " + name
    if row.get("question"):
        summary = Text("? " + clip(row["question"], summary_max), style="yellow")
    else:
        summary = Text(clip(row.get("summary") or "", summary_max))
    from roost.usage import show

    costs = (Text(show.cost_cell(row)), Text(show.tree_cell(row))) if tree else (
        Text(show.cost_cell(row)),)
    return (
        Text(row["id"], style="dim"),
        Text(name),
        Text(row["state"], style=STATE_STYLE.get(row["state"], "")),
        Text(clip(row.get("status") or "", status_max)),
        *costs,
        summary,
        Text(meta_text(row, names, group)),
    )


def print_table(rows: list[dict[str, Any]], group: str = "dir", tree: bool = False) -> None:
    """`roost ls`: the job table (`tree` is kept for the CLI; parents always come first)."""
    from rich.table import Table
    from rich.text import Text

    out = console()
    if not rows:
        out.print("no jobs (start one with: roost run TASK)")
        return
    rows = [display_row(row) for row in rows]
    names = {row["session"]: row["name"] for row in rows if row.get("session")}
    groups = job_groups(rows, group)
    name_width = min(24, max(len(r["name"]) + 2 * int(r.get("depth") or 0) + 2
                             for _, members in groups for r in members))
    for heading, members in groups:
        out.print(Text(heading, style="bold blue"))
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        for header, options in zip(headers(tree), _column_options(name_width, tree), strict=True):
            table.add_column(header, **options)
        for row in members:
            table.add_row(*job_cells(row, names, group, tree=tree))
        out.print(table)


def _column_options(name_width: int, tree: bool) -> tuple[dict[str, Any], ...]:
    """rich column options, in `headers(tree)` order."""
    cost: tuple[dict[str, Any], ...] = ({"max_width": 9, "no_wrap": True, "justify": "right"},)
    if tree:
        cost += ({"max_width": 13, "no_wrap": True, "justify": "right"},)
    return (
        {"width": 8, "no_wrap": True},
        {"width": name_width, "no_wrap": True, "overflow": "ellipsis"},
        {"width": 11, "no_wrap": True},
        {"max_width": 18, "no_wrap": True, "overflow": "ellipsis"},
        *cost,
        {"ratio": 1, "overflow": "fold"},
        {"max_width": 16, "no_wrap": True},
    )


def print_detail(row: dict[str, Any]) -> None:
    from rich.markup import escape

    out = console()
    row = display_row(row)
    fields = [
        ("id", row["id"]), ("name", row["name"]), ("kind", row["kind"]),
        ("state", row["state"]), ("status", row.get("status")), ("summary", row.get("summary")),
        ("question", row.get("question")), ("error", row.get("error")),
        ("cwd", row["cwd"]), ("task", row.get("task")),
        ("command", " ".join(row["command"]) if row.get("command") else None),
        ("agent", _agent_line(row)),
        ("worktree", _worktree_line(row)),
        ("model", row.get("model")), ("session", row.get("session")),
        ("parent", row.get("parent")), ("parentSession", row.get("parentSession")),
        ("pending", f"{row['pending']['replies']} replies, {row['pending']['agent']} agent items"),
        ("worker", f"pid {row['worker']['pid']} ({row['worker']['state']}, "
                   f"{row['worker']['crashes']} recent crashes)"),
        ("dir", row.get("dir")), ("created", row["created"]), ("updated", row["updated"]),
        ("environment", _environment_line(row)),
    ]
    for key, value in fields:
        if value not in (None, ""):
            out.print(f"[bold]{key:>13}[/bold]  {escape(printable(value))}")
    from roost.usage import show

    for key, value in show.usage_lines(row):
        out.print(f"[bold]{key:>13}[/bold]  {escape(printable(value))}")


def _worktree_line(row: dict[str, Any]) -> str | None:
    worktree = row.get("worktree")
    if not worktree:
        return None
    return f"{worktree['path']} on {worktree['branch']} (base {str(worktree['base'])[:12]})"


def _environment_line(row: dict[str, Any]) -> str | None:
    """How many variables the job keeps, from what, where: never a value (secrets)."""
    environment = row.get("environment")
    if not environment:
        return "roostd's (none kept for the job)" if "environment" in row else None
    return (f"{len(environment['names'])} variables from {environment['source']} at "
            f"{environment['saved']} ({environment['path']})")


def _agent_line(row: dict[str, Any]) -> str | None:
    definition = row.get("agentDefinition") or {}
    if not row.get("agent") and not definition:
        return None
    text = row.get("agent") or "(tools inherited from the parent)"
    if definition.get("source"):
        text += f" ({definition['source']})"
    if definition.get("tools") is not None:
        text += f", tools: {', '.join(definition['tools'])}"
    return text


def print_logs(row: dict[str, Any], follow: bool = False, verbose: bool = False) -> None:
    from roost.transcript import read_entries, render

    if row["kind"] == "shell":
        _print_file(Path(row["dir"]) / "output.log", follow)
        return
    session = row.get("session")
    if not session:
        return
    seen = 0
    while True:
        entries = read_entries(session)
        for line in render(entries[seen:], verbose=verbose):
            print(line, flush=True)
        seen = len(entries)
        if not follow:
            return
        _wait_for_growth(Path(session))


def _wait_for_growth(path: Path, timeout: float = 5.0) -> None:
    """Block until the file changes (watchdog), or `timeout` passes."""
    import threading

    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    changed = threading.Event()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: Any) -> None:
            if str(event.src_path) == str(path) or str(getattr(event, "dest_path", "")) == str(path):
                changed.set()

    path.parent.mkdir(parents=True, exist_ok=True)
    observer = Observer()
    observer.schedule(Handler(), str(path.parent))
    observer.start()
    try:
        changed.wait(timeout)
    finally:
        observer.stop()
        observer.join()


def _print_file(path: Path, follow: bool) -> None:
    position = 0
    while True:
        try:
            with open(path, "rb") as handle:
                handle.seek(position)
                data = handle.read()
                position += len(data)
                os.write(1, data)
        except FileNotFoundError:
            pass
        if not follow:
            return
        _wait_for_growth(path)
        time.sleep(0)


def print_mailbox(row: dict[str, Any], as_json: bool, show_all: bool, show_path: bool) -> None:
    path = Path(row["mailbox"])
    if show_path:
        print(path)
        return
    from roost.mailbox import Mailbox

    box = Mailbox(path)
    items = [("pending", item) for item in box.pending()]
    if show_all:
        items = [("acked", item) for item in box.acked()] + items
    if as_json:
        print(json.dumps([{"state": state, **item.to_dict()} for state, item in items],
                         indent=2, ensure_ascii=False))
        return
    from rich.table import Table
    from rich.text import Text

    out = console()
    if not items:
        out.print("mailbox empty" if show_all else "no pending items")
        return
    table = Table(box=None, header_style="bold")
    for column in ("STATE", "SEQ", "KIND", "FROM", "CREATED", "TEXT"):
        table.add_column(column)
    for state, item in items:
        sender = item.sender or {}
        who = "user"
        if sender:
            who = printable(
                f"{sender.get('name') or sender.get('id')} ({sender.get('relation', '?')})")
        text = printable(" ".join(item.text.split()))
        table.add_row(state, str(item.seq), item.kind, Text(who), item.created,
                      Text(text[:60] + ("…" if len(text) > 60 else "")))
    out.print(table)
