"""The one output layer of the `roost` CLI: text that a model, an agent, a repository or a
project file wrote never drives the terminal (or the program reading a pipe).

- `visible(text)`: every C0/C1 control but newline and tab, DEL, and the bidi controls that
  reorder a line (U+202A-U+202E, U+2066-U+2069, U+200E/U+200F, U+061C), and the line and
  paragraph separators (U+2028, U+2029) shown as escapes
  (`\\x1b`, `\\x9b`, `\\u202e`): `ESC[1A ESC[2K` reads `\\x1b[1A\\x1b[2K`, an OSC 52 clipboard
  write or an OSC 8 link is shown, not run. `field(text)`, for one-line fields (names,
  summaries, table cells), shows newline and tab as `\\n` and `\\t` too.
- `markup(text)` and `styled(text, style)`: the same for rich, with `[red]` or `[link=...]`
  shown as written, never read as rich markup.
- `guard_streams()`: run by `roost` before any command, it puts `Guarded` over stdout and
  stderr, so every `click.echo` and `print` of every command goes through `visible`: a path
  that forgot to is still safe. rich's console writes its own styles (colours, which are
  roost's) to `terminal()`, the stream under the guard, and is given only text that went
  through `styled`/`markup`.
- `raw_allowed()`: the raw bytes (`roost diff --raw`, `roost logs --raw`) go only to a pipe
  and only on request; on a terminal the request is refused with one line.
- `json_text(data)`, `escaped(document)` (from roost.text.escapes, which roostd shares): JSON
  (and TOML) whose strings hold no control, C1 or bidi character raw (escaped as
  `\\u....`: the same data for a reader).

The textual agent view (`roost view`) writes to the terminal itself; its cells are rich
Text built by `styled` (roost.view.table, roost.view.app).
"""

from __future__ import annotations

import io
import sys

from roost.text.escapes import BIDI as BIDI  # re-exported: the output layer's one vocabulary
from roost.text.escapes import BODY, FIELD, shown
from roost.text.escapes import SEPARATORS as SEPARATORS
from roost.text.escapes import escaped as escaped
from roost.text.escapes import json_text as json_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from typing import Any, TextIO

    from rich.text import Text


def visible(text: Any) -> str:
    """`text` with newlines and tabs kept and every other control and bidi character shown
    as an escape (idempotent: an escape is plain text)."""
    return shown(str(text), BODY)


def field(text: Any) -> str:
    """`visible`, for one line: newline and tab shown as `\\n` and `\\t` as well."""
    return shown(str(text), FIELD, kept=False)


def markup(text: Any) -> str:
    """`field(text)` for a rich markup string: `[red]` shows as written."""
    from rich.markup import escape

    return escape(field(text))


def styled(text: Any, style: str = "", one_line: bool = True) -> Text:
    """A rich Text of `text` made visible (rich reads no markup in a Text)."""
    from rich.text import Text

    return Text(field(text) if one_line else visible(text), style=style)


class Guarded(io.TextIOBase):
    """A text stream that writes what it is given through `visible` to `stream`."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes a stream with bytes
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.stream.write(visible(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self.stream.errors


def guard_streams() -> None:
    """Every later write to sys.stdout and sys.stderr goes through `visible`."""
    if not isinstance(sys.stdout, Guarded) and sys.stdout is not None:
        sys.stdout = Guarded(sys.stdout)
    if not isinstance(sys.stderr, Guarded) and sys.stderr is not None:
        sys.stderr = Guarded(sys.stderr)


def terminal(err: bool = False) -> TextIO:
    """The stream under the guard: only for what roost styles itself (rich's colours)."""
    stream = sys.stderr if err else sys.stdout
    return stream.stream if isinstance(stream, Guarded) else stream


RAW_REFUSED = (
    "--raw writes the bytes as they are, control sequences included: only to a "
    "pipe or a file, never to a terminal"
)


def raw_allowed() -> bool:
    """May raw bytes go to stdout? Only when it is not a terminal."""
    return not terminal().isatty()


def write_raw(data: bytes) -> None:
    """Bytes as they are, to stdout (a pipe: the caller checked `raw_allowed`)."""
    out = terminal()
    out.flush()
    if hasattr(out, "buffer"):
        out.buffer.write(data)
        out.buffer.flush()
    else:
        out.write(data.decode("utf-8", "replace"))
        out.flush()


def echo_styled(line: str, err: bool = False) -> None:
    """One line whose only control sequences are roost's own styles (its foreign parts went
    through `visible` or `field`), past the guard."""
    out = terminal(err)
    out.write(line + "\n")
    out.flush()


_DIFF_STYLES = (
    ("diff --git", "1"),
    ("index ", "1"),
    ("--- ", "1"),
    ("+++ ", "1"),
    ("@@", "36"),
    ("+", "32"),
    ("-", "31"),
)


def print_diff(patch: str) -> None:
    """A patch (or diffstat) with its files' control characters shown as escapes; coloured
    by roost (never git's colours, which would pass a file's own sequences along) on a
    terminal."""
    # Split at newlines only: str.splitlines also splits at characters a file may hold (a
    # form feed, U+2028), which would make a text line look like a `-` or `+` line.
    lines = visible(patch).removesuffix("\n").split("\n") if patch else []
    if not terminal().isatty():
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return
    for line in lines:
        code = next((code for prefix, code in _DIFF_STYLES if line.startswith(prefix)), "")
        echo_styled(f"\x1b[{code}m{line}\x1b[0m" if code else line)
