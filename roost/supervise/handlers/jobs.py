"""roostd's job operations (what the CLI calls): run, list, show, reply, wait, stop, ...

One module-level function per op, given the daemon's `Core`; `handlers` is the op table."""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import time
import unicodedata
from pathlib import Path
from typing import Any

from roost import __version__
from roost.host import paths
from roost.job import env as jobenv
from roost.job.record import JobRecord
from roost.job.states import CLIENT_CAUSES, ItemKind, JobKind, JobState, Outcome, run_cause
from roost.job.tree import tree_order
from roost.supervise import attention, budget, placement, worktrees
from roost.supervise.core import Core, bind
from roost.supervise.jobqueue import checked_priority
from roost.supervise.jobs import create_job, launch, request_env
from roost.supervise.jobstore import accept_item, held_by_other, is_settled
from roost.supervise.workers import stop_leftovers
from roost.text.escapes import json_text
from roost.wire import protocol
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import BAD_REQUEST, NOT_FOUND, REFUSED, RequestError
from roost.wire.requests import (
    JobRef,
    ListRequest,
    NoArgs,
    ReplyRequest,
    RmRequest,
    RunRequest,
    ShutdownRequest,
    StartRequest,
    WaitJobsRequest,
    WaitRequest,
)


def _nothing_to_start(record: JobRecord) -> str:
    """`roost start` on a job whose worker is up: what is true, and what would help. Start
    brings a worker up; it never re-runs a task (a reply starts the next run)."""
    state = record.state
    if state in (JobState.STARTING, JobState.RUNNING):
        return f"job {record.id} is {state.value}: its worker is up, nothing to start"
    hint = {JobState.NEEDS_INPUT: f"it waits for you: roost reply {record.id} TEXT"}.get(
        state, f"roost reply {record.id} TEXT starts a new run"
    )
    return f"job {record.id} is {state.value} and its worker is up, idle: {hint}"


def _check_chosen_name(core: Core, name: str | None) -> None:
    """A name a person gives (`roost run --name`) is what later commands find the job by:
    an empty one is refused (not silently replaced), and so is one another job has (every
    later `roost wait NAME` would say "ambiguous")."""
    if name is None:
        return
    if not name.strip():
        raise RequestError(
            BAD_REQUEST,
            f"name {name!r} is empty: give a name, or leave --name out for one made from the task",
        )
    name = unicodedata.normalize("NFKC", name)  # as the job will keep it (checked_name)
    taken = [r for r in core.jobs.values() if name in (r.name, r.id)]
    if taken:
        other = taken[0]
        raise RequestError(
            REFUSED,
            f"the name {name!r} is taken by job {other.id} "
            f"({other.state.value}): choose another, or `roost rm "
            f"{other.id}` first",
        )


WAIT_CONDITIONS = ("needs_input", "settled", "done", "failed")


def reached(core: Core, record: JobRecord, until: str) -> bool:
    """Has the job reached `until` (one of WAIT_CONDITIONS)? `done` includes `reaped`
    (a done job whose idle worker was stopped)."""
    if until == "settled":
        return is_settled(core, record)
    if until == "done":
        return record.state in (JobState.DONE, JobState.REAPED)
    return record.state.value == until


async def status(core: Core, conn: Connection, request: NoArgs) -> dict[str, Any]:
    return {
        "running": True,
        "pid": os.getpid(),
        "socket": str(paths.socket_path()),
        "version": __version__,
        "jobs": len(core.jobs),
    }


async def shutdown(core: Core, conn: Connection, request: ShutdownRequest) -> dict[str, Any]:
    stopped = []
    if request.get("jobs"):
        for record in list(core.jobs.values()):
            if core.procs.get(record.id) and core.procs[record.id].alive:
                await _stop(core, record)
                stopped.append(record.id)
    asyncio.get_running_loop().call_soon(core.request_shutdown)
    return {"stopped": stopped}


