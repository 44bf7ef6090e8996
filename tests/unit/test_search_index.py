"""The search index's pure parts: a session file's entries as rows (the conversation, not
pi's system prompt), the query language and its errors, `--since`, ranking, and a batch's
rows and offset committed together (roost.search)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from roost.search import entryscan, indexdb
from roost.search.ftsquery import BadQuery, fts_query, parse_since, spans
from roost.wire.protocol import CUSTOM_TYPE


def line(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry).encode() + b"\n"


def message(role: str, text: str, n: int, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"e{n}",
        "timestamp": f"2026-12-01T10:00:0{n}.000Z",
        "message": {"role": role, "content": [{"type": "text", "text": text}], **extra},
    }


SESSION = b"".join(
    [
        line(
            {
                "type": "session",
                "version": 3,
                "id": "s",
                "cwd": "/w",
                "systemPrompt": "You are pi, an expert coding assistant",
            }
        ),
        line(
            {
                "type": "message",
                "id": "sys",
                "message": {"role": "system", "content": "expert coding assistant"},
            }
        ),
        line(message("user", "fix the payment retry", 1)),
        line(
            {
                "type": "message",
                "id": "e2",
                "timestamp": "2026-12-01T10:00:02.000Z",
                "message": {
                    "role": "assistant",
                    "stopReason": "toolUse",
                    "content": [
                        {"type": "text", "text": "looking"},
                        {"type": "toolCall", "name": "bash", "arguments": {"command": "grep retry"}},
                    ],
                },
            }
        ),
        line(message("toolResult", "retry.py:3", 3, toolName="bash")),
        line(message("assistant", "Done.\n\nShall I add a test?", 4, stopReason="stop")),
        line(message("user", "yes, with a \x02marker\x03", 5)),
        line(
            {
                "type": "custom_message",
                "customType": CUSTOM_TYPE,
                "id": "e6",
                "timestamp": "2026-12-01T10:00:06.000Z",
                "content": "envelope",
                "details": {"kind": "report", "title": "✉ report from child", "body": "all green"},
            }
        ),
    ]
)


def test_the_conversation_is_indexed_and_the_system_prompt_is_not() -> None:
    found = entryscan.scan(SESSION, 0)
    kinds = [(row.kind, row.entry) for row in found.rows]
    assert kinds == [
        ("user", "e1"),
        ("assistant", "e2"),
        ("tool", "e2"),
        ("tool", "e3"),
        ("assistant", "e4"),
        ("answer", "e5"),
        ("report", "e6"),
    ]
    assert not any("expert" in row.text for row in found.rows)
    assert found.end == len(SESSION)
    assert "\x02" not in found.rows[5].text and "marker" in found.rows[5].text
    assert found.rows[0].at == pytest.approx(1796119201.0)
    assert "all green" in found.rows[6].text


def test_a_line_still_being_written_is_read_next_time() -> None:
    cut = len(SESSION) - 20
    first = entryscan.scan(SESSION[:cut], 0)
    assert first.end < cut and len(first.rows) == 6
    rest = entryscan.scan(SESSION[first.end :], first.end, first.asked)
    assert [row.kind for row in rest.rows] == ["report"]
    assert rest.end == len(SESSION)
    # The question state is carried from one scan to the next.
    split = SESSION.index(b'"e5"')
    split = SESSION.rindex(b"\n", 0, split) + 1
    head = entryscan.scan(SESSION[:split], 0)
    assert head.asked
    assert entryscan.scan(SESSION[split:], split, head.asked).rows[0].kind == "answer"


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("payment retry", "payment retry"),
        ("retr*", "retr*"),
        ('"payment retry" OR banner', '"payment retry" OR banner'),
        ("CVE-2026-1234", '"CVE-2026-1234"'),
        ("payment.retry NOT flaky", '"payment.retry" NOT flaky'),
        ("text:secret", '"text:secret"'),  # never a column filter
        ("(a OR b) AND c", "( a OR b ) AND c"),
        ("ünïcode", "ünïcode"),
        ("x' OR 1=1; --", '"x\'" OR "1=1;" "--"'),
    ],
)
def test_a_query_keeps_fts_syntax_and_quotes_the_rest(text: str, query: str) -> None:
    assert fts_query(text) == query


@pytest.mark.parametrize("text", ['"unclosed', "", "   "])
def test_a_query_that_cannot_be_read_is_a_bad_query(text: str) -> None:
    with pytest.raises(BadQuery):
        fts_query(text)


def test_since_takes_a_day_and_a_utc_time() -> None:
    day = parse_since("2026-12-01")
    assert parse_since("2026-12-01T00:00:00Z") == day
    assert parse_since("2026-12-01T14:30") == day + 14.5 * 3600
    assert parse_since("2026-12-01T15:30:00+01:00") == day + 14.5 * 3600
    for bad in ("yesterday", "2026-13-01", "12/01/2026"):
        with pytest.raises(BadQuery, match="--since"):
            parse_since(bad)


def test_spans_mark_the_matches() -> None:
    assert spans("a \x02retry\x03 b \x02retr\x03") == ("a retry b retr", [[2, 7], [10, 14]])


def index(tmp_path: Path, rows: list[tuple[str, str, float]]) -> sqlite3.Connection:
    conn = indexdb.connect(tmp_path / "search.db")
    for n, (job, text, at) in enumerate(rows):
        row = entryscan.Row("assistant", text, at, f"e{n}", n)
        indexdb.commit_batch(conn, f"{job}-{n}", job, [row], n + 1, 1, False)
    return conn


def search(conn: sqlite3.Connection, query: str, **kw: Any) -> list[dict[str, Any]]:
    args: dict[str, Any] = {"jobs": None, "kinds": [], "since": None, "limit": 20, **kw}
    return indexdb.search(conn, fts_query(query), **args)


def test_the_best_match_first_and_the_newest_first_on_ties(tmp_path: Path) -> None:
    conn = index(
        tmp_path,
        [
            ("a", "retry once in a long text about many other things entirely", 100.0),
            ("b", "retry retry retry", 50.0),
            ("c", "the same words retry", 10.0),
            ("d", "the same words retry", 20.0),
        ],
    )
    rows = search(conn, "retry")
    assert [r["job"] for r in rows][0] == "b"  # BM25: the densest match
    ties = [r["job"] for r in rows if r["snippet"] == "the same words retry"]
    assert ties == ["d", "c"]  # equal scores: the newest first
    assert rows[0]["marks"] and rows[0]["when"] == "1970-01-01T00:00:50Z"
    assert [r["job"] for r in search(conn, "retry", jobs=["c"])] == ["c"]
    assert {r["job"] for r in search(conn, "retry", since=15.0)} == {"a", "b", "d"}
    assert search(conn, "retry", kinds=["user"]) == []
    with pytest.raises(BadQuery):
        search(conn, "AND")


def test_a_batch_and_its_offset_commit_together(tmp_path: Path) -> None:
    conn = indexdb.connect(tmp_path / "search.db")
    rows = entryscan.scan(SESSION, 0).rows

    class Dying:  # the process dies between the rows and the offset
        def __init__(self, real: sqlite3.Connection) -> None:
            self.real = real

        def execute(self, sql: str, *args: Any) -> Any:
            if sql.startswith("INSERT INTO sources"):
                raise KeyboardInterrupt
            return self.real.execute(sql, *args)

        def executemany(self, sql: str, args: Any) -> Any:
            return self.real.executemany(sql, args)

    with pytest.raises(KeyboardInterrupt):
        indexdb.commit_batch(Dying(conn), "f", "job", rows, len(SESSION), 1, False)  # type: ignore[arg-type]
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    assert indexdb.source_state(conn, "f") == (0, None, False)
    indexdb.commit_batch(conn, "f", "job", rows, len(SESSION), 1, False)
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == len(rows)
    assert indexdb.source_state(conn, "f") == (len(SESSION), 1, False)


def test_the_index_file_is_the_users_only(tmp_path: Path) -> None:
    indexdb.connect(tmp_path / "search.db").close()
    for path in tmp_path.iterdir():
        assert path.stat().st_mode & 0o077 == 0, path
