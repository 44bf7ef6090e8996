"""roostd's attention inbox: everything that waits for a person, in one list that `roost
inbox`, `roost answer` and `roost web` all read (ops `inbox`, `answer`).

An entry is a job that waits: its open question (`question`) or dialog (`dialog`), a stop
by its budget (`budget`), a worker roostd gave up on (`gave_up`), any other failure
(`failed`), a merge of its branch that conflicted (`conflict`, until a merge succeeds or it
is dismissed). Its id is stable while it stays open: it is kept in `$ROOST_HOME/inbox.json`
(0600) under the entry's key (job, kind, text) until the job's state changes (an event
listener), so the same open question has the same id across calls and restarts of roostd,
and a question asked again after it was answered gets a new one. Answering is idempotent:
the file remembers who answered an id and when, and a second answer changes nothing and
says so.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from roost.fsutil import utc_now
from roost.jobs import JobRecord
from roost.jsonlines import Connection, Handler
from roost.protocol import BAD_REQUEST, NOT_FOUND, REFUSED, RequestError
from roost.states import ItemKind, JobState, ProcState
from roost.supervise import attention, budgets
from roost.supervise.core import Core, bind
from roost.supervise.jobstore import accept_item

KINDS = ("question", "dialog", "budget", "gave_up", "failed", "conflict")


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


def _key(job: str, kind: str, text: str) -> str:
    return hashlib.sha256(f"{job}\0{kind}\0{text}".encode()).hexdigest()[:24]


def entries(core: Core) -> list[dict[str, Any]]:
    """The open entries, oldest job first, each with its stable id (kept in the file)."""
    book = attention.load()
    opened: dict[str, dict[str, str]] = {}
    out: list[dict[str, Any]] = []
    waits = []
    gave_up = frozenset(book["gaveUp"])
    for record in sorted(core.jobs.values(), key=lambda r: r.created):
        wait = waiting(core, record, gave_up)
        if wait is not None:
            waits.append((record, *wait))
        conflict = book["conflicts"].get(record.id)
        if conflict is not None:
            waits.append((record, "conflict", str(conflict.get("text"))))
    for record, kind, text in waits:
        key = _key(record.id, kind, text)
        known = book["open"].get(key)
        entry_id = known["id"] if isinstance(known, dict) and known.get("id") else secrets.token_hex(4)
        # Kept while open, answered or not: the id stays the same until the job moves on.
        opened[key] = {"id": entry_id, "job": record.id, "kind": kind}
        if entry_id in book["answered"]:  # answered; its job has not moved on yet
            continue
        out.append({"id": entry_id, "job": {"id": record.id, "name": record.name},
                    "kind": kind, "text": text,
                    "options": record.options if kind == "dialog" else None,
                    "since": record.updated})
    if opened != book["open"]:
        book["open"] = opened  # what closed is forgotten: a new question gets a new id
        attention.save(book)
    return out


async def inbox(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    return {"entries": entries(core)}


def _answer_text(entry: dict[str, Any], request: dict[str, Any]) -> str:
    choice, text = request.get("choice"), request.get("text")
    if choice is not None:
        options = entry.get("options") or []
        if entry["kind"] != "dialog" or not options:
            raise RequestError(BAD_REQUEST, f"{entry['id']} is a {entry['kind']}, not a "
                                            "dialog: answer it with text")
        if isinstance(choice, bool) or not isinstance(choice, int) or not 1 <= choice <= len(options):
            raise RequestError(BAD_REQUEST, f"choice must be 1 to {len(options)}")
        # A confirm's choices are yes and no; a select's is picked by its number (exact
        # even when two choices read alike), as `roost view` does.
        return str(options[choice - 1]) if options == ["yes", "no"] else str(choice)
    if not isinstance(text, str) or not text.strip():
        raise RequestError(BAD_REQUEST, "give the answer's text (or a choice for a dialog)")
    return text


async def answer(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    entry_id = str(request["entry"])
    by = str(request.get("by") or "someone")[:80]
    book = attention.load()
    done = book["answered"].get(entry_id)
    if done is not None:
        return {"id": entry_id, "status": "already answered", "by": done.get("by"),
                "at": done.get("at")}
    entry = next((e for e in entries(core) if e["id"] == entry_id), None)
    if entry is None:
        raise RequestError(NOT_FOUND, f"no open inbox entry {entry_id} (see roost inbox)")
    record = core.find_job(entry["job"]["id"])
    if request.get("dismiss"):
        outcome = "dismissed"
        if entry["kind"] == "conflict":
            attention.clear_conflict(record.id)
    elif entry["kind"] in ("question", "dialog"):
        text = _answer_text(entry, request)
        outcome = accept_item(core, record, ItemKind.REPLY, text, cause="reply").value
    else:
        fix = {"budget": f"roost budget {record.id} AMOUNT", "gave_up": f"roost start {record.id}",
               "failed": f"roost start {record.id}",
               "conflict": f"roost merge {record.id} once the branches agree"}[entry["kind"]]
        raise RequestError(REFUSED, f"{entry_id} is a {entry['kind'].replace('_', ' ')}: there "
                                    f"is nothing to reply; `{fix}`, or dismiss it")
    book = attention.load()
    book["answered"][entry_id] = {"by": by, "at": utc_now(), "job": record.id}
    attention.save(book)
    return {"id": entry_id, "status": outcome, "job": record.id}


def _on_event(event: dict[str, Any]) -> None:
    """A job that changes state leaves what it waited on: its open ids are forgotten, so
    the same question asked again (after an answer, a restart) is a new entry. A give-up is
    written down (it outlives this roostd) until the job leaves `failed`."""
    if not event.get("job"):
        return
    job = event["job"]["id"]
    if event.get("type") == "worker.gave_up":
        attention.note_gave_up(job, str(event.get("reason") or ""))
        return
    if event.get("type") not in ("job.state", "job.removed"):
        return
    if event.get("type") == "job.state" and event.get("from") not in ("needs_input", "failed"):
        return
    book = attention.load()
    kept = {k: v for k, v in book["open"].items()
            if v.get("job") != job or (v.get("kind") == "conflict" and event["type"] == "job.state")}
    gave_up = book["gaveUp"].pop(job, None)
    if len(kept) != len(book["open"]) or gave_up is not None:
        book["open"] = kept
        attention.save(book)


def handlers(core: Core) -> dict[str, Handler]:
    core.events.listeners.append(_on_event)
    return bind(core, {"inbox": inbox, "answer": answer})
