"""roostd's job operations (what the CLI calls): run, list, show, reply, wait, stop, ..."""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roost import __version__, jobenv, paths
from roost.jobs import JobRecord
from roost.jsonlines import Connection
from roost.mailbox import InvalidItem, MailboxError
from roost.mailbox.item import checked_body
from roost.protocol import BAD_REQUEST, NOT_FOUND, REFUSED, RequestError
from roost.states import CLIENT_CAUSES, JobKind, JobState, Outcome, RunCause, run_cause
from roost.supervise import usage
from roost.supervise import worktrees as worktree_jobs
from roost.supervise.table import accept_item, held_by_other, is_settled, new_job_id

if TYPE_CHECKING:
    from roost.definitions.rules import Definition
    from roost.supervise.daemon import Daemon

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
NAME_MAX = 80


def _text_arg(request: dict[str, Any], key: str, required: bool = False) -> str | None:
    value = request.get(key)
    if value is None or value == "":
        if required:
            raise RequestError(BAD_REQUEST, f"missing {key}")
        return None
    if not isinstance(value, str):
        raise RequestError(BAD_REQUEST, f"{key} must be a string")
    return value


def has_control_chars(text: str) -> bool:
    """C0, DEL and C1 controls (ESC, newline, CSI, ...): never part of a name."""
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in text)


def strip_controls(text: str) -> str:
    return "".join(" " if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 else ch for ch in text)


def default_name(text: str) -> str:
    first = " ".join(strip_controls(text).split())
    return first[:40].rstrip() or "job"


def resolve_agent(request: dict[str, Any], cwd: str,
                  parent_tools: tuple[str, ...] | None = None) -> Definition | None:
    """The agent definition a run/spawn asks for (with a spawn's tools narrowed to the
    parent's), None without `agent`; an unknown name is refused with the available ones."""
    from dataclasses import replace

    from roost.definitions import rules, store

    name = _text_arg(request, "agent")
    if name is None:
        if parent_tools is None:
            return None
        return replace(rules.BUILTINS["worker"], tools=parent_tools)
    merged = store.load(cwd)
    defn = merged.agents.get(name)
    if defn is None:
        raise RequestError(BAD_REQUEST, rules.unknown_agent(name, merged))
    tools, refusal = rules.spawn_tools(parent_tools, defn)
    if refusal:
        raise RequestError(REFUSED, refusal)
    return replace(defn, tools=tools)


def create_job(daemon: Daemon, request: dict[str, Any],
               parent_tools: tuple[str, ...] | None = None, **links: Any) -> JobRecord:
    """Validate a run/spawn request and create (but not start) its job record.

    `parent_tools`: a spawning job's tool allowlist (a child never gets more)."""
    shell = bool(request.get("shell"))
    cwd = _text_arg(request, "cwd") or os.getcwd()
    if not os.path.isabs(cwd):
        raise RequestError(BAD_REQUEST, f"cwd must be an absolute path, got {cwd!r}")
    if not os.path.isdir(cwd):
        raise RequestError(BAD_REQUEST, f"cwd {cwd!r} is not a directory")
    name = _text_arg(request, "name")
    if name is not None:
        if len(name) > NAME_MAX:
            raise RequestError(BAD_REQUEST, f"name must be at most {NAME_MAX} chars")
        if has_control_chars(name):
            # Names are shown in terminals (`roost ls`, the view, envelopes): a name with
            # ESC or a newline could redraw the screen of whoever lists the jobs.
            raise RequestError(BAD_REQUEST, "name must not contain control characters")
    job_id = new_job_id(set(daemon.jobs))
    if shell:
        command = request.get("command")
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(part, str) for part in command)
        ):
            raise RequestError(BAD_REQUEST, "a shell job needs command: a non-empty list of strings")
        record = JobRecord(
            id=job_id, name=name or default_name(" ".join(command)), kind=JobKind.SHELL, cwd=cwd,
            command=command, summary=" ".join(strip_controls(" ".join(command)).split())[:120],
        )
    else:
        from roost.definitions.rules import compose_task, pick

        task = _text_arg(request, "task", required=True)
        assert task is not None
        if not task.strip():  # a model would be asked to do nothing
            raise RequestError(BAD_REQUEST, "the task is empty (only whitespace)")
        defn = resolve_agent(request, cwd, parent_tools)
        # Explicit model/thinking > the definition's > the spawner's current ones.
        model = pick(_text_arg(request, "model"), defn, "model",
                     _text_arg(request, "defaultModel"))
        thinking = pick(_text_arg(request, "thinking"), defn, "thinking",
                        _text_arg(request, "defaultThinking"))
        try:  # the task becomes the first mailbox item: refuse now what the post would
            checked_body("reply", compose_task(defn, task), None, {"cause": RunCause.TASK.value})
        except InvalidItem as exc:
            raise RequestError(BAD_REQUEST, f"task refused: {exc}") from None
        if thinking is not None and thinking not in THINKING_LEVELS:
            raise RequestError(
                BAD_REQUEST, f"thinking must be one of {', '.join(THINKING_LEVELS)}"
            )
        record = JobRecord(
            id=job_id, name=name or default_name(task), kind=JobKind.PI, cwd=cwd,
            task=compose_task(defn, task), model=model, thinking=thinking,
            summary=default_name(task),
            agent=_text_arg(request, "agent"), agent_def=defn.to_json() if defn else None,
            session=str(paths.job_dir(job_id) / "session.jsonl"), **links,
        )
    return record


