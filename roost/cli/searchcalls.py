"""What `roost search` does once parsed, without click: shared by its click command
(roost.cli.commands.search) and the entry's quick path for `roost search QUERY [--json]`
(roost.cli.entry). Its lines: when, job, kind, the snippet with the match bold on a
terminal and between [ and ] in a pipe, every foreign part through the output layer."""

from __future__ import annotations

from roost.cli.common import daemon, print_json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from typing import Any


def _flat(piece: str) -> str:
    """Whitespace runs as one space (without `re`: ~4 ms of a quick command's start)."""
    words = piece.split()
    if not words:
        return " " if piece else ""
    return (" " if piece[0].isspace() else "") + " ".join(words) + (" " if piece[-1].isspace() else "")


def segments(row: dict[str, Any]) -> list[tuple[str, bool]]:
    """A row's snippet as (text, marked) pieces, each piece's whitespace made one space."""
    text, at = row["snippet"], 0
    pieces: list[tuple[str, bool]] = []
    for start, end in row.get("marks") or []:
        pieces += [(text[at:start], False), (text[start:end], True)]
        at = end
    pieces.append((text[at:], False))
    return [(_flat(piece), marked) for piece, marked in pieces if piece]


def line_of(row: dict[str, Any], bold: bool) -> str:
    """One result as one line: when, job, kind, snippet."""
    from roost.display.output import field

    gone = " (removed)" if row.get("removed") else ""
    head = (
        f"{row['when'].replace('T', ' ').rstrip('Z')}  {field(row['name'])} "
        f"({row['job']}){gone}  {row['kind']}: "
    )
    body = []
    for piece, marked in segments(row):
        shown = field(piece)
        body.append((f"\x1b[1m{shown}\x1b[22m" if bold else f"[{shown}]") if marked else shown)
    return head + "".join(body).strip()


def search(args: dict[str, Any], as_json: bool) -> None:
    """roostd's `search` with `args`; the rows printed (no match: "no matches" on stderr)."""
    with daemon() as client:
        rows = client.request("search", **args)["results"]
    if as_json:
        print_json(rows)
        return
    from roost.cli.common import echo
    from roost.display.output import echo_styled, terminal

    bold = terminal().isatty()
    if not rows:
        echo("no matches", err=True)
    for row in rows:
        echo_styled(line_of(row, bold))
