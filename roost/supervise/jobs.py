"""Creating and launching jobs: what `run`, `spawn` and `/roost-bg`'s hand-off share.

`create_job` validates a request and builds the record; `launch` writes it and starts its
worker (all or nothing); `resolve_agent` picks the agent definition; `strip_controls`
makes agent- or user-written text safe for a one-line name."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.host import paths
from roost.job import env as jobenv
from roost.job.record import JobRecord, Links
from roost.job.states import ItemKind, JobKind, JobState, RunCause
from roost.mailbox import InvalidItem, MailboxError
from roost.mailbox.item import checked_body
from roost.supervise.jobstore import new_job_id
from roost.text import unicode
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError

if TYPE_CHECKING:
    from roost.definitions.rules import Definition
    from roost.supervise.core import Core

log = logging.getLogger(__name__)

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


def strip_controls(text: str) -> str:
    return "".join(" " if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 else ch for ch in text)


def checked_name(core: Core, value: str) -> str:
    """A chosen name as roost keeps it (README: names): NFKC-normalised, at most NAME_MAX,
    one script, no control, bidi or invisible character (a terminal shows names: `roost
    ls`, the view, envelopes), and no look-alike of another job's name or id (equal UTS #39
    skeletons: Cyrillic `а` for `a`), which later commands and peers would take for it."""
    try:
        name = unicode.clean_name(value)
    except ValueError as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None
    if len(name) > NAME_MAX:
        raise RequestError(BAD_REQUEST, f"name must be at most {NAME_MAX} chars")
    others: dict[str, str] = {}
    for record in core.jobs.values():
        others.setdefault(record.name, f"{ascii(record.name)}, the name of job {record.id}")
        others.setdefault(record.id, f"{record.id!r}, the id of a job")
    imitated = unicode.imitates(name, others)
    if imitated:
        raise RequestError(
            BAD_REQUEST,
            f"name {ascii(name)} looks like {imitated}: choose a name that does not imitate another",
        )
    return name


def default_name(text: str) -> str:
    first = " ".join(unicode.shown_name(text).split())
    return first[:40].rstrip() or "job"


def resolve_agent(
    request: dict[str, Any], cwd: str, parent_tools: tuple[str, ...] | None = None
) -> Definition | None:
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


def create_job(
    core: Core,
    request: dict[str, Any],
    parent_tools: tuple[str, ...] | None = None,
    links: Links | None = None,
    resolve_after: Callable[[str], JobRecord] | None = None,
) -> JobRecord:
    """Validate a run/spawn request and create (but not start) its job record.

    `parent_tools`: a spawning job's tool allowlist (a child never gets more).
    `resolve_after`: how `after` names its jobs (default: any job, by id or name)."""
    shell = bool(request.get("shell"))
    cwd = _text_arg(request, "cwd") or os.getcwd()
    if not os.path.isabs(cwd):
        raise RequestError(BAD_REQUEST, f"cwd must be an absolute path, got {cwd!r}")
    if not os.path.isdir(cwd):
        raise RequestError(BAD_REQUEST, f"cwd {cwd!r} is not a directory")
    name = _text_arg(request, "name")
    if name is not None:
        name = checked_name(core, name)
    job_id = new_job_id(set(core.jobs))
    if shell:
        command = request.get("command")
        if not isinstance(command, list) or not command or not all(isinstance(part, str) for part in command):
            raise RequestError(BAD_REQUEST, "a shell job needs command: a non-empty list of strings")
        record = JobRecord(
            id=job_id,
            name=name or default_name(" ".join(command)),
            kind=JobKind.SHELL,
            cwd=cwd,
            command=command,
            summary=" ".join(strip_controls(" ".join(command)).split())[:120],
        )
    else:
        from roost.definitions.rules import compose_task, pick
        from roost.job.results import task_note

        task = _text_arg(request, "task", required=True)
        assert task is not None
        if not task.strip():  # a model would be asked to do nothing
            raise RequestError(BAD_REQUEST, "the task is empty (only whitespace)")
        defn = resolve_agent(request, cwd, parent_tools)
        # Explicit model/thinking > the definition's > the spawner's current ones.
        model = pick(_text_arg(request, "model"), defn, "model", _text_arg(request, "defaultModel"))
        thinking = pick(
            _text_arg(request, "thinking"), defn, "thinking", _text_arg(request, "defaultThinking")
        )
        schema = output_schema(request, defn)
        full = compose_task(defn, task) + (task_note(schema) if schema is not None else "")
        try:  # the task becomes the first mailbox item: refuse now what the post would
            checked_body(ItemKind.REPLY.value, full, None, {"cause": RunCause.TASK.value})
        except InvalidItem as exc:
            raise RequestError(BAD_REQUEST, f"task refused: {exc}") from None
        if thinking is not None and thinking not in THINKING_LEVELS:
            raise RequestError(BAD_REQUEST, f"thinking must be one of {', '.join(THINKING_LEVELS)}")
        record = JobRecord(
            id=job_id,
            name=name or default_name(task),
            kind=JobKind.PI,
            cwd=cwd,
            task=full,
            model=model,
            thinking=thinking,
            output_schema=schema,
            summary=default_name(task),
            agent=_text_arg(request, "agent"),
            agent_def=defn.to_json() if defn else None,
            session=str(paths.job_dir(job_id) / "session.jsonl"),
            links=links or Links(),
        )
        record.approvals = approval_policy(core, request, defn, record.links)
        record.sandbox = sandbox_policy(core, request, defn, record.links, cwd)
    core.deps.hold(record, request, resolve_after or core.find_job)  # `after`: born waiting
    return record


def sandbox_policy(
    core: Core, request: dict[str, Any], defn: Definition | None, links: Links, cwd: str
) -> dict[str, Any] | None:
    """The job's bubblewrap sandbox (roost.sandbox.compose): a sandboxed parent's child is
    sandboxed too, inside its parent's writable folders; a sandbox is refused here, not at
    its start, when roostd finds no working bwrap on the caller's PATH."""
    from roost import sandbox

    settings = core.settings()
    parent = core.jobs.get(links.parent_peer) if links.spawned and links.parent_peer else None
    boxed = parent.sandbox if parent is not None else None
    if (
        boxed is not None
        and parent is not None
        and not request.get("worktree")
        and not sandbox.child_cwd_allowed(cwd, parent.cwd, boxed)
    ):
        raise RequestError(
            BAD_REQUEST,
            f"a sandboxed job's child works inside its parent's writable folders: {cwd} is outside them",
        )
    on = request.get("sandbox")
    network = _text_arg(request, "sandboxNetwork")
    try:
        policy = sandbox.compose(
            on if isinstance(on, bool) else None,
            network,
            bool(defn is not None and defn.sandbox),
            settings.sandbox,
            settings.sandboxNetwork,
            settings.sandboxWritable,
            boxed,
        )
        if policy is not None:  # the job's PATH, roostd's ROOST_BWRAP (as its worker will)
            env = request.get("env")
            env = dict(env) if isinstance(env, dict) and env.get("PATH") else dict(os.environ)
            env.pop(sandbox.BWRAP_VAR, None)
            if os.environ.get(sandbox.BWRAP_VAR):
                env[sandbox.BWRAP_VAR] = os.environ[sandbox.BWRAP_VAR]
            sandbox.check(env, policy["network"])
    except sandbox.SandboxError as exc:
        raise RequestError(REFUSED, str(exc)) from None
    return policy


