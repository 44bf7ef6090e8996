"""roostd's schedule operations: schedule_add, schedule_ls, schedule_show, schedule_rm,
schedule_pause, schedule_resume, schedule_run_now (README: Schedules).

These check a request and build the `Schedule`; the timers, watches and firings are
`roost.supervise.scheduler`'s, the time rules `roost.schedules.timing`'s."""

from __future__ import annotations

import os
import re
from datetime import datetime
from typing import Any

from roost.job import env as jobenv
from roost.schedules import timing
from roost.schedules.book import Schedule, iso
from roost.schedules.timing import When
from roost.supervise.core import Core, bind
from roost.supervise.jobs import create_job
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import BAD_REQUEST, NOT_FOUND, REFUSED, RequestError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
RUN_KEYS = (
    "task",
    "cwd",
    "model",
    "thinking",
    "agent",
    "budget",
    "budgetTokens",
    "maxTurns",
    "treeBudget",
    "worktree",
    "branch",
    "base",
    "group",
    "priority",
    "output_schema",
)
"""What of `run`'s request a schedule keeps for its firings."""


def _choice(request: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = request.get(key) or allowed[0]
    if value not in allowed:
        raise RequestError(BAD_REQUEST, f"{key} must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def local_zone(env: dict[str, str] | None) -> str:
    """The caller's zone: its TZ (an IANA name), else the machine's (/etc/localtime)."""
    tz = (env or {}).get("TZ", "").lstrip(":")
    try:
        return timing.zone(tz).key if tz else local_zone_of_machine()
    except ValueError:  # a POSIX TZ rule (`CET-1CEST`) names no zone: the machine's
        return local_zone_of_machine()


def local_zone_of_machine() -> str:
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        return "UTC"
    return target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "UTC"


def _when(request: dict[str, Any], tz: str, now: float) -> tuple[When, str]:
    """The schedule's trigger and how the person wrote it."""
    given = [k for k in ("cron", "every", "at", "onChange") if request.get(k)]
    if len(given) != 1:
        raise RequestError(BAD_REQUEST, "give one of cron, every, at, onChange")
    kind, value = given[0], request[given[0]]
    try:
        zone = timing.zone(tz)
        if kind == "cron":
            expr = timing.check_cron(str(value))
            return When("cron", expr, tz, now), expr
        if kind == "every":
            seconds = timing.parse_duration(str(value))
            if seconds < timing.EVERY_MIN:
                raise ValueError(f"--every {value} is too often: at least {timing.EVERY_MIN:g}s")
            return When("every", repr(seconds), tz, now), str(value)
        if kind == "at":
            at = timing.parse_at(str(value), zone, now)
            if at <= now:
                raise ValueError(
                    f"--at {value} is in the past ({datetime.fromtimestamp(at, zone).isoformat()})"
                )
            return When("at", repr(at), tz, now), str(value)
    except ValueError as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None
    return When("change", "\n".join(_watched(value)), tz, now), ",".join(value)


def _watched(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise RequestError(BAD_REQUEST, "onChange must be a list of paths")
    for path in value:
        if not os.path.isabs(path):
            raise RequestError(BAD_REQUEST, f"onChange: {path!r} is not an absolute path")
        if not os.path.exists(path):
            raise RequestError(BAD_REQUEST, f"onChange: {path} does not exist")
    return list(dict.fromkeys(value))


async def schedule_add(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    name = str(request["name"])
    if not NAME.fullmatch(name):
        raise RequestError(
            BAD_REQUEST,
            f"schedule name {name!r}: 1 to 40 letters, digits, "
            "`.`, `_` or `-`, starting with a letter or digit",
        )
    if name in core.schedules.schedules:
        raise RequestError(
            REFUSED,
            f"a schedule named {name!r} exists: `roost schedule rm {name}` first, or choose another name",
        )
    try:
        env = jobenv.checked(request.get("env"))
    except jobenv.BadEnvironment as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None
    run = request["run"]
    if not isinstance(run, dict) or set(run) - set(RUN_KEYS):
        raise RequestError(
            BAD_REQUEST, f"run must be an object with at most these keys: {', '.join(RUN_KEYS)}"
        )
    run = {k: v for k, v in run.items() if v is not None}
    create_job(core, run)  # checks the run now (cwd, task, agent, thinking): made at each firing
    try:
        debounce = timing.parse_duration(str(request.get("debounce") or "2s"))
    except ValueError as exc:
        raise RequestError(BAD_REQUEST, f"debounce: {exc}") from None
    tz = str(request.get("tz") or local_zone(env))
    now = core.schedules.clock()
    when, spec = _when(request, tz, now)
    schedule = Schedule(
        name=name,
        when=when,
        spec=spec,
        run=run,
        env=env,
        created=now,
        debounce=debounce,
        session=_choice(request, "session", timing.SESSIONS),
        catch_up=_choice(request, "catchUp", timing.CATCH_UP),
        overlap=_choice(request, "overlap", timing.OVERLAP),
    )
    core.schedules.add(schedule)
    return {"schedule": _row(core, schedule)}


def _find(core: Core, request: dict[str, Any]) -> Schedule:
    name = str(request["name"])
    schedule = core.schedules.schedules.get(name)
    if schedule is None:
        raise RequestError(NOT_FOUND, f"no schedule named {name!r} (roost schedule ls lists them)")
    return schedule


def _row(core: Core, schedule: Schedule, details: bool = False) -> dict[str, Any]:
    """The ScheduleRow contract (README: JSON output)."""
    when = schedule.when
    nxt = core.schedules.next_firing(schedule)
    job = core.jobs.get(schedule.last_job) if schedule.last_job else None
    row: dict[str, Any] = {
        "name": schedule.name,
        "kind": when.kind,
        "spec": schedule.spec,
        "tz": when.tz,
        "paths": when.expr.split("\n") if when.kind == "change" else None,
        "debounce": schedule.debounce if when.kind == "change" else None,
        "session": schedule.session,
        "catchUp": schedule.catch_up,
        "overlap": schedule.overlap,
        "paused": schedule.paused,
        "next": iso(nxt) if nxt is not None else None,
        "fired": schedule.fired,
        "last": None
        if schedule.last_cause is None
        else {
            "fired": iso(schedule.last_fired) if schedule.last_fired is not None else None,
            "cause": schedule.last_cause,
            "outcome": schedule.last_outcome,
            "detail": schedule.last_detail,
            "job": schedule.last_job,
            "jobState": job.state.value if job is not None else None,
        },
        "queued": len(schedule.queued),
        "created": iso(schedule.created),
        "task": schedule.run.get("task"),
        "cwd": schedule.run.get("cwd"),
    }
    if details:
        row.update(
            run={k: v for k, v in schedule.run.items() if k != "task"},
            jobs=[j["id"] for j in schedule.jobs],
            environment=sorted(schedule.env or {}),
        )  # names only: values are secrets
    return row


async def schedule_ls(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    rows = [_row(core, s) for s in sorted(core.schedules.schedules.values(), key=lambda s: s.name)]
    return {"schedules": rows}


async def schedule_show(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    return {"schedule": _row(core, _find(core, request), details=True)}


async def schedule_rm(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    schedule = _find(core, request)
    core.schedules.remove(schedule)  # its jobs stay: `roost rm` removes a job
    return {"name": schedule.name, "removed": True}


async def schedule_pause(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    schedule = _find(core, request)
    core.schedules.set_paused(schedule, True)
    return {"schedule": _row(core, schedule)}


async def schedule_resume(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    schedule = _find(core, request)
    core.schedules.set_paused(schedule, False)
    return {"schedule": _row(core, schedule)}


async def schedule_run_now(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    schedule = _find(core, request)
    event = await core.schedules.run_now(schedule)
    return {
        "outcome": event["outcome"],
        "detail": event["detail"],
        "job": event["job"]["id"] if event["job"] else None,
        "schedule": _row(core, schedule),
    }


def handlers(core: Core) -> dict[str, Handler]:
    return bind(
        core,
        {
            "schedule_add": schedule_add,
            "schedule_ls": schedule_ls,
            "schedule_show": schedule_show,
            "schedule_rm": schedule_rm,
            "schedule_pause": schedule_pause,
            "schedule_resume": schedule_resume,
            "schedule_run_now": schedule_run_now,
        },
    )