def request_env(request: dict[str, Any]) -> dict[str, str] | None:
    """The `env` a client sent (roost's own names dropped), None when it sent none."""
    try:
        return jobenv.checked(request.get("env"))
    except jobenv.BadEnvironment as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None


def launch(daemon: Daemon, record: JobRecord, task_sender: dict[str, Any] | None = None,
           env: dict[str, str] | None = None, env_source: str = "roost run") -> None:
    """Create the job's directory and record (and its environment, `env`), queue its task
    as the first item, start its worker. All or nothing: if the record or the task cannot
    be written, nothing of the job is left (no record that stays `starting` for ever)."""
    paths.ensure_dir(record.dir)
    try:
        if env is not None:  # before the worker can start: it reads it before pi
            jobenv.save(record.dir, env, env_source)
        if record.kind == JobKind.PI:
            assert record.task is not None
            # The task goes in before the record: a roostd killed in between leaves a
            # directory without job.json, which no one lists or starts.
            daemon.mailbox(record).post(kind="reply", text=record.task, sender=task_sender,
                                        cause=RunCause.TASK.value)
        daemon.add_job(record)
        record.save()
    except (OSError, MailboxError) as exc:
        daemon.forget_job(record)
        shutil.rmtree(record.dir, ignore_errors=True)
        if isinstance(exc, InvalidItem):
            raise RequestError(BAD_REQUEST, f"task refused: {exc}") from None
        raise
    daemon.start_worker(record, "new job")


def _nothing_to_start(record: JobRecord) -> str:
    """`roost start` on a job whose worker is up: what is true, and what would help. Start
    brings a worker up; it never re-runs a task (a reply starts the next run)."""
    state = record.state
    if state in (JobState.STARTING, JobState.RUNNING):
        return f"job {record.id} is {state.value}: its worker is up, nothing to start"
    hint = {JobState.NEEDS_INPUT: f"it waits for you: roost reply {record.id} TEXT"}.get(
        state, f"roost reply {record.id} TEXT starts a new run")
    return f"job {record.id} is {state.value} and its worker is up, idle: {hint}"


def _check_chosen_name(daemon: Daemon, name: Any) -> None:
    """A name a person gives (`roost run --name`) is what later commands find the job by:
    an empty one is refused (not silently replaced), and so is one another job has (every
    later `roost wait NAME` would say "ambiguous")."""
    if name is None:
        return
    if not isinstance(name, str) or not name.strip():
        raise RequestError(BAD_REQUEST, f"name {name!r} is empty: give a name, or leave "
                                        "--name out for one made from the task")
    taken = [r for r in daemon.jobs.values() if name in (r.name, r.id)]
    if taken:
        other = taken[0]
        raise RequestError(REFUSED, f"the name {name!r} is taken by job {other.id} "
                                    f"({other.state.value}): choose another, or `roost rm "
                                    f"{other.id}` first")


