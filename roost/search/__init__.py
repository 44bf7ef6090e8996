"""Full-text search over every job's conversation: the pure parts (`entryscan`: a session
file's entries as searchable rows; `ftsquery`: a query, `--since` and snippets; `indexdb`:
the SQLite FTS5 index under ROOST_HOME, its schema and its one transaction per batch).
roostd owns the only writer (`roost.supervise.searchkeeper`); docs/guides/search.md."""
