"""roostd's attention inbox: everything that waits for a person, in one list that `roost
inbox`, `roost answer` and `roost web` all read (ops `inbox`, `answer`), and the approvals'
ops (`approval_request` from a worker, `approval_answer` from a person: docs/guides/approvals.md).

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
import time
from typing import Any

from roost.approvals import callrules as policy
from roost.host.fsutil import utc_now
from roost.supervise import approvalbook, attention
from roost.supervise.approvalbook import load, save
from roost.supervise.attention import waiting
from roost.supervise.core import Core, bind
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import BAD_REQUEST, NOT_FOUND, REFUSED, UNAUTHORIZED, RequestError

SURFACES = ("cli", "view", "web", "acp")
"""Where a person answers an approval from (`approval_answer`'s `by`; roostd's own answers
say `timeout`, or `roost` for a call lost with its worker: roost.supervise.approvalbook)."""
KINDS = ("question", "dialog", "approval", "budget", "gave_up", "failed", "conflict")


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
        out.append(
            {
                "id": entry_id,
                "job": {"id": record.id, "name": record.name},
                "kind": kind,
                "text": text,
                "options": record.options if kind == "dialog" else None,
                "since": record.updated,
            }
        )
    if opened != book["open"]:
        book["open"] = opened  # what closed is forgotten: a new question gets a new id
        attention.save(book)
    # A tool call waiting for a person (roost.supervise.approvalbook keeps them, own ids).
    return out + [approvalbook.inbox_entry(core, entry) for entry in approvalbook.pending(core)]


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
    if entry is not None and entry["kind"] == "approval":
        raise RequestError(
            REFUSED,
            f"{entry_id} is an approval: answer it with `roost approve "
            f"{entry_id}` or `roost deny {entry_id}`",
        )
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
        fix = {
            "budget": f"roost budget {record.id} AMOUNT",
            "gave_up": f"roost start {record.id}",
            "failed": f"roost start {record.id}",
            "conflict": f"roost merge {record.id} once the branches agree",
        }[entry["kind"]]
        raise RequestError(
            REFUSED,
            f"{entry_id} is a {entry['kind'].replace('_', ' ')}: there "
            f"is nothing to reply; `{fix}`, or dismiss it",
        )
    attention.note_answer(entry_id, by, record.id, None)
    return {"id": entry_id, "status": outcome, "job": record.id}


# -- approvals (roost.supervise.approvalbook keeps them) ----------------------------------------
async def approval_request(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    """A worker holds a call that needs a person: its entry (new, or the one it asked before)."""
    assert conn.job_id is not None
    record = core.jobs.get(conn.job_id)
    if record is None:
        raise RequestError(NOT_FOUND, f"job {conn.job_id} was removed")
    call, tool, tool_input = str(request["call"]), str(request["tool"]), request.get("input")
    if not isinstance(tool_input, dict):
        tool_input = {}
    worker = request.get("worker")
    entries = load()
    mine = [e for e in entries.values() if e.get("job") == record.id]
    entry = next((e for e in mine if e.get("call") == call), None)
    if entry is None:  # the same call asked by the run a restarted worker continued: an
        # entry of an earlier worker whose answer no worker has had (none, or not handed out)
        entry = next(
            (
                e
                for e in mine
                if e.get("worker") != worker
                and not e.get("used")
                and not e.get("pushed")
                and e.get("tool") == tool
                and e.get("input") == tool_input
            ),
            None,
        )
        if entry is not None:
            entry.update(call=call, worker=worker)
    if entry is None:
        timeout = float((record.approvals or {}).get("timeout", policy.DEFAULT_TIMEOUT))
        entry = {
            "id": approvalbook.new_id(entries),
            "job": record.id,
            "call": call,
            "worker": worker,
            "tool": tool,
            "input": tool_input,
            "cwd": record.cwd,
            "summary": policy.summary(tool, tool_input),
            "since": utc_now(),
            "requested": time.time(),
            "deadline": time.time() + timeout,
            "decision": None,
        }
        entries[entry["id"]] = entry
        save(entries)
        core.events.emit(
            "approval.requested",
            record,
            entry=entry["id"],
            tool=tool,
            summary=entry["summary"],
            input=tool_input,
            cwd=record.cwd,
        )
        approvalbook.arm(core, entry)
    elif entry.get("decision") and not entry.get("used"):
        entry["used"] = worker or True  # an approved call runs once
        save(entries)
    elif entry.get("decision") is None:
        save(entries)
    return approvalbook.reply(entry)


async def approval_answer(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    """A person approves or denies an entry (`decision`: approve | deny; `always`, `reason`,
    `by`: cli | view | web)."""
    if conn.job_id is not None or conn.peer_id is not None:
        raise RequestError(
            UNAUTHORIZED, "an agent cannot answer an approval: a person answers with roost approve/deny"
        )
    decision = request.get("decision")
    if decision not in ("approve", "deny"):
        raise RequestError(BAD_REQUEST, "decision must be approve or deny")
    by = str(request.get("by") or "cli")
    if by not in SURFACES:
        raise RequestError(BAD_REQUEST, f"by must be one of {', '.join(SURFACES)}")
    reason = request.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise RequestError(BAD_REQUEST, "reason must be text")
    return approvalbook.answer(
        core, str(request["entry"]), decision, by, reason=reason, always=bool(request.get("always"))
    )


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
    kept = {
        k: v
        for k, v in book["open"].items()
        if v.get("job") != job or (v.get("kind") == "conflict" and event["type"] == "job.state")
    }
    gave_up = book["gaveUp"].pop(job, None)
    if len(kept) != len(book["open"]) or gave_up is not None:
        book["open"] = kept
        attention.save(book)


def handlers(core: Core) -> dict[str, Handler]:
    core.events.listeners.append(_on_event)
    approvalbook.start(core)
    return bind(
        core,
        {
            "inbox": inbox,
            "answer": answer,
            "approval_request": approval_request,
            "approval_answer": approval_answer,
        },
    )
