"""The job table of `roost ls` drawn without rich: the command run most often, and rich's
table, console and text modules are ~45 ms of its start (README: Start-up). It draws what
rich's borderless table drew: columns two cells apart, COST and TREE right-aligned, a cut
cell ending in `…`, the fitted table's FLEX column (roost.display.fit) wrapped by words, styles
as SGR codes in a terminal only (not with NO_COLOR). `roost view` and every other table
keep rich.
"""

from __future__ import annotations

import os
import unicodedata

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import TextIO

Cell = tuple[str, str]
"""A cell: its text (made printable by the caller) and its style name ("" for none)."""

SGR = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}
GAP = "  "


def char_cells(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def cell_len(text: str) -> int:
    """The terminal cells `text` takes (wide characters two, combining marks none)."""
    if text.isascii():
        return len(text)
    return sum(char_cells(char) for char in text)


def cut(text: str, width: int) -> str:
    """`text` in at most `width` cells; a cut one ends in `…`."""
    if cell_len(text) <= width:
        return text
    out, used = [], 0
    for char in text:
        size = char_cells(char)
        if used + size > width - 1:
            break
        out.append(char)
        used += size
    return "".join(out) + "…"


def _fold(word: str, width: int) -> Iterator[str]:
    """A word longer than `width` cells, in pieces of at most `width` cells."""
    piece: list[str] = []
    used = 0
    for char in word:
        size = char_cells(char)
        if piece and used + size > width:
            yield "".join(piece)
            piece, used = [], 0
        piece.append(char)
        used += size
    if piece:
        yield "".join(piece)


def wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` cells, broken between words (a longer word folds)."""
    lines: list[str] = []
    line, used = "", 0
    for word in text.split():
        size = cell_len(word)
        if line and used + 1 + size <= width:
            line, used = f"{line} {word}", used + 1 + size
            continue
        if line:
            lines.append(line)
        line, used = "", 0
        for piece in _fold(word, width) if size > width else (word,):
            if line:
                lines.append(line)
            line, used = piece, cell_len(piece)
    if line or not lines:
        lines.append(line)
    return lines


def styled(text: str, style: str, colour: bool) -> str:
    codes = [SGR[word] for word in style.split() if word in SGR] if colour else []
    return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes and text else text


def terminal_width(stream: TextIO) -> int:
    """COLUMNS when set (as rich and shutil read it), else the terminal's, else 80."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        return 80


def colour_wanted(stream_is_terminal: bool) -> bool:
    return stream_is_terminal and not os.environ.get("NO_COLOR")


def table_lines(
    heads: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    widths: Sequence[int],
    right: Sequence[bool],
    wrapping: int | None,
    colour: bool,
) -> Iterator[str]:
    """The table's lines: a bold header row, then each row; column `wrapping` (an index, or
    None) wraps by words, the others are cut to their width. Trailing spaces are dropped."""

    def line(cells: Sequence[Cell]) -> str:
        parts = []
        for (text, style), width, at_right in zip(cells, widths, right, strict=True):
            pad = " " * max(0, width - cell_len(text))
            parts.append(pad + styled(text, style, colour) if at_right else styled(text, style, colour) + pad)
        return GAP.join(parts).rstrip(" ")

    yield line([(head, "bold") for head in heads])
    for cells in rows:
        columns = []
        for i, ((text, style), width) in enumerate(zip(cells, widths, strict=True)):
            pieces = wrap(text, width) if i == wrapping else [cut(text, width)]
            columns.append([(piece, style) for piece in pieces])
        for n in range(max(len(column) for column in columns)):
            yield line([column[n] if n < len(column) else ("", "") for column in columns])