async def run(core: Core, conn: Connection, request: RunRequest) -> dict[str, Any]:
    _check_chosen_name(core, request.get("name"))
    env = request_env(request)
    runner = request.get("runner")  # local or ray (Op.check)
    record = create_job(core, request)
    if runner is not None:
        placement.choose(record.dir, runner)  # where its worker runs, every start (supervise/placement.py)
    core.queue.place(record, request.get("group"), checked_priority(request.get("priority")))
    budget.apply_budget(core, record, request)
    await worktrees.prepare(core, record, request, spawned=False)
    try:
        launch(core, record, env=env)
    except BaseException:
        await worktrees.discard(record)
        raise
    # pi's agent dir is roostd's, whatever the caller's says: the CLI warns on a mismatch.
    return {
        "id": record.id,
        "name": record.name,
        "agentDir": str(paths.agent_dir()),
        "state": record.state.value,
        "position": core.queue.position(record),
        "error": record.error,
    }


def all_rows(core: Core) -> list[dict[str, Any]]:
    """Every job's row, oldest first."""
    with budget.many_rows(core):  # each tree's sum once, not once per row
        return [core.row(r) for r in sorted(core.jobs.values(), key=lambda r: r.created)]


async def list_jobs(core: Core, conn: Connection, request: ListRequest) -> dict[str, Any]:
    core.queue.schedule()  # a maxRunning raised in roost.json applies now
    rows = all_rows(core)
    if request.get("tree"):
        rows = tree_order(rows)
    if request.get("text"):
        # `roost ls --json`: the document made here with the orjson roostd has loaded, so
        # the CLI prints one string instead of decoding ~1 MB of rows (1,000 jobs) and
        # encoding them again, indented, itself (README: Start-up). Its frame is ~1.6x the
        # rows' frame: past the frame limit (~3,500 jobs) the rows go, as without `text`.
        answer = {"text": json_text(rows)}
        try:
            protocol.encode(answer)
        except protocol.FrameTooLarge:
            return {"jobs": rows}
        return answer
    return {"jobs": rows}


async def show(core: Core, conn: Connection, request: JobRef) -> dict[str, Any]:
    record = core.find_job(request["job"])
    proc = core.procs.get(record.id)
    row = core.row(record)
    row.update(
        task=record.task,
        command=record.command,
        model=record.model,
        agentDefinition=record.agent_def,
        thinking=record.thinking,
        error=record.error,
        exitCode=record.process.exit_code,
        worker={
            "pid": record.process.worker_pid,
            "state": proc.state.value if proc else "stopped",
            "crashes": len(record.process.crashes),
        },
        dir=str(record.dir),
        mailbox=str(record.mailbox_dir),
        depth=record.links.depth,
        environment=jobenv.summary(record.dir),  # names only: the values are secrets
        outputSchema=record.output_schema,
        approvals=record.approvals,  # roost.approvals.callrules: mode, rules, timeout
    )
    return {"job": row}


async def reply(core: Core, conn: Connection, request: ReplyRequest) -> dict[str, Any]:
    record = core.find_job(request["job"])
    text = request.get("text")
    if request.get("choice") is None and (not isinstance(text, str) or not text.strip()):
        raise RequestError(BAD_REQUEST, "the reply text is empty")
    try:
        # What started a run decides whether it reports to a parent: a client says at
        # most that it is a user reply; `task` is the job's own first item only.
        cause = run_cause(request.get("cause", "reply"), CLIENT_CAUSES)
    except ValueError as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None
    # A person's reply (its surface says `by`) while the job waits on a question or dialog
    # answers it: written down once in the inbox (who, when), whatever the surface; a
    # reply naming a question already answered delivers nothing and says who answered it.
    # A schedule's firing (no `by`) is no answer of anyone's: it is queued as it was.
    # A `plain` reply (roost mcp's: a model's) answers nothing: refused while a dialog is open.
    plain = request.get("plain") is True
    if plain and (record.dialog or (attention.waiting(core, record) or ("",))[0] in ("dialog", "approval")):
        raise RequestError(
            REFUSED,
            f"job {record.id} waits on a dialog ({record.question}): "
            "a person answers it (roost answer, roost view, roost "
            "web), not this reply; nothing was sent",
        )
    person = not plain and any(request.get(k) is not None for k in ("by", "question", "choice"))
    by = str(request.get("by") or "someone")[:80]
    answered = attention.answer_question(core, record, request, by) if person else None
    if answered is not None:
        if answered["status"] == "already answered":
            return {**answered, "entry": answered["id"], "id": record.id}
        return {"status": answered["status"], "id": record.id, "entry": answered["id"]}
    assert isinstance(text, str)  # no choice without a dialog (answer_question refused it)
    outcome = accept_item(core, record, ItemKind.REPLY, text, cause=cause.value)
    answer = {"status": outcome.value, "id": record.id}
    if outcome == Outcome.QUEUED and record.state == JobState.FAILED and record.error:
        answer["why"] = record.error  # no run starts for it until `roost start`
    return answer


