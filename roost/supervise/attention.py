"""The attention inbox's book, `$ROOST_HOME/inbox.json` (0600): the ids of open entries,
who answered which id and when, the merges that conflicted (roostd keeps nothing else
of a refused merge) and the jobs whose worker roostd gave up on (a restarted roostd has no
worker process left to say so: the record says only `failed`). `handlers/inbox.py` reads
it and notes a give-up; `handlers/worktrees.py` notes a conflict and clears it when the
job's branch merges.

`answer_question` is the one place a person's answer to a job's open question or dialog is
delivered and written down, whatever the surface: the `answer` op (`roost answer`, the
inbox of the web and of the view) and the `reply` op (`roost reply`, the web's job page,
the view's reply box) while the job waits on one. The answer is written down once, with
who gave it and when; a later answer of the same question (the `answer` op naming its id,
a `reply` naming its text in `question`) delivers nothing and says who answered it and when.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path
from typing import Any

from roost.host import paths
from roost.host.fsutil import atomic_write_json, utc_now
from roost.job.record import JobRecord
from roost.job.states import ItemKind, JobState, ProcState
from roost.supervise import budget as budgets
from roost.supervise.core import Core
from roost.supervise.jobstore import accept_item
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError

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

    return {
        "open": table("open"),
        "answered": table("answered"),
        "conflicts": table("conflicts"),
        "gaveUp": table("gaveUp"),
    }


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


# -- answers --------------------------------------------------------------------------------------
def waiting(core: Core, record: JobRecord, gave_up: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """What the job waits on a person for, as (kind, text); None when it waits for no one.
    `gave_up`: the jobs the book says roostd gave up on (this roostd or an earlier one)."""
    if record.state == JobState.NEEDS_INPUT and record.question:
        return ("dialog" if record.dialog else "question"), record.question
    if record.state != JobState.FAILED:
        return None
    if budgets.blocked(record):
        return "budget", record.error or "stopped by its budget"
    proc = core.procs.get(record.id)
    if record.id in gave_up or (proc is not None and proc.state == ProcState.FATAL):
        return "gave_up", record.error or "roostd gave up on its worker"
    return "failed", record.error or "failed"


def _lines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def entry_key(job: str, kind: str, text: str) -> str:
    return hashlib.sha256(f"{job}\0{kind}\0{text}".encode()).hexdigest()[:24]


def answer_text(entry: dict[str, Any], request: dict[str, Any]) -> str:
    choice, text = request.get("choice"), request.get("text")
    if choice is not None:
        options = entry.get("options") or []
        if entry["kind"] != "dialog" or not options:
            raise RequestError(
                BAD_REQUEST, f"{entry['id']} is a {entry['kind']}, not a dialog: answer it with text"
            )
        if isinstance(choice, bool) or not isinstance(choice, int) or not 1 <= choice <= len(options):
            raise RequestError(BAD_REQUEST, f"choice must be 1 to {len(options)}")
        # A confirm's choices are yes and no; a select's is picked by its number (exact
        # even when two choices read alike), as `roost view` does.
        return str(options[choice - 1]) if options == ["yes", "no"] else str(choice)
    if not isinstance(text, str) or not text.strip():
        raise RequestError(BAD_REQUEST, "give the answer's text (or a choice for a dialog)")
    return text


def already(entry_id: str, done: dict[str, Any]) -> dict[str, Any]:
    return {"id": entry_id, "status": "already answered", "by": done.get("by"), "at": done.get("at")}


def note_answer(entry_id: str, by: str, job: str, asked: str | None) -> None:
    """`asked`: the key of the question answered (its line ends as LF): a `reply` naming
    that question finds its answer by it."""
    book = load()
    book["answered"][entry_id] = {"by": by, "at": utc_now(), "job": job, "asked": asked}
    save(book)


def answer_question(core: Core, record: JobRecord, request: dict[str, Any], by: str) -> dict[str, Any] | None:
    """The one place a person's answer to a job's open question or dialog is delivered and
    written down (the `answer` op and the `reply` op both come here). `request`: the answer
    (`text`, or `choice` N of a dialog) and, optionally, `question`: the text of the
    question the person answers (as the job page showed it). Returns the outcome with the
    inbox entry's id; `already answered` (who, when; nothing delivered) when that question
    has its answer; None when the job waits on no question and none was named (a plain
    reply: the caller queues it)."""
    book = load()
    wait = waiting(core, record)
    asked = wait if wait is not None and wait[0] in ("question", "dialog") else None
    named = request.get("question")
    if named is not None and not isinstance(named, str):
        raise RequestError(BAD_REQUEST, "question must be the text of the question answered")
    if named is not None:  # a form sends its line ends as CRLF, a page's parser reads LF
        named = _lines(named)
    if asked is not None and named not in (None, _lines(asked[1])):
        asked = None  # the job asks something else now: the named one is looked up below
    if asked is None:
        if named is None:
            if request.get("choice") is not None:
                raise RequestError(REFUSED, f"job {record.id} waits on no dialog: there is no choice to pick")
            return None
        keys = {entry_key(record.id, kind, named) for kind in ("question", "dialog")}
        done = [(k, v) for k, v in book["answered"].items() if v.get("asked") in keys]
        if done:
            entry_id, first = max(done, key=lambda kv: str(kv[1].get("at")))
            return already(entry_id, first)
        now = (
            f"it now asks: {wait[1][:100]}"
            if wait is not None and wait[0] in ("question", "dialog")
            else f"it is {record.state.value}"
        )
        raise RequestError(REFUSED, f"job {record.id} no longer asks that question ({now}); nothing was sent")
    kind, text = asked
    key = entry_key(record.id, kind, text)
    known = book["open"].get(key)
    if isinstance(known, dict) and known.get("id"):
        entry_id = str(known["id"])
    else:  # asked before anyone listed the inbox: its id is made now, as entries() would
        entry_id = secrets.token_hex(4)
        book["open"][key] = {"id": entry_id, "job": record.id, "kind": kind}
        save(book)
    done_now = book["answered"].get(entry_id)
    if done_now is not None:
        return already(entry_id, done_now)
    reply = answer_text({"id": entry_id, "kind": kind, "options": record.options}, request)
    outcome = accept_item(core, record, ItemKind.REPLY, reply, cause="reply")
    note_answer(entry_id, by, record.id, entry_key(record.id, kind, _lines(text)))
    return {"id": entry_id, "status": outcome.value, "job": record.id}
