"""A search query as FTS5 reads it, `--since`, and a snippet's marked spans.

The query language is FTS5's (docs/guides/search.md): words, "a phrase", a prefix `retr*`,
`AND`, `OR`, `NOT`, parentheses. A word with characters FTS5 does not take bare (`CVE-2026`,
`payment.retry`, `a:b`) is quoted as a phrase, so a column filter or stray operator cannot
come from the text. The query reaches SQLite only as a bound parameter; what FTS5 still
refuses is a `BadQuery`, a one-line usage error.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

START, END = "\x02", "\x03"
"""snippet()'s markers around a match (never in indexed text: entryscan.MARKS)."""
OPERATORS = frozenset({"AND", "OR", "NOT"})
_BARE = re.compile(r"[\w\u0080-\U0010ffff]+\*?")
_TOKEN = re.compile(r'"(?:[^"]|"")*"?\*?|[()]|[^\s()"]+')
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class BadQuery(ValueError):
    """A query (or `--since`) that cannot be searched: said in one line."""


def fts_query(text: str) -> str:
    """`text` as an FTS5 query: bare words kept, other words quoted as phrases."""
    parts = []
    for token in _TOKEN.findall(text):
        if token.startswith('"'):
            if len(token) < 2 or not token.rstrip("*").endswith('"') or token == '"':
                raise BadQuery('a phrase is not closed: a " is missing')
            parts.append(token)
        elif token in "()" or token in OPERATORS or _BARE.fullmatch(token):
            parts.append(token)
        else:
            star = "*" if token.endswith("*") else ""
            parts.append('"' + token.rstrip("*") + '"' + star)
    query = " ".join(parts)
    if not query.strip():
        raise BadQuery("the query is empty")
    return query


def parse_since(text: str) -> float:
    """`--since`: a day (YYYY-MM-DD, from 00:00 UTC) or a time (ISO 8601; UTC unless it
    names an offset: `2026-12-01T14:30:00Z`, `2026-12-01 14:30`); seconds since the epoch."""
    value = text.strip()
    try:
        if _DAY.fullmatch(value):
            return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadQuery(
            f"--since {text!r} is not a day (2026-12-01) or a UTC time (2026-12-01T14:30:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def spans(snippet: str) -> tuple[str, list[list[int]]]:
    """A snippet without its markers, and the [start, end) character spans they marked."""
    out: list[str] = []
    marks: list[list[int]] = []
    length, open_at = 0, None
    for piece in re.split(f"([{START}{END}])", snippet):
        if piece == START:
            open_at = length
        elif piece == END:
            if open_at is not None and length > open_at:
                marks.append([open_at, length])
            open_at = None
        else:
            out.append(piece)
            length += len(piece)
    return "".join(out), marks


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