async def wait(core: Core, conn: Connection, request: WaitRequest) -> dict[str, Any]:
    record = core.find_job(request["job"])
    timeout = request.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout < 0
    ):
        raise RequestError(BAD_REQUEST, f"timeout must be a number of seconds >= 0, got {timeout!r}")
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    while not is_settled(core, record):
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return {"settled": False, "row": core.row(record)}
        if record.id not in core.jobs:
            raise RequestError(NOT_FOUND, f"job {record.id} was removed")
        await core.wait_change(record, left)
    return {"settled": True, "row": core.row(record)}


async def wait_jobs(core: Core, conn: Connection, request: WaitJobsRequest) -> dict[str, Any]:
    refs = request["jobs"]
    if not isinstance(refs, list) or not refs:
        raise RequestError(BAD_REQUEST, "jobs must be a non-empty list of job ids or names")
    until, mode = request["until"], request.get("mode", "any")
    if until not in WAIT_CONDITIONS:
        raise RequestError(BAD_REQUEST, f"until must be one of {', '.join(WAIT_CONDITIONS)}")
    if mode not in ("any", "all"):
        raise RequestError(BAD_REQUEST, "mode must be any or all")
    records = list({r.id: r for r in (core.find_job(str(ref)) for ref in refs)}.values())
    timeout = request.get("timeout")
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    while True:
        for record in records:
            if record.id not in core.jobs:
                raise RequestError(NOT_FOUND, f"job {record.id} was removed")
        hits = [r for r in records if reached(core, r, until)]
        if hits if mode == "any" else len(hits) == len(records):
            return {"reached": True, "jobs": [core.row(r) for r in hits]}
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return {
                "reached": False,
                "jobs": [core.row(r) for r in hits],
                "waiting": [core.row(r) for r in records if r not in hits],
            }
        await core.wait_any_change(left)


async def _stop(core: Core, record: JobRecord, reason: str = "stopped") -> None:
    proc = core.procs.get(record.id)
    was_stopped = record.state == JobState.STOPPED
    if not was_stopped:
        core.set_state(record, JobState.STOPPED, reason, busy=False, dialog=False, status="")
    if proc is not None:
        await proc.stop(reason, core.settings().stopTimeoutSeconds)
    if not was_stopped:  # one `ended` report per stop, not one per `roost stop` call
        core.agents.job_ended(record, reason)


async def stop(core: Core, conn: Connection, request: JobRef) -> dict[str, Any]:
    record = core.find_job(request["job"])
    was = record.state.value
    await _stop(core, record)
    return {"id": record.id, "was": was, "state": record.state.value}


async def abort(core: Core, conn: Connection, request: JobRef) -> dict[str, Any]:
    """End the run in progress and keep the job (`stop` ends the job): its worker sends pi
    `abort`, the run ends as aborted and the job is done, ready for the next message."""
    record = core.find_job(request["job"])
    proc = core.procs.get(record.id)
    aborted = bool(
        record.busy and proc is not None and proc.conn is not None and proc.conn.push(protocol.event("abort"))
    )
    return {"id": record.id, "aborted": aborted, "state": record.state.value}


