"""Terminal views of jobs: the table (grouped by directory or state, as a tree), details,
transcripts and mailboxes. Pure functions of JobRows plus files; no daemon calls here.

Every `roost ls` imports this module, so rich, the mailbox package, the transcript reader
and watchdog (together 50-80 ms of imports) are imported by the functions that draw or
read with them, not at the top (benchmarks/cli_bench.py).
"""

from __future__ import annotations

import os
import sys
import time

from roost.display import output
from roost.job.tree import group_folder, tree_order
from roost.text.rows import state_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (`roost ls` imports this)

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from rich.console import Console
    from rich.text import Text

HEADERS = ("ID", "NAME", "STATE", "STATUS", "COST", "TREE", "SUMMARY / QUESTION", "META")
"""The job table's columns (TREE, the tree's total on a root's row: `ls --tree` and the view)."""
STATE_ORDER = (
    "needs_input",
    "running",
    "starting",
    "queued",
    "waiting",
    "failed",
    "done",
    "reaped",
    "stopped",
)
"""Grouped by state, the most urgent first."""
STATE_STYLE = {
    "running": "bold green",
    "starting": "cyan",
    "queued": "blue",
    "waiting": "blue",
    "done": "dim",
    "needs_input": "bold yellow",
    "failed": "bold red",
    "stopped": "magenta",
    "reaped": "dim",
}


DISPLAY_KEYS = ("name", "status", "summary", "question", "cwd", "error", "task", "state", "model")


printable = output.field
"""Names, summaries and questions come from agents and models, and must not drive the
terminal of whoever lists them (rich would pass ESC through as it is): one line, every
control and bidi character shown as an escape."""


def display_row(row: dict[str, Any]) -> dict[str, Any]:
    """A JobRow for a terminal: its free-text fields through `printable`."""
    out = dict(row)
    for key in DISPLAY_KEYS:
        if isinstance(out.get(key), str):
            out[key] = printable(out[key])
    for key in ("command", "options"):
        if isinstance(out.get(key), list):
            out[key] = [printable(part) for part in out[key]]
    return out


def console() -> Console:
    """The terminal, or in a pipe a console that never wraps or cuts a line (like ls, ps)."""
    from rich.console import Console

    out = Console(file=output.terminal(), highlight=False, soft_wrap=False)
    if not out.is_terminal:
        out.soft_wrap = True
    return out


def clip(text: str, limit: int | None) -> str:
    """One line of at most `limit` characters (an ellipsis marks a cut); no limit: as is."""
    if limit is None:
        return text
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def home_relative(directory: str) -> str:
    home = os.path.expanduser("~")  # Path.home(), without pathlib (`roost ls`)
    if directory == home or directory.startswith(home + os.sep):
        return "~" + directory[len(home) :]
    return directory


