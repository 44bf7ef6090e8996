"""The attention inbox's book, `$ROOST_HOME/inbox.json` (0600): the ids of open entries,
who answered which id and when, the merges that conflicted (roostd keeps nothing else
of a refused merge) and the jobs whose worker roostd gave up on (a restarted roostd has no
worker process left to say so: the record says only `failed`). `handlers/inbox.py` reads
it and notes a give-up; `handlers/worktrees.py` notes a conflict and clears it when the
job's branch merges.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roost import paths
from roost.fsutil import atomic_write_json, utc_now

ANSWERED_KEPT = 500
"""How many answered ids the book remembers (the newest): enough for any retry."""


def book_file() -> Path:
    return paths.roost_home() / "inbox.json"


def load() -> dict[str, Any]:
    try:
        data = json.loads(book_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        data = {}

    def table(key: str) -> dict[str, Any]:
        value = data.get(key)
        return {k: v for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else {}

    return {"open": table("open"), "answered": table("answered"), "conflicts": table("conflicts"),
            "gaveUp": table("gaveUp")}


def save(book: dict[str, Any]) -> None:
    answered = book["answered"]
    if len(answered) > ANSWERED_KEPT:
        newest = sorted(answered, key=lambda k: str(answered[k].get("at")))[-ANSWERED_KEPT:]
        book["answered"] = {k: answered[k] for k in newest}
    atomic_write_json(book_file(), book, mode=0o600)


def note_conflict(job: str, text: str) -> None:
    book = load()
    book["conflicts"][job] = {"text": text, "at": utc_now()}
    save(book)


def clear_conflict(job: str) -> None:
    book = load()
    if book["conflicts"].pop(job, None) is not None:
        save(book)


def note_gave_up(job: str, reason: str) -> None:
    book = load()
    book["gaveUp"][job] = {"reason": reason, "at": utc_now()}
    save(book)
