"""`roost show`: one job in detail. Every field of its row that holds something, one a
line; its worker, result, agent, worktree, sandbox and environment said in words (never an
environment variable's value); a long task cut to its start (`short_task`, `--full`: whole)."""

from __future__ import annotations

from roost.display import output
from roost.display.views import console, display_row
from roost.text.rows import state_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (as roost.display.views)

if TYPE_CHECKING:
    from typing import Any


def print_detail(row: dict[str, Any]) -> None:
    import shlex  # here: `roost ls` imports this module

    out = console()
    row = display_row(row)
    fields = [
        ("id", row["id"]),
        ("name", row["name"]),
        ("kind", row["kind"]),
        ("state", state_text(row["state"])),
        ("status", row.get("status")),
        ("summary", row.get("summary")),
        ("question", row.get("question")),
        ("error", row.get("error")),
        ("result", _result_line(row)),
        ("cwd", row["cwd"]),
        ("task", row.get("task")),
        ("command", shlex.join(row["command"]) if row.get("command") else None),
        ("agent", _agent_line(row)),
        ("worktree", _worktree_line(row)),
        ("sandbox", _sandbox_line(row)),
        ("model", row.get("model")),
        ("session", row.get("session")),
        ("parent", row.get("parent")),
        ("parentSession", row.get("parentSession")),
        ("pending", f"{row['pending']['replies']} replies, {row['pending']['agent']} agent items"),
        ("worker", _worker_line(row["worker"])),
        ("dir", row.get("dir")),
        ("created", row["created"]),
        ("updated", row["updated"]),
        ("environment", _environment_line(row)),
    ]
    for key, value in fields:
        if value not in (None, ""):
            out.print(f"[bold]{key:>13}[/bold]  {output.markup(value)}")
    from roost.usage import show

    for key, value in show.usage_lines(row):
        out.print(f"[bold]{key:>13}[/bold]  {output.markup(value)}")


def _worker_line(worker: dict[str, Any]) -> str:
    """Its worker process: a job without one (a shell job that ended, an idle pi job whose
    worker was let go) says so, never `pid None`."""
    crashes = f"{worker['crashes']} recent crashes"
    if worker.get("pid") is None:
        notes = [worker["state"]] if worker.get("state") not in (None, "stopped") else []
        notes += [crashes] if worker.get("crashes") else []
        return "no worker" + (f" ({', '.join(notes)})" if notes else "")
    return f"pid {worker['pid']} ({worker['state']}, {crashes})"


def _result_line(row: dict[str, Any]) -> str | None:
    """The structured result, compact and cut (`roost result ID` prints it whole)."""
    if row.get("result") is None:
        return None
    import json

    text = json.dumps(row["result"], ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= 200 else f"{text[:200]}… (roost result {row['id']})"


TASK_SHOWN = 400
"""`roost show` prints this many characters of a longer task (`--full`: all of it)."""


def short_task(task: str | None, job_id: str) -> str | None:
    """A long task cut to its start, with its size and how to see it whole."""
    if task is None or len(task) <= TASK_SHOWN:
        return task
    return f"{task[:TASK_SHOWN]}… ({len(task):,} characters; roost show {job_id} --full shows all of it)"


def _sandbox_line(row: dict[str, Any]) -> str | None:
    box = row.get("sandbox")
    if not box:
        return None
    writable = ", ".join(box.get("writable") or [])
    return f"bubblewrap, network {box.get('network', 'none')}" + (
        f", writable also {writable}" if writable else ""
    )


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
    return (
        f"{len(environment['names'])} variables from {environment['source']} at "
        f"{environment['saved']} ({environment['path']})"
    )


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
