"""Escapes for the characters that drive a terminal or reorder a line, and JSON that holds
none of them raw. The CLI's output layer (roost.display.output) shows all text through these;
roostd uses `json_text` to answer `list` as `roost ls --json` prints it, so both write the
same document (with orjson, a number under 1e-4 is written as a decimal, `0.000012`, where
`json` writes `1.2e-05`: the same number to a reader).

- The C0 and C1 controls, DEL, the bidi controls that reorder a line (U+202A-U+202E,
  U+2066-U+2069, U+200E/U+200F, U+061C) and the line and paragraph separators (U+2028,
  U+2029) become escapes (`\\x1b`, `\\x9b`, `\\u202e`).
- `BODY` keeps newline and tab, `FIELD` (one-line fields) shows them as `\\n` and `\\t`,
  `ESCAPED` is what JSON and TOML writers leave raw in a string (they escape C0
  themselves).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    import re
    from typing import Any


BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
"""The characters that reorder a line (bidi embeddings, overrides, isolates and marks)."""
SEPARATORS = (0x2028, 0x2029)
"""Unicode's line and paragraph separators: a line break to some programs, none to others."""

BODY: dict[int, str] = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
BODY.update({c: f"\\u{c:04x}" for c in (*BIDI, *SEPARATORS)})
del BODY[0x0A], BODY[0x09]
FIELD = {**BODY, 0x0A: "\\n", 0x09: "\\t"}
ESCAPED = {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), *BIDI, *SEPARATORS)}


def _finder(table: dict[int, str]) -> re.Pattern[str]:
    import re  # here: most commands print no control character, and re's import is ~10 ms

    return re.compile("[" + "".join(re.escape(chr(code)) for code in sorted(table)) + "]")


_FINDERS: dict[int, re.Pattern[str]] = {}


def shown(text: str, table: dict[int, str], kept: bool = True) -> str:
    """`text` with each character of `table` replaced by its escape (`kept`: the table
    keeps newline and tab).

    Most text has none: `isprintable` (False for every control and bidi character, and
    for a few harmless ones such as a no-break space) says so at memory speed. The rest is a
    search and a substitution of what it found, the pattern compiled on first use (a few
    ms, which a command that prints plain text never pays); str.translate would look up
    every character (5 MB/s on non-ASCII text)."""
    if (text.replace("\n", "").replace("\t", "") if kept else text).isprintable():
        return text
    finder = _FINDERS.get(id(table))
    if finder is None:
        finder = _FINDERS[id(table)] = _finder(table)
    return finder.sub(lambda found: table[ord(found.group())], text)


def escaped(document: str) -> str:
    """A JSON or TOML text whose strings' DEL, C1 and bidi characters are escaped as
    `\\u....` (the same data to a reader; C0 is escaped by the writers already)."""
    return shown(document, ESCAPED)


def json_text(data: Any, indent: int | None = 2, compact: bool = False) -> str:
    """`data` as JSON (non-ASCII kept), with every control and bidi character escaped."""
    import json

    from roost.wire.protocol import fast_json

    fast = fast_json()  # orjson where it is loaded (roostd, the view, roost web)
    if fast is not None and indent == 2 and not compact:
        try:  # json's text below, but for how a number under 1e-4 is written
            return escaped(fast.dumps(data, option=fast.OPT_INDENT_2).decode("utf-8"))
        except TypeError:  # what orjson refuses (a key not a string, an int past 64 bits)
            pass
    separators = (",", ":") if compact else None
    return escaped(json.dumps(data, indent=indent, ensure_ascii=False, separators=separators))
