"""The search index, `$ROOST_HOME/search.db` (0600): SQLite with an FTS5 table.

`entries` (FTS5) holds one row per searchable text, `meta` its job, kind, time and entry
id under the same rowid; `sources`
holds, per source (a session file, or a job's structured result), how far it was read: the
byte offset past its last indexed line, the file's inode and the question state carried
between scans. A batch's rows and its source's new offset are committed in one transaction,
so a roostd killed at any point has either both or neither: on start it reads each file
from its offset again, never losing or repeating an entry. `jobs` keeps a job's name, cwd
and links after `roost rm` deleted its files, so `--all` still finds it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from roost.search.entryscan import Row
from roost.search.ftsquery import END, START, BadQuery, iso, spans

SCHEMA_VERSION = 2
SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS entries USING fts5(
    text, tokenize = 'unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS meta(
    id INTEGER PRIMARY KEY, job TEXT NOT NULL, kind TEXT NOT NULL, at REAL NOT NULL,
    entry TEXT NOT NULL, source TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS meta_source ON meta(source);
CREATE TABLE IF NOT EXISTS sources(
    source TEXT PRIMARY KEY, job TEXT NOT NULL, offset INTEGER NOT NULL, inode INTEGER,
    asked INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS jobs(
    id TEXT PRIMARY KEY, name TEXT NOT NULL, cwd TEXT NOT NULL, session TEXT,
    parent TEXT, removed INTEGER NOT NULL DEFAULT 0);
"""
"""`entries` holds the text alone (the words and, for snippets, the text); `meta`, a narrow
table of the same rowids, what a search filters and sorts on: reading `at` of 100,000
matches from it is cheap, from the FTS table's own rows (the whole text each) it was not."""
SNIPPET_TOKENS = 16


def db_path(home: Path) -> Path:
    return home / "search.db"


def connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """The index, made 0600 before SQLite writes a byte (and its -wal and -shm with it)."""
    if not readonly:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        os.chmod(path, 0o600)
    old = os.umask(0o177)
    try:
        conn = sqlite3.connect(str(path), timeout=10, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        if not readonly:
            _migrate(conn)
    finally:
        os.umask(old)
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    """An index of another schema is dropped and made again (roostd then reads every file
    from the start; a removed job's entries of the old index are gone with it)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, SCHEMA_VERSION):
        conn.executescript(
            "DROP TABLE IF EXISTS entries; DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS sources;"
        )
    elif (
        version == 0 and conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'entries'").fetchone()
    ):  # the first schema had no version
        conn.executescript("DROP TABLE entries; DROP TABLE IF EXISTS sources;")
    conn.executescript(SCHEMA)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def source_state(conn: sqlite3.Connection, source: str) -> tuple[int, int | None, bool]:
    row = conn.execute("SELECT offset, inode, asked FROM sources WHERE source = ?", (source,)).fetchone()
    return (0, None, False) if row is None else (int(row[0]), row[1], bool(row[2]))


def commit_batch(
    conn: sqlite3.Connection,
    source: str,
    job: str,
    rows: Iterable[Row],
    offset: int,
    inode: int | None,
    asked: bool,
    replace: bool = False,
    start: int | None = None,
) -> bool:
    """The rows of `source` and its new offset, in one transaction (`replace`: its old
    rows go first: a file rewritten from the start, a changed result). `start`: the offset
    the rows were read from; when the index is no longer there (another writer went on),
    nothing is written and the answer is False."""
    with _transaction(conn):
        if start is not None and not replace and source_state(conn, source)[0] != start:
            return False
        if replace:
            conn.execute(
                "DELETE FROM entries WHERE rowid IN (SELECT id FROM meta WHERE source = ?)", (source,)
            )
            conn.execute("DELETE FROM meta WHERE source = ?", (source,))
        rows = list(rows)
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM meta").fetchone()[0]
        conn.executemany(
            "INSERT INTO meta(id, job, kind, at, entry, source) VALUES (?, ?, ?, ?, ?, ?)",
            [(first + n, job, r.kind, r.at, r.entry, source) for n, r in enumerate(rows)],
        )
        conn.executemany(
            "INSERT INTO entries(rowid, text) VALUES (?, ?)",
            [(first + n, r.text) for n, r in enumerate(rows)],
        )
        conn.execute(
            "INSERT INTO sources(source, job, offset, inode, asked) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(source) DO UPDATE SET offset = excluded.offset, "
            "inode = excluded.inode, asked = excluded.asked",
            (source, job, offset, inode, int(asked)),
        )
    return True


class _transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")


def note_job(conn: sqlite3.Connection, job: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO jobs(id, name, cwd, session, parent, removed) VALUES "
        "(:id, :name, :cwd, :session, :parent, :removed) ON CONFLICT(id) DO UPDATE "
        "SET name = :name, cwd = :cwd, session = :session, parent = :parent, "
        "removed = :removed",
        job,
    )


def forget_existing(conn: sqlite3.Connection, removed: set[str]) -> None:
    """`--reindex`: drop every row but those of removed jobs (their files are gone)."""
    with _transaction(conn):
        keep = sorted(removed)
        conn.execute(
            "DELETE FROM entries WHERE rowid IN (SELECT id FROM meta WHERE job NOT IN "
            "(SELECT value FROM json_each(?)))",
            (_json(keep),),
        )
        conn.execute("DELETE FROM meta WHERE job NOT IN (SELECT value FROM json_each(?))", (_json(keep),))
        conn.execute("DELETE FROM sources WHERE job NOT IN (SELECT value FROM json_each(?))", (_json(keep),))


def _json(values: list[str]) -> str:
    import json

    return json.dumps(values)


def search(
    conn: sqlite3.Connection,
    query: str,
    *,
    jobs: list[str] | None,
    kinds: list[str],
    since: float | None,
    limit: int,
    exclude: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The best matches of `query` (an FTS5 query, ftsquery.fts_query), best first (BM25),
    newest first on ties, among `jobs` (None: every job) but `exclude`. The snippets are
    made for the matches returned only."""
    sql = [
        "SELECT m.id, bm25(entries) AS score, m.at FROM entries JOIN meta m "
        "ON m.id = entries.rowid WHERE entries MATCH ?"
    ]
    args: list[Any] = [query]
    for values, clause in (
        (jobs, "m.job IN"),
        (exclude or None, "m.job NOT IN"),
        (kinds or None, "m.kind IN"),
    ):
        if values is not None:
            sql.append(f"AND {clause} (SELECT value FROM json_each(?))")
            args.append(_json(list(values)))
    if since is not None:
        sql.append("AND m.at >= ?")
        args.append(since)
    sql.append("ORDER BY score, m.at DESC LIMIT ?")
    args.append(limit)
    try:
        top = conn.execute(" ".join(sql), args).fetchall()
        ids = _json([row[0] for row in top])
        snippets = dict(
            conn.execute(
                f"SELECT rowid, snippet(entries, 0, '{START}', '{END}', '…', {SNIPPET_TOKENS}) "
                "FROM entries WHERE entries MATCH ? AND rowid IN (SELECT value FROM json_each(?))",
                (query, ids),
            ).fetchall()
        )
        meta = {
            row[0]: row[1:]
            for row in conn.execute(
                "SELECT id, job, kind, entry FROM meta WHERE id IN (SELECT value FROM json_each(?))", (ids,)
            )
        }
    except sqlite3.OperationalError as exc:
        if not any(word in str(exc) for word in ("fts5", "syntax", "no such column", "unknown")):
            raise
        raise BadQuery(f"bad query: {exc}") from None
    rows = []
    for rowid, score, at in top:
        job, kind, entry = meta[rowid]
        text, marks = spans(snippets.get(rowid, ""))
        rows.append(
            {
                "job": job,
                "kind": kind,
                "when": iso(float(at)),
                "entry": entry or None,
                "score": round(-float(score), 4),
                "snippet": text,
                "marks": marks,
            }
        )
    return rows


def job_table(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    keys = ("id", "name", "cwd", "session", "parent", "removed")
    return [
        dict(zip(keys, row, strict=True))
        for row in conn.execute("SELECT id, name, cwd, session, parent, removed FROM jobs")
    ]
