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

A question or dialog is answered in `attention.answer_question`, whatever the surface (the
`reply` op comes there too).
"""

from __future__ import annotations

import secrets
from typing import Any

from roost.jsonlines import Connection, Handler
from roost.protocol import NOT_FOUND, REFUSED, RequestError
from roost.supervise import attention
from roost.supervise.attention import waiting
from roost.supervise.core import Core, bind

KINDS = ("question", "dialog", "budget", "gave_up", "failed", "conflict")


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
        key = attention.entry_key(record.id, kind, text)
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


async def answer(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    entry_id = str(request["entry"])
    by = str(request.get("by") or "someone")[:80]
    book = attention.load()
    done = book["answered"].get(entry_id)
    if done is not None:
        return attention.already(entry_id, done)
    entry = next((e for e in entries(core) if e["id"] == entry_id), None)
    if entry is None:
        raise RequestError(NOT_FOUND, f"no open inbox entry {entry_id} (see roost inbox)")
    record = core.find_job(entry["job"]["id"])
    if request.get("dismiss"):
        outcome = "dismissed"
        if entry["kind"] == "conflict":
            attention.clear_conflict(record.id)
    elif entry["kind"] in ("question", "dialog"):
        answered = attention.answer_question(core, record, {**request, "question": entry["text"]}, by)
        assert answered is not None  # the job waits on it: entries() said so
        return answered
    else:
        fix = {"budget": f"roost budget {record.id} AMOUNT", "gave_up": f"roost start {record.id}",
               "failed": f"roost start {record.id}",
               "conflict": f"roost merge {record.id} once the branches agree"}[entry["kind"]]
        raise RequestError(REFUSED, f"{entry_id} is a {entry['kind'].replace('_', ' ')}: there "
                                    f"is nothing to reply; `{fix}`, or dismiss it")
    attention.note_answer(entry_id, by, record.id, None)
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