def job_groups(rows: list[dict[str, Any]], group: str = "dir") -> list[tuple[str, list[dict[str, Any]]]]:
    """The job table's groups, in order: by directory (children under their parent, rows
    with `depth`), or by state (most urgent first, oldest first within)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    if group == "state":
        rank = {state: i for i, state in enumerate(STATE_ORDER)}
        ordered = sorted(
            rows, key=lambda r: (rank.get(r["state"], len(rank)), r["state"], r.get("created") or "")
        )
        for row in ordered:
            groups.setdefault(row["state"], []).append(row)
    else:
        last: str | None = None
        for row in tree_order(rows):
            if row.get("worktree") and row.get("parentSession") and last:
                groups[last].append(row)  # a child in its own worktree stays under its parent
                continue
            last = home_relative(group_folder(row))
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
    if row.get("schedule"):  # started by a schedule: which, and why (roost schedule ls)
        parts.append(f"⏲ {row['schedule']['name']} ({row['schedule']['cause']})")
    if row.get("result") is not None:
        parts.append("{…}")  # a structured result: roost result ID
    pending = row.get("pending") or {}
    count = int(pending.get("replies") or 0) + int(pending.get("agent") or 0)
    if count:
        parts.append(f"✉{count}")
    return " ".join(parts)


def headers(tree: bool) -> tuple[str, ...]:
    return HEADERS if tree else tuple(h for h in HEADERS if h != "TREE")


def plain_cells(
    row: dict[str, Any],
    names: dict[str, str],
    group: str,
    tree: bool = True,
    summary_max: int | None = None,
    status_max: int | None = None,
) -> tuple[tuple[str, str], ...]:
    """One job's cells as (text, style), in `headers(tree)` order, for `roost ls` and
    `roost view` alike."""
    name = row["name"]
    depth = int(row.get("depth") or 0)
    if group == "dir" and depth:
        name = "  " * (depth - 1) + "↳ " + name
    if row.get("question"):
        summary = ("? " + clip(row["question"], summary_max), "yellow")
    else:
        summary = (clip(row.get("summary") or "", summary_max), "")
    from roost.usage import show

    costs = ((show.cost_cell(row), ""), (show.tree_cell(row), "")) if tree else ((show.cost_cell(row), ""),)
    return (
        (row["id"], "dim"),
        (name, ""),
        (state_text(row["state"]), STATE_STYLE.get(row["state"], "")),
        (clip(row.get("status") or "", status_max), ""),
        *costs,
        summary,
        (printable(meta_text(row, names, group)), ""),  # a branch may hold C1 or bidi
    )


def job_cells(
    row: dict[str, Any],
    names: dict[str, str],
    group: str,
    tree: bool = True,
    summary_max: int | None = None,
    status_max: int | None = None,
) -> tuple[Text, ...]:
    """`plain_cells` as rich Texts, for `roost view` (Text, not str: a str cell is rich
    markup, and "[" in a name is not markup)."""
    from rich.text import Text

    return tuple(
        Text(text, style=style)
        for text, style in plain_cells(row, names, group, tree, summary_max, status_max)
    )


def print_table(
    rows: list[dict[str, Any]], group: str = "dir", tree: bool = False, wide: bool = False
) -> None:
    """`roost ls`: the job table (`tree`: with the TREE column; parents always come first),
    drawn by roost.display.plaintable (not rich: this is the command run most often).

    In a terminal the table fits its width (roost.display.fit), the question wrapping rather than
    cut; in a pipe or with `wide` nothing is cut or wrapped: one row per line, full fields."""
    from roost.display import fit, plaintable

    stream = output.terminal()
    if not rows:
        stream.write("no jobs (start one with: roost run TASK)\n")
        return
    is_terminal = stream.isatty()
    colour = plaintable.colour_wanted(is_terminal)
    rows = [display_row(row) for row in rows]
    names = {row["session"]: row["name"] for row in rows if row.get("session")}
    groups = job_groups(rows, group)
    heads = headers(tree)
    cells = {row["id"]: plain_cells(row, names, group, tree=tree) for _, members in groups for row in members}
    natural = {
        head: max(len(head), *(plaintable.cell_len(row_cells[i][0]) for row_cells in cells.values()))
        for i, head in enumerate(heads)
    }
    fitted = is_terminal and not wide
    # `--tree` asks for the costs: TREE and COST stay whole.
    width = plaintable.terminal_width(stream) if fitted else None
    widths = fit.fit(natural, width, keep=("TREE", "COST") if tree else ())
    shown = [i for i, head in enumerate(heads) if widths[head]]
    shown_heads = [heads[i] for i in shown]
    wrapping = shown_heads.index(fit.FLEX) if fitted and fit.FLEX in shown_heads else None
    lines: list[str] = []
    for heading, members in groups:
        lines.append(
            plaintable.styled(state_text(heading) if group == "state" else heading, "bold blue", colour)
        )
        lines.extend(
            plaintable.table_lines(
                shown_heads,
                [[cells[row["id"]][i] for i in shown] for row in members],
                [widths[head] for head in shown_heads],
                [head in ("COST", "TREE") for head in shown_heads],
                wrapping,
                colour,
            )
        )
    dropped, cut = fit.hidden(natural, widths), fit.shortened(natural, widths)
    if width is not None and (dropped or cut):
        what = "; ".join(
            f"{label}: {', '.join(columns)}"
            for label, columns in (("hidden", dropped), ("shortened", cut))
            if columns
        )
        note = f"({what}; roost ls --wide shows everything)"
        lines.extend(plaintable.styled(part, "dim", colour) for part in plaintable.wrap(note, width))
    stream.write("".join(line + "\n" for line in lines))
    stream.flush()


def _print_block(out: Console, renderable: Any) -> None:
    """Print; in a pipe without the spaces that pad a table's last column."""
    if out.is_terminal:
        out.print(renderable)
        return
    with out.capture() as captured:
        out.print(renderable)
    out.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


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


