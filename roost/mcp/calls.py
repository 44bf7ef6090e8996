"""What each `roost mcp` tool asks roostd, blocking (the server runs them in a worker
thread): one connection per call, started roostd when needed (roost.wire.client), answers made
safe to show (`safetext`). A refusal is roostd's one-line message (RequestError), which
the server gives back as the tool's error."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from roost.errors import RoostError
from roost.events import log as eventlog
from roost.mcp.safetext import clean
from roost.mcp.shapes import BRIEF_KEYS
from roost.pi.transcript import read_entries, render
from roost.wire import client
from roost.wire.client import DaemonUnavailable

WAIT_MAX = 25.0
"""The longest a wait_for_jobs call blocks (a client's request timeout is often 30-60 s)."""
EVENTS_MAX = 200
"""The most events one wait_for_jobs call returns (the cursor then resumes after them)."""
TRANSCRIPT_MAX = 200
"""The most transcript entries show_job gives."""
WAIT_CONDITIONS = ("event", "settled", "done", "failed", "needs_input")


class Refused(RoostError):
    """A tool's arguments roost refuses before asking roostd (one line says why)."""


def request(op: str, args: dict[str, Any], timeout: float | None = 60.0) -> dict[str, Any]:
    with client.connect() as conn:
        return conn.call(op, args, timeout)


def brief(row: dict[str, Any]) -> dict[str, Any]:
    """A job row as the tools show it (`shapes.Job`), made safe."""
    out = {key: row.get(key) for key in BRIEF_KEYS}
    out["dialog"] = bool(row.get("dialog"))
    out["cost"] = (row.get("usage") or {}).get("cost")
    out["hasResult"] = row.get("result") is not None
    return clean(out)


def _under(path: str, directory: str) -> bool:
    directory = os.path.abspath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def list_jobs(state: list[str] | None, name: str | None, directory: str | None, limit: int) -> dict[str, Any]:
    rows = request("list", {})["jobs"]
    wanted = {s.strip() for s in state or [] if s.strip()}
    if "idle" in wanted:
        wanted.add("reaped")  # as roost ls shows it
    found = [
        r
        for r in rows
        if (not wanted or r.get("state") in wanted)
        and (not name or name.casefold() in str(r.get("name")).casefold())
        and (not directory or _under(str(r.get("cwd")), directory))
    ]
    found.sort(key=lambda r: str(r.get("created")), reverse=True)  # the newest first
    return {"jobs": [brief(r) for r in found[:limit]], "total": len(found)}


def transcript(row: dict[str, Any], entries: int | None, verbose: bool = False) -> str:
    """The end of the job's transcript as text (roost logs' lines), made safe: the
    session file roostd names (the user's own roostd, as roost web reads it)."""
    session = row.get("session")
    if row.get("kind") != "pi" or not isinstance(session, str) or not os.path.isabs(session):
        return ""
    read = read_entries(session)
    if entries is not None:
        read = read[-entries:] if entries > 0 else []
    return clean("\n".join(render(read, verbose=verbose)))


def show_job(job: str, entries: int) -> dict[str, Any]:
    row = request("show", {"job": job})["job"]
    out = brief(row)
    out.update(
        clean({key: row.get(key) for key in ("task", "model", "error", "usage", "result", "outputSchema")})
    )
    out["transcript"] = transcript(row, min(max(entries, 0), TRANSCRIPT_MAX))
    return out


def event_seq() -> int:
    """The event log's last seq now (roostd's `events` answer, with a filter that follows
    nothing; the connection closes with the call)."""
    return int(request("events", {"types": ["roost-mcp.none."]})["seq"])


def run_job(args: dict[str, Any]) -> dict[str, Any]:
    from roost.job.env import caller_env

    task = args.get("task")
    if not isinstance(task, str) or not task.strip():
        raise Refused("the task is empty")
    cwd = os.path.abspath(os.path.expanduser(args.get("cwd") or os.getcwd()))
    if not os.path.isdir(cwd):
        raise Refused(f"no directory {cwd}")
    cursor = event_seq()
    sent = {k: v for k, v in args.items() if v is not None and k != "cwd"}
    result = request("run", {**sent, "cwd": cwd, "env": caller_env()})
    return clean(
        {
            "id": result["id"],
            "name": result["name"],
            "state": result["state"],
            "position": result.get("position"),
            "cursor": cursor,
        }
    )


def reply(job: str, text: str) -> dict[str, Any]:
    """A user reply, `plain`: it answers no dialog (roostd refuses it while one is open)."""
    result = request("reply", {"job": job, "text": text, "cause": "reply", "plain": True})
    return clean({"id": result["id"], "status": result["status"]})


def send_message(job: str, text: str, sender: str) -> dict[str, Any]:
    result = request("message", {"job": job, "message": text, "from": sender})
    return clean({"id": result["id"], "status": result["status"]})


def job_result(job: str) -> dict[str, Any]:
    row = request("show", {"job": job})["job"]
    if row.get("result") is None:
        if row.get("outputSchema") is None:
            raise Refused(
                f"job {row['id']} has no output schema, so no structured result (run_job with output_schema)"
            )
        raise Refused(f"job {row['id']} has no valid result yet (state: {row.get('state')})")
    return clean({"id": row["id"], "state": row["state"], "result": row["result"]})


def stop_job(job: str) -> dict[str, Any]:
    result = request("stop", {"job": job})
    return clean({"id": result["id"], "was": result["was"], "state": result["state"]})


def search(query: str, job: str | None, limit: int) -> dict[str, Any]:
    """roostd's full-text search of the jobs' conversations (`roost search`)."""
    args: dict[str, Any] = {"query": query, "limit": limit}
    if job:
        args["job"] = job
    return clean({"results": request("search", args)["results"]})


def inbox() -> dict[str, Any]:
    return clean({"entries": request("inbox", {})["entries"]})


def _finished(probe: client.Client, ids: list[str], until: str, mode: str) -> bool:
    if until == "event":
        return False
    answer = probe.call("wait_jobs", {"jobs": ids, "until": until, "mode": mode, "timeout": 0})
    return bool(answer["reached"])


def wait(jobs: list[str], cursor: int | None, timeout: float, until: str, mode: str) -> dict[str, Any]:
    """Block until an event about `jobs` (all jobs: none named) comes after `cursor`
    (`until` event), or until they reach `until`, at most `timeout` (<= WAIT_MAX) seconds;
    the events since `cursor` in either case, and where to resume."""
    if until not in WAIT_CONDITIONS:
        raise Refused(f"until must be one of {', '.join(WAIT_CONDITIONS)}")
    if until != "event" and not jobs:
        raise Refused(f"until {until} needs the jobs to wait on")
    deadline = time.monotonic() + min(max(timeout, 0.0), WAIT_MAX)
    with client.connect() as probe:
        ids = list(dict.fromkeys(probe.call("show", {"job": j})["job"]["id"] for j in jobs))
        reached = _finished(probe, ids, until, mode)  # then the seq: no event of it is after
        now = int(probe.call("events", {"types": ["roost-mcp.none."]})["seq"])
        since = now if cursor is None else max(int(cursor), 0)
        events: list[dict[str, Any]] = []
        last = since
        timed_out = False
        if not (reached and since >= now):
            last, timed_out, reached = _follow(probe, ids, since, now, deadline, until, mode, events, reached)
        rows = [brief(probe.call("show", {"job": i})["job"]) for i in ids]
    return {"events": clean(events), "cursor": last, "reached": reached, "timedOut": timed_out, "jobs": rows}


def _follow(
    probe: client.Client,
    ids: list[str],
    since: int,
    now: int,
    deadline: float,
    until: str,
    mode: str,
    events: list[dict[str, Any]],
    reached: bool,
) -> tuple[int, bool, bool]:
    """The event log after `since` into `events` until the wait is over: (the last seq
    read, whether the deadline ended it, whether the jobs reached `until`)."""
    last = since
    follower = client.connect()
    fired = threading.Event()

    def interrupt() -> None:
        fired.set()
        follower.interrupt()

    timer = threading.Timer(max(deadline - time.monotonic(), 0.0), interrupt)
    timer.daemon = True
    timer.start()
    try:
        for entry in follower.follow({"since": since}):
            last = int(entry["seq"])
            if not ids or any(eventlog.matches(entry, None, i) for i in ids):
                events.append(entry)
                if len(events) >= EVENTS_MAX:
                    break
            if last < now:
                continue  # the history before the call (or before they got there): read on
            if until == "event":
                if events:
                    break
                continue
            if reached:
                break
            if _finished(probe, ids, until, mode):  # the events until then are read too
                reached, now = True, event_seq()
                if last >= now:
                    break
    except DaemonUnavailable:
        if not fired.is_set():
            raise
        return last, True, reached
    finally:
        timer.cancel()
        follower.close()
    return last, False, reached