async def start(core: Core, conn: Connection, request: StartRequest) -> dict[str, Any]:
    record = core.find_job(request["job"])
    proc = core.procs.get(record.id)
    if proc is not None and proc.alive:
        raise RequestError(REFUSED, _nothing_to_start(record))
    if record.recovered:
        raise RequestError(REFUSED, f"job {record.id} cannot be started: {record.error}")
    if record.state == JobState.WAITING:
        raise RequestError(
            REFUSED, f"job {record.id} is {record.status}: it starts by itself when they let it go"
        )
    if core.deps.never_given(record):
        raise RequestError(
            REFUSED,
            f"job {record.id} never got its task "
            f"({record.error or 'stopped while it waited'}): "
            "roost run it again",
        )
    env = request_env(request)
    if env is not None:  # the caller's environment from now on (README: A job's environment)
        try:
            jobenv.save(record.dir, env, "roost start")
        except OSError as exc:
            raise RequestError(REFUSED, f"job {record.id}: cannot keep its environment: {exc}") from None
    if record.kind == JobKind.SHELL:
        for stale in ("exit.json",):
            Path(record.dir, stale).unlink(missing_ok=True)
    if (held := held_by_other(record)) is not None:  # its worker would refuse it too
        raise RequestError(REFUSED, f"job {record.id} cannot start: {held.message(record.id)}")
    record.process.crashes = []
    core.start_worker(record, "roost start")
    proc = core.procs.get(record.id)
    if record.state == JobState.FAILED and (proc is None or not proc.alive):
        raise RequestError(REFUSED, f"job {record.id} cannot start: {record.error}")
    return {"id": record.id, "state": record.state.value}


async def rm(core: Core, conn: Connection, request: RmRequest) -> dict[str, Any]:
    record = core.find_job(request["job"])
    force, delete_branch = bool(request.get("force")), bool(request.get("deleteBranch"))
    await worktrees.check_removable(record, force, delete_branch)
    proc = core.procs.get(record.id)
    # Decided before the worker stops: its exit moves the record to `stopped`.
    was_stopped = record.state == JobState.STOPPED
    core.deps.removing(record)  # the jobs waiting on it: removed, not stopped
    if proc is not None:
        await proc.stop("removed", core.settings().stopTimeoutSeconds)
        proc.forget()
    # Whatever still holds its locks (the worker of an unreadable record and its pi, a
    # stranger) goes too: nothing runs on in a deleted folder.
    await asyncio.to_thread(stop_leftovers, record)
    # Its agent may have written until it stopped: asked again, now that it cannot.
    await worktrees.check_removable(record, force, delete_branch)
    if not was_stopped:
        core.agents.job_ended(record, "removed")
    budget.on_removed(core, record)  # `roost usage` keeps its figures
    unfinished = worktrees.checkout_pending(record)
    core.search.removed(record)  # its last lines read and its entries kept (search --all)
    core.forget_job(record)
    shutil.rmtree(record.dir, ignore_errors=True)
    core.job_changed(record, persist=False)
    notes = await worktrees.remove(record, force, delete_branch, unfinished)
    return {"id": record.id, "removed": True, "worktree": notes}


async def subscribe(core: Core, conn: Connection, request: NoArgs) -> dict[str, Any]:
    core.subscribers.add(conn)
    return {"jobs": all_rows(core)}


def handlers(core: Core) -> dict[str, Handler]:
    return bind(
        core,
        {
            "status": status,
            "shutdown": shutdown,
            "run": run,
            "list": list_jobs,
            "show": show,
            "reply": reply,
            "wait": wait,
            "wait_jobs": wait_jobs,
            "stop": stop,
            "abort": abort,
            "start": start,
            "rm": rm,
            "subscribe": subscribe,
        },
    )