WAIT_CONDITIONS = ("needs_input", "settled", "done", "failed")


def reached(daemon: Daemon, record: JobRecord, until: str) -> bool:
    """Has the job reached `until` (one of WAIT_CONDITIONS)? `done` includes `reaped`
    (a done job whose idle worker was stopped)."""
    if until == "settled":
        return is_settled(daemon, record)
    if until == "done":
        return record.state in (JobState.DONE, JobState.REAPED)
    return record.state.value == until


def handlers(daemon: Daemon) -> dict[str, Any]:
    async def status(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        return {
            "running": True,
            "pid": os.getpid(),
            "socket": str(paths.socket_path()),
            "version": __version__,
            "jobs": len(daemon.jobs),
        }

    async def shutdown(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        stopped = []
        if request.get("jobs"):
            for record in list(daemon.jobs.values()):
                if daemon.procs.get(record.id) and daemon.procs[record.id].alive:
                    await _stop(record)
                    stopped.append(record.id)
        asyncio.get_running_loop().call_soon(daemon.request_shutdown)
        return {"stopped": stopped}

    async def run(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        _check_chosen_name(daemon, request.get("name"))
        env = request_env(request)
        record = create_job(daemon, request)
        usage.apply_budget(daemon, record, request)
        await worktree_jobs.prepare(daemon, record, request, spawned=False)
        try:
            launch(daemon, record, env=env)
        except BaseException:
            await worktree_jobs.discard(record)
            raise
        # pi's agent dir is roostd's, whatever the caller's says: the CLI warns on a mismatch.
        return {"id": record.id, "name": record.name, "agentDir": str(paths.agent_dir())}

    async def list_jobs(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        rows = [daemon.row(r) for r in sorted(daemon.jobs.values(), key=lambda r: r.created)]
        return {"jobs": rows}

    async def show(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        proc = daemon.procs.get(record.id)
        row = daemon.row(record)
        row.update(
            task=record.task, command=record.command, model=record.model,
            agentDefinition=record.agent_def,
            thinking=record.thinking, error=record.error, exitCode=record.exit_code,
            worker={"pid": record.worker_pid, "state": proc.state.value if proc else "stopped",
                    "crashes": len(record.crashes)},
            dir=str(record.dir), mailbox=str(record.mailbox_dir), depth=record.depth,
            environment=jobenv.summary(record.dir),  # names only: the values are secrets
        )
        return {"job": row}

    async def reply(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        text = request["text"]
        if not isinstance(text, str) or not text.strip():
            raise RequestError(BAD_REQUEST, "the reply text is empty")
        try:
            # What started a run decides whether it reports to a parent: a client says at
            # most that it is a user reply; `task` is the job's own first item only.
            cause = run_cause(request.get("cause", "reply"), CLIENT_CAUSES)
        except ValueError as exc:
            raise RequestError(BAD_REQUEST, str(exc)) from None
        outcome = accept_item(daemon, record, "reply", text, cause=cause.value)
        answer = {"status": outcome.value, "id": record.id}
        if outcome == Outcome.QUEUED and record.state == JobState.FAILED and record.error:
            answer["why"] = record.error  # no run starts for it until `roost start`
        return answer

    async def wait(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        timeout = request.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float)
            or not math.isfinite(timeout) or timeout < 0
        ):
            raise RequestError(BAD_REQUEST, f"timeout must be a number of seconds >= 0, "
                                            f"got {timeout!r}")
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        while not is_settled(daemon, record):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return {"settled": False, "row": daemon.row(record)}
            if record.id not in daemon.jobs:
                raise RequestError(NOT_FOUND, f"job {record.id} was removed")
            await daemon.wait_change(record, left)
        return {"settled": True, "row": daemon.row(record)}

    async def wait_jobs(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        refs = request["jobs"]
        if not isinstance(refs, list) or not refs:
            raise RequestError(BAD_REQUEST, "jobs must be a non-empty list of job ids or names")
        until, mode = request["until"], request.get("mode", "any")
        if until not in WAIT_CONDITIONS:
            raise RequestError(BAD_REQUEST, f"until must be one of {', '.join(WAIT_CONDITIONS)}")
        if mode not in ("any", "all"):
            raise RequestError(BAD_REQUEST, "mode must be any or all")
        records = list({r.id: r for r in (daemon.find_job(str(ref)) for ref in refs)}.values())
        timeout = request.get("timeout")
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        while True:
            for record in records:
                if record.id not in daemon.jobs:
                    raise RequestError(NOT_FOUND, f"job {record.id} was removed")
            hits = [r for r in records if reached(daemon, r, until)]
            if hits if mode == "any" else len(hits) == len(records):
                return {"reached": True, "jobs": [daemon.row(r) for r in hits]}
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return {"reached": False, "jobs": [daemon.row(r) for r in hits],
                        "waiting": [daemon.row(r) for r in records if r not in hits]}
            await daemon.wait_any_change(left)

    async def _stop(record: JobRecord, reason: str = "stopped") -> None:
        proc = daemon.procs.get(record.id)
        was_stopped = record.state == JobState.STOPPED
        if not was_stopped:
            daemon.set_state(record, JobState.STOPPED, reason, busy=False, dialog=False,
                             status="")
        if proc is not None:
            await proc.stop(reason, daemon.settings().stopTimeoutSeconds)
        if not was_stopped:  # one `ended` report per stop, not one per `roost stop` call
            daemon.agents.job_ended(record, reason)

    async def stop(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        was = record.state.value
        await _stop(record)
        return {"id": record.id, "was": was, "state": record.state.value}

    async def start(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        proc = daemon.procs.get(record.id)
        if proc is not None and proc.alive:
            raise RequestError(REFUSED, _nothing_to_start(record))
        if record.recovered:
            raise RequestError(REFUSED, f"job {record.id} cannot be started: {record.error}")
        env = request_env(request)
        if env is not None:  # the caller's environment from now on (README: A job's environment)
            try:
                jobenv.save(record.dir, env, "roost start")
            except OSError as exc:
                raise RequestError(REFUSED, f"job {record.id}: cannot keep its "
                                            f"environment: {exc}") from None
        if record.kind == JobKind.SHELL:
            for stale in ("exit.json",):
                Path(record.dir, stale).unlink(missing_ok=True)
        if (held := held_by_other(record)) is not None:  # its worker would refuse it too
            raise RequestError(REFUSED, f"job {record.id} cannot start: {held.message(record.id)}")
        record.crashes = []
        daemon.start_worker(record, "roost start")
        return {"id": record.id, "state": record.state.value}

    async def rm(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        record = daemon.find_job(str(request["job"]))
        force, delete_branch = bool(request.get("force")), bool(request.get("deleteBranch"))
        await worktree_jobs.check_removable(record, force, delete_branch)
        proc = daemon.procs.get(record.id)
        # Decided before the worker stops: its exit moves the record to `stopped`.
        was_stopped = record.state == JobState.STOPPED
        if proc is not None:
            await proc.stop("removed", daemon.settings().stopTimeoutSeconds)
            proc.forget()
        # Its agent may have written until it stopped: asked again, now that it cannot.
        await worktree_jobs.check_removable(record, force, delete_branch)
        if not was_stopped:
            daemon.agents.job_ended(record, "removed")
        usage.on_removed(daemon, record)  # `roost usage` keeps its figures
        unfinished = worktree_jobs.checkout_pending(record)
        daemon.forget_job(record)
        shutil.rmtree(record.dir, ignore_errors=True)
        daemon.job_changed(record, persist=False)
        notes = await worktree_jobs.remove(record, force, delete_branch, unfinished)
        return {"id": record.id, "removed": True, "worktree": notes}

    async def subscribe(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        daemon.subscribers.add(conn)
        rows = [daemon.row(r) for r in sorted(daemon.jobs.values(), key=lambda r: r.created)]
        return {"jobs": rows}

    return {
        "status": status,
        "shutdown": shutdown,
        "run": run,
        "list": list_jobs,
        "show": show,
        "reply": reply,
        "wait": wait,
        "wait_jobs": wait_jobs,
        "stop": stop,
        "start": start,
        "rm": rm,
        "subscribe": subscribe,
    }
