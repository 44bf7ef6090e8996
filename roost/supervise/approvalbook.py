"""The book of approvals (docs/guides/approvals.md): the requests a job's worker holds a tool
call for, and their answers (the ops are handlers/inbox.py's).

The book is `$ROOST_HOME/approvals.json` (0600), written before anything is said about a
change, so a request and its answer outlive a SIGKILL of roostd. An entry is keyed by its
job and pi's toolCallId: a worker asks again for the calls it still holds after any
reconnect (and every few seconds), and gets the same entry back, with its decision once
there is one. A worker that died with a call pending took the call with it (its pi dies
with it; nothing ran): the restarted run that asks for the same tool and input takes the
entry over (the same id, still pending or already answered), so the person's answer is not
lost and not given twice. An answer is written once, with who gave it and when; a second
one changes nothing and says so. An approved entry is handed to one call only (`used`).

Only a person answers: `approval_answer` is refused on a worker's or a peer's connection
(an agent's roost_send/roost_spawn, a job's tools reaching roostd through its pi). An entry
left unanswered is denied after the job's approval timeout (`by: timeout`).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path
from typing import Any

from roost.approvals import callrules as policy
from roost.host import paths
from roost.host.fsutil import atomic_write_json, utc_now
from roost.supervise.core import Core
from roost.text.escapes import json_text
from roost.wire import protocol
from roost.wire.protocol import BAD_REQUEST, NOT_FOUND, RequestError

KEPT = 1000
"""How many answered entries the book keeps (the newest)."""


def book_file() -> Path:
    return paths.roost_home() / "approvals.json"


def load() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(book_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) else None
    return {k: v for k, v in entries.items() if isinstance(v, dict)} if isinstance(entries, dict) else {}


def save(entries: dict[str, dict[str, Any]]) -> None:
    answered = [k for k, v in entries.items() if v.get("decision")]
    if len(answered) > KEPT:
        for key in sorted(answered, key=lambda k: str(entries[k].get("at")))[:-KEPT]:
            del entries[key]
    atomic_write_json(book_file(), {"entries": entries}, mode=0o600)


def pending(core: Core) -> list[dict[str, Any]]:
    """The open approval entries of live jobs, oldest first (the inbox lists them)."""
    return sorted(
        (e for e in load().values() if e.get("decision") is None and e.get("job") in core.jobs),
        key=lambda e: float(e.get("requested", 0)),
    )


def inbox_entry(core: Core, entry: dict[str, Any]) -> dict[str, Any]:
    record = core.jobs[entry["job"]]
    return {
        "id": entry["id"],
        "job": {"id": record.id, "name": record.name},
        "kind": "approval",
        "text": entry["summary"],
        "options": None,
        "since": entry.get("since"),
        "tool": entry["tool"],
        "input": entry["input"],
        "cwd": entry["cwd"],
        # As a person reads it (the web's page): indented JSON, controls and bidi escaped.
        "inputText": json_text(entry["input"]),
        "deadline": entry.get("deadline"),
    }


def reply(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "entry": entry["id"],
        "decision": entry.get("decision"),
        "reason": entry.get("reason"),
        "by": entry.get("by"),
        "rule": entry.get("rule"),
    }


def answer(
    core: Core, entry_id: str, decision: str, by: str, reason: str | None = None, always: bool = False
) -> dict[str, Any]:
    entries = load()
    entry = entries.get(entry_id)
    if entry is None or entry.get("job") not in core.jobs:
        raise RequestError(NOT_FOUND, f"no approval {entry_id} (see roost inbox)")
    if entry.get("decision"):
        return {
            "id": entry_id,
            "status": "already answered",
            "by": entry.get("by"),
            "at": entry.get("at"),
            "decision": entry["decision"],
        }
    if always and decision != "approve":
        raise RequestError(BAD_REQUEST, "--always goes with approve")
    record = core.jobs[entry["job"]]
    entry.update(
        decision="approved" if decision == "approve" else "denied",
        by=by,
        at=utc_now(),
        reason=(reason or "")[:2000] or None,
    )
    if always:
        rule = policy.always_rule(entry["tool"], entry["input"])
        current = dict(record.approvals or {"mode": "auto"})
        current["allow"] = list(dict.fromkeys([*(current.get("allow") or []), rule]))
        record.approvals = current
        entry["rule"] = rule
        core.job_changed(record)
    proc = core.procs.get(record.id)
    # Handed to the worker that waits for it: no later run takes it over. An answer given
    # while that worker is gone (a restarted one is not waiting for this call yet) is kept
    # for the same call asked again.
    entry["pushed"] = (
        proc is not None and proc.conn is not None and entry.get("worker") == record.process.worker_pid
    )
    save(entries)
    core.events.emit(
        "approval.answered",
        record,
        entry=entry_id,
        decision=entry["decision"],
        by=by,
        reason=entry.get("reason"),
        rule=entry.get("rule"),
    )
    if proc is not None and proc.conn is not None:
        proc.conn.push(protocol.event("approval", **reply(entry), call=entry["call"]))
    return {"id": entry_id, "status": entry["decision"], "job": record.id, "rule": entry.get("rule")}


# -- the timeout ----------------------------------------------------------------------------------
def arm(core: Core, entry: dict[str, Any]) -> None:
    delay = max(0.0, float(entry.get("deadline") or 0) - time.time())
    asyncio.get_running_loop().call_later(delay, _expire, core, str(entry["id"]))


def _expire(core: Core, entry_id: str) -> None:
    entry = load().get(entry_id)
    if entry is None or entry.get("decision") or entry.get("job") not in core.jobs:
        return
    if float(entry.get("deadline") or 0) > time.time() + 0.05:
        arm(core, entry)
        return
    minutes = max(0.0, float(entry["deadline"]) - float(entry.get("requested") or 0)) / 60
    answer(
        core,
        entry_id,
        "deny",
        "timeout",
        reason=f"no one answered within {minutes:g} minutes (the approval timed out)",
    )


ENDED = ("done", "failed", "stopped", "reaped")
"""A job in one of these states has no run in progress, so no call waiting: an entry of it
still open was lost with a worker (restarted, its run went on without making the same
call again) or with a stop, and is closed as denied (by `roost`), saying so."""


def _on_event(core: Core, event: dict[str, Any]) -> None:
    if event.get("type") == "daemon.started":  # what an earlier roostd left pending
        for entry in pending(core):
            arm(core, entry)
    elif event.get("type") == "job.state" and event.get("to") in ENDED and event.get("job"):
        for entry in pending(core):
            if entry["job"] == event["job"]["id"]:
                answer(
                    core,
                    entry["id"],
                    "deny",
                    "roost",
                    reason=f"the job is {event['to']}: "
                    "the call was not made again after its worker restarted or it stopped",
                )


def new_id(entries: dict[str, Any]) -> str:
    while (entry_id := secrets.token_hex(4)) in entries:
        pass
    return entry_id


def start(core: Core) -> None:
    """Arm the timeouts of what an earlier roostd left pending, once roostd runs."""
    core.events.listeners.append(lambda event: _on_event(core, event))