def print_logs(row: dict[str, Any], follow: bool = False, verbose: bool = False, raw: bool = False) -> None:
    """The transcript (a shell job: its output), control characters shown as escapes
    (`raw`: as the model or the command wrote them; the caller checked it writes to a pipe)."""
    import contextlib

    from roost.display import liveline
    from roost.display.answerpaths import owned, session_file
    from roost.pi.transcript import read_entries, render

    if row["kind"] == "shell":
        _print_file(owned(row["dir"], "job directory") / "output.log", follow, raw)
        return
    session = row.get("session")
    if not session:
        return
    path = session_file(row["id"], session)  # a handed-off one may lie outside ROOST_HOME
    session = str(path)
    seen = 0
    live = None
    if liveline.wanted(follow, raw):  # the text being written, on a last line (liveline)
        live = liveline.LiveLine(row["id"])
        live.start()
    try:
        while True:
            entries = read_entries(session)
            with live.paused() if live is not None else contextlib.nullcontext():
                for line in render(entries[seen:], verbose=verbose):
                    if raw:
                        output.write_raw(line.encode("utf-8", "surrogateescape") + b"\n")
                    else:
                        print(output.visible(line), flush=True)
            seen = len(entries)
            if not follow:
                return
            _wait_for_growth(path)
    finally:
        if live is not None:
            live.stop()


def _wait_for_growth(path: Path, timeout: float = 5.0) -> None:
    """Block until the file's content changes (watchdog), or `timeout` passes."""
    from roost.host.contentwatch import wait_for_change

    wait_for_change(path, timeout)


def _print_file(path: Path, follow: bool, raw: bool = False) -> None:
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a character cut by a read
    position = 0
    while True:
        try:
            with open(path, "rb") as handle:
                handle.seek(position)
                data = handle.read()
                position += len(data)
            if raw:
                output.write_raw(data)
            elif data:
                sys.stdout.write(output.visible(decoder.decode(data)))
                sys.stdout.flush()
        except FileNotFoundError:
            pass
        if not follow:
            return
        _wait_for_growth(path)
        time.sleep(0)


def mailbox_items(box: Any, show_all: bool) -> list[tuple[str, Any]]:
    """(state, item) pairs in seq order: pending, and with `show_all` acknowledged too.

    new/ is listed before cur/: an item acknowledged in between (moved by rename) is then
    seen in both, and counted once, as acked; listed the other way round it would be in
    neither."""
    pending = {item.seq: ("pending", item) for item in box.pending()}
    if show_all:
        pending.update((item.seq, ("acked", item)) for item in box.acked())
    return [pending[seq] for seq in sorted(pending)]


def listed(state: str, item: Any) -> dict[str, Any]:
    """One item of `roost mailbox --json`: its state, the item's own keys, and every other
    key it holds under `extra` (a report's `state` is the child's, never this one)."""
    return {
        "state": state,
        "seq": item.seq,
        "kind": item.kind,
        "from": item.sender,
        "text": item.text,
        "created": item.created,
        "extra": dict(item.extra),
    }


def print_mailbox(row: dict[str, Any], as_json: bool, show_all: bool, show_path: bool) -> None:
    from roost.display.answerpaths import owned

    path = owned(row["mailbox"], "mailbox")  # opening a mailbox sweeps and moves files
    if show_path:
        print(path)
        return
    from roost.mailbox import Mailbox

    items = mailbox_items(Mailbox(path), show_all)
    if as_json:
        print(output.json_text([listed(state, item) for state, item in items]))
        return
    from rich.table import Table
    from rich.text import Text

    out = console()
    if not items:
        out.print("mailbox empty" if show_all else "no pending items")
        return
    table = Table(box=None, header_style="bold")
    for header in ("STATE", "SEQ", "KIND", "FROM", "CREATED", "TEXT"):
        table.add_column(header, no_wrap=not out.is_terminal)  # a pipe: one item per line
    for state, item in items:
        sender = item.sender or {}
        who = "user"
        if sender:
            who = printable(f"{sender.get('name') or sender.get('id')} ({sender.get('relation', '?')})")
        text = printable(" ".join(item.text.split()))
        if out.is_terminal:  # in a pipe: the whole text, one item per line
            text = clip(text, 60)
        # Text, not str (a str cell is rich markup): every cell is the file's, made visible.
        table.add_row(
            state, str(item.seq), output.styled(item.kind), Text(who), output.styled(item.created), Text(text)
        )
    if not out.is_terminal:  # never squeezed to a pipe's default 80 columns
        out.width = max(out.width, 200 + 4 * max(len(item.text) for _, item in items))
    _print_block(out, table)


def shown_line(line: str) -> Any:
    """A transcript line as `roost view` shows it: the assistant's text rendered as Markdown
    (rich's: headings, lists, tables, code in colour; a link shows its address, HTML stays
    text), anything else as plain text. `line` is already made inert (`output.visible`)."""
    from rich.console import Group
    from rich.markdown import Markdown
    from rich.text import Text

    stamp, _, rest = line.partition(" ")
    if not (len(stamp) == 8 and stamp[2::3] == "::" and rest.startswith("assistant: ")):
        return Text(line)
    head = Text(f"{stamp} assistant:", style="bold blue")
    return Group(head, Markdown(rest.removeprefix("assistant: "), hyperlinks=False))
