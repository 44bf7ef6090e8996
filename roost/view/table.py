"""`roost view`'s table contents (pure): the rows grouped as `roost ls` groups them, then
fitted to the screen's width as `roost ls` fits them (roost.display.fit)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from roost.display.views import HEADERS, STATE_STYLE, job_cells, job_groups, state_text

Row = dict[str, Any]
COLUMNS = ("id", "name", "state", "status", "cost", "tree", "summary", "meta")
GROUP_PREFIX = "@group:"
HEADING = COLUMNS.index("summary")
"""The column a group's heading is shown in."""
OPTIONAL = ("STATUS", "COST", "TREE", "META")
"""Columns that take no room at all when no row has anything in them."""


# -- the table's contents (pure) -----------------------------------------------------------
def table_rows(rows: list[Row], group: str = "dir") -> list[tuple[str, tuple[Text, ...]]]:
    """(key, cells) for the table: a heading row per group (key `@group:...`), then its jobs
    (key = job id). `group` is `dir` (tree under parents) or `state`."""
    names = {row["session"]: row["name"] for row in rows if row.get("session")}
    out: list[tuple[str, tuple[Text, ...]]] = []
    for heading, members in job_groups(rows, group):
        style = STATE_STYLE.get(heading, "bold blue") if group == "state" else "bold blue"
        shown = state_text(heading) if group == "state" else heading
        title = Text(f"{shown} ({len(members)})", style=style)
        # The heading in the widest column (SUMMARY), where a folder's name has room.
        cells = [Text("") for _ in COLUMNS]
        cells[HEADING] = title
        out.append((GROUP_PREFIX + heading, tuple(cells)))
        out.extend((row["id"], job_cells(row, names, group)) for row in members)
    return out


QUESTION_LINES = 3  # a waiting job's row shows this many lines of its question
# The states that wait for a person: their SUMMARY / QUESTION (a question, or why a run
# failed) wraps; any other job's is one line.
WRAPPED_STATES = ("needs_input", "failed")
Column = tuple[str, str, int]  # key, header, width


def fitted_rows(
    entries: list[tuple[str, tuple[Text, ...]]], width: int
) -> tuple[list[Column], list[tuple[str, tuple[Text, ...], int]]]:
    """`table_rows`' rows fitted to a table `width` cells wide (roost.display.fit, as `roost ls`):
    the columns shown (key, header, width) and each row's (key, cells, height). A waiting or
    failed job's SUMMARY / QUESTION wraps over up to QUESTION_LINES lines; any other long
    cell ends in `…`; a group's heading (in the SUMMARY column) keeps the folder's last two
    parts when it must be cut. A column no job fills (STATUS, COST, TREE, META) is hidden."""
    from roost.display import fit

    natural = {header: len(header) for header in HEADERS}
    filled = set()
    for key, cells in entries:
        for header, cell in zip(HEADERS, cells, strict=True):
            natural[header] = max(natural[header], cell.cell_len)
            if cell.plain.strip(" —") and not key.startswith(GROUP_PREFIX):
                filled.add(header)
    for header in OPTIONAL:  # an empty STATUS (or TREE, META, COST) takes no room
        if header not in filled:
            natural[header] = 0
    # The other columns give way until a group's heading is whole on a wide screen (120
    # columns), or shows its folder's last two parts on a narrower one.
    headings = [
        _heading_room(cells[HEADING].plain, width) for key, cells in entries if key.startswith(GROUP_PREFIX)
    ]
    widths = fit.fit(natural, width, min_flex=max([fit.MIN_FLEX, *headings]))
    shown = [i for i, header in enumerate(HEADERS) if widths[header]]
    columns = [(COLUMNS[i], HEADERS[i], widths[HEADERS[i]]) for i in shown]
    out = []
    for key, cells in entries:
        fitted, height = [], 1
        for i in shown:
            cell, cell_width = cells[i].copy(), widths[HEADERS[i]]
            if HEADERS[i] == fit.FLEX and cells[2].plain in WRAPPED_STATES:
                cell, height = _wrapped(cell, cell_width)
            elif key.startswith(GROUP_PREFIX) and cell.cell_len > cell_width:
                cell = _heading(cell, cell_width)
            else:
                cell.truncate(cell_width, overflow="ellipsis")
            fitted.append(cell)
        out.append((key, tuple(fitted), height))
    return columns, out


WHOLE_HEADINGS = 110
"""From this table width on, a group's heading is whole (roost view at 120 columns)."""


def _heading_room(text: str, width: int) -> int:
    """The cells a heading `FOLDER (N)` asks for: all of them on a wide table, else its
    folder's last two parts and the count."""
    if width >= WHOLE_HEADINGS:
        return len(text)
    folder, _, count = text.rpartition(" (")
    parts = [p for p in folder.split("/") if p]
    return min(len(text), len("…/" + "/".join(parts[-2:])) + len(count) + 2)


def _heading(cell: Text, width: int) -> Text:
    """A group's heading `FOLDER (N)` in `width` cells: the folder's last two parts
    (roost.job.tree.short_folder), the count kept."""
    from roost.job.tree import short_folder

    folder, _, count = cell.plain.rpartition(" (")
    count = " (" + count
    return Text(short_folder(folder, max(1, width - len(count))) + count, style=cell.style)


def _wrapped(cell: Text, width: int) -> tuple[Text, int]:
    """The cell wrapped to `width`, at most QUESTION_LINES lines (the last one ending in `…`
    when cut), and its height."""
    from rich.console import Console

    lines = list(cell.wrap(Console(width=width), width, overflow="fold"))
    if len(lines) > QUESTION_LINES:
        lines = lines[:QUESTION_LINES]
        last = lines[-1]
        last.truncate(width - 1)
        last.append("…")
    return Text("\n").join(lines), len(lines)