def approval_policy(
    core: Core, request: dict[str, Any], defn: Definition | None, links: Links
) -> dict[str, Any] | None:
    """The job's approval policy (roost.approvals.callrules.compose). A spawned child's request
    comes from a model: it may only add ask and deny rules, and gets at least its parent
    job's policy (no escalation)."""
    from roost.approvals.callrules import BadRule, compose

    settings = core.settings()
    parent = core.jobs.get(links.parent_peer) if links.spawned and links.parent_peer else None
    if links.spawned:
        request = {kind: request.get(kind) for kind in ("ask", "deny")}
    try:
        return compose(
            request,
            defn.approvals if defn is not None else None,
            defn is not None and defn.source == "project",
            settings.approvals,
            dict(settings.approvalRules),
            settings.approvalTimeout,
            parent.approvals if parent is not None else None,
        )
    except BadRule as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None


def output_schema(request: dict[str, Any], defn: Definition | None) -> dict[str, Any] | None:
    """The JSON Schema the job's answers are checked against: the request's
    `output_schema` (an object, or its JSON text: a model may send either), else the agent
    definition's; a schema that cannot be used is refused with why (roost.job.results)."""
    from roost.job.results import BadSchema, check_schema

    schema = request.get("output_schema")
    if schema is None:
        # A definition's file name was read into the schema when the definition was loaded.
        return defn.output_schema if defn is not None and isinstance(defn.output_schema, dict) else None
    if isinstance(schema, str):
        import json

        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise RequestError(BAD_REQUEST, f"output_schema is not JSON: {exc}") from None
    try:
        return check_schema(schema)
    except BadSchema as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None


def request_env(request: dict[str, Any]) -> dict[str, str] | None:
    """The `env` a client sent (roost's own names dropped), None when it sent none."""
    try:
        return jobenv.checked(request.get("env"))
    except jobenv.BadEnvironment as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None


def launch(
    core: Core,
    record: JobRecord,
    task_sender: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    env_source: str = "roost run",
) -> None:
    """Create the job's directory and record (and its environment, `env`), queue its task
    as the first item, start its worker. All or nothing: if the record or the task cannot
    be written, nothing of the job is left (no record that stays `starting` for ever).
    Past the limits (roost.supervise.jobqueue) the job is born `queued`: its record says
    so before it is first saved, so no roostd ever starts it out of turn. A job that waits
    on others (`after`) gets its task and its worker when they let it go (core.deps)."""
    waiting = record.state == JobState.WAITING
    queued = not waiting and not core.queue.admit(record, "new job")
    paths.ensure_dir(record.dir)
    try:
        if env is not None:  # before the worker can start: it reads it before pi
            jobenv.save(record.dir, env, env_source)
        if record.kind == JobKind.PI and not waiting:
            assert record.task is not None
            # The task goes in before the record: a roostd killed in between leaves a
            # directory without job.json, which no one lists or starts.
            core.mailbox(record).post(
                kind=ItemKind.REPLY.value, text=record.task, sender=task_sender, cause=RunCause.TASK.value
            )
        core.add_job(record)
        record.save()
    except (OSError, MailboxError) as exc:
        core.forget_job(record)
        shutil.rmtree(record.dir, ignore_errors=True)
        if isinstance(exc, InvalidItem):
            raise RequestError(BAD_REQUEST, f"task refused: {exc}") from None
        raise
    if waiting:
        core.deps.launched(record)
    elif queued:
        core.job_changed(record, persist=False)  # its row, with its place; saved above
    else:
        core.start_worker(record, "new job")


def agent_catalog(cwd: str) -> str | None:
    """roost_spawn's list of agents for a job in `cwd` (read when its worker starts, so
    new definitions show after a restart); refreshes the foreground pi's cached list."""
    from roost.definitions import rules, store

    try:
        store.write_catalog_cache()
        return rules.catalog(store.load(cwd))
    except Exception:  # a broken definition file must never keep a job from starting
        log.exception("could not list the agent definitions for %s", cwd)
        return None
