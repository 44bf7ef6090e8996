"""`roost events` and `roost wait --any/--all` on the CLI side: reading the event log,
following it through roostd, and one readable line per event."""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import datetime
from typing import Any

import click

from roost.display import output
from roost.events import log as eventlog
from roost.host import paths
from roost.wire.protocol import EVENT_TYPES

_TIME = re.compile(
    r"(\d{4})(?:-(\d\d)(?:-(\d\d)(?:T(\d\d)(?::(\d\d)(?::(\d\d)(?:\.\d{1,3})?)?)?"
    r"Z?)?)?)?"
)
SINCE_WANTED = "a seq (e.g. 120) or a UTC time, any prefix of 2026-11-30T11:20:00.123Z"


def since_arg(value: str | None) -> tuple[int | None, str | None]:
    """`--since`: a seq (an integer) or a time (ISO-8601 UTC, any prefix of
    2026-11-30T11:20:00.123Z; a space may stand for the T). A usage error otherwise: a
    word such as `yesterday` would compare as a string and match nothing."""
    if value is None:
        return None, None
    if value.isdigit():
        return int(value), None
    text = value.strip().replace(" ", "T")
    found = _TIME.fullmatch(text)
    if found is None:
        raise click.BadParameter(f"{value!r} is not {SINCE_WANTED}", param_hint="'--since'")
    parts = [
        int(part) if part else default
        for part, default in zip(found.groups(), (0, 1, 1, 0, 0, 0), strict=True)
    ]
    try:
        datetime(parts[0], parts[1], parts[2], parts[3], parts[4], parts[5])
    except ValueError as exc:
        raise click.BadParameter(
            f"{value!r} is not a time ({exc}): give {SINCE_WANTED}", param_hint="'--since'"
        ) from None
    return None, text


def type_args(types: tuple[str, ...]) -> list[str] | None:
    """`--type`: event types, or prefixes ending in `.` of at least one type; a usage error
    for anything else (it would match nothing, for ever)."""
    for kind in types:
        if kind not in EVENT_TYPES and not (
            kind.endswith(".") and any(t.startswith(kind) for t in EVENT_TYPES)
        ):
            prefixes = sorted({t.split(".")[0] + "." for t in EVENT_TYPES})
            raise click.BadParameter(
                f"{kind!r} is not an event type: {', '.join(EVENT_TYPES)}, or a prefix "
                f"({', '.join(prefixes)})",
                param_hint="'--type'",
            )
    return list(types) or None


def _peer(value: Any) -> str:
    if isinstance(value, dict):
        return f"{value.get('name')} ({value.get('id')})"
    return "-"


def describe(event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind == "job.created":
        parent = f", parent {event['parent']}" if event.get("parent") else ""
        return f"created ({event.get('kind')}) in {event.get('cwd')}{parent}"
    if kind == "job.state":
        reason = f": {event['reason']}" if event.get("reason") else ""
        return f"{event.get('from')} -> {event.get('to')}{reason}"
    if kind == "job.needs_input":
        options = event.get("options")
        listing = f" [{' | '.join(options)}]" if options else ""
        return f"asks: {event.get('question') or ''}{listing}"
    if kind == "job.report":
        return (
            f"{event.get('kind')} to {_peer(event.get('to'))} ({event.get('outcome')}): "
            f"{event.get('firstLine') or ''}"
        )
    if kind == "job.failed":
        return f"failed: {event.get('error') or ''}"
    if kind == "job.result":
        if event.get("large"):
            return f"result of {event.get('size')} bytes (roost result {(event.get('job') or {}).get('id')})"
        return "result: " + json.dumps(event.get("result"), ensure_ascii=False, separators=(",", ":"))
    if kind == "job.removed":
        return "removed"
    if kind == "job.waiting":
        return f"waiting ({event.get('mode')}) on {', '.join(map(str, event.get('after') or []))}"
    if kind == "job.unblocked":
        ended = event.get("ended") or {}
        return "unblocked: " + ", ".join(f"{job} {how}" for job, how in ended.items())
    if kind == "message.sent":
        return f"{_peer(event.get('from'))} -> {_peer(event.get('to'))}: {event.get('outcome')}"
    if kind in ("worker.crashed", "worker.gave_up"):
        return str(event.get("reason") or "")
    if kind == "schedule.fired":
        detail = f": {event['detail']}" if event.get("detail") else ""
        changed = f" ({len(event['paths'])} changed paths)" if event.get("paths") else ""
        return (
            f"schedule {event.get('schedule')} fired ({event.get('cause')}, due "
            f"{event.get('due')}): {event.get('outcome')}{detail}{changed}"
        )
    if kind == "daemon.started":
        return f"roostd {event.get('version')} pid {event.get('pid')}"
    if kind == "daemon.stopped":
        return f"roostd pid {event.get('pid')}"
    rest = {k: v for k, v in event.items() if k not in ("seq", "time", "type", "job")}
    return json.dumps(rest, ensure_ascii=False)


def line(event: dict[str, Any]) -> str:
    job = event.get("job")
    who = f"{job.get('id')} {job.get('name')}" if isinstance(job, dict) else "-"
    return f"{event.get('time')}  #{event.get('seq'):<5} {event.get('type'):<16} {who}  {describe(event)}"


def pane_line(event: dict[str, Any]) -> str:
    """An event as `roost view`'s events pane shows it in 80 columns: the time as HH:MM:SS,
    the type, the job's name, what happened (`line` is the log's full form)."""
    job = event.get("job")
    who = (job.get("name") or job.get("id")) if isinstance(job, dict) else "-"
    stamp = str(event.get("time") or "")[11:19]
    return f"{stamp} {event.get('type')} {who}: {describe(event)}"


def print_events(
    follow: bool, since_value: str | None, types: tuple[str, ...], job: str | None, as_json: bool
) -> None:
    from roost.display.exits import fail
    from roost.host.trusted import home_problem

    if problem := home_problem(paths.roost_home()):  # another user's log: not read
        fail(problem)
    since, since_time = since_arg(since_value)
    kinds = type_args(types)
    last = 0

    def emit(event: dict[str, Any]) -> None:
        click.echo(
            output.json_text(event, indent=None, compact=True) if as_json else output.field(line(event))
        )

    if not follow or since is not None or since_time is not None:
        # History straight from the files (roostd not needed); `last` is where following
        # resumes, whether or not the filter printed anything.
        for event in eventlog.read_events(paths.roost_home(), since or 0, since_time):
            last = event["seq"]
            if eventlog.matches(event, kinds, job):
                emit(event)
        if since is not None:
            last = max(last, since)
    if not follow:
        return
    from roost.wire.client import DaemonUnavailable, ForeignDaemon, connect
    from roost.wire.protocol import RequestError

    # Without --since: from now on. "Now" is the log's last seq, and roostd sends what
    # came after it, so an event between this read and the subscription is not lost.
    resume = (
        last if (since is not None or since_time is not None) else (eventlog.last_seq(paths.roost_home()))
    )
    first = True
    while True:  # reconnects (roostd restarted) resume at the last seq seen
        try:
            # Only the first connection starts roostd: a `roost daemon stop` must not be
            # undone by a follower; it waits for the next roostd instead.
            client = connect(autostart=first, timeout=15.0 if first else 0.5)
        except ForeignDaemon as exc:
            fail(str(exc))
        except DaemonUnavailable:
            if first:
                raise click.ClickException("roostd is not running and could not be started") from None
            time.sleep(0.5)  # roostd is down (restarting): try again; no events meanwhile
            continue
        first = False
        try:
            with client:
                for event in client.follow({"since": resume, "types": kinds, "job": job}):
                    if event["seq"] <= resume:
                        continue  # never twice
                    resume = event["seq"]
                    emit(event)
                    sys.stdout.flush()
        except RequestError as exc:
            raise click.ClickException(exc.message) from None
        except (DaemonUnavailable, ConnectionError, OSError):
            continue
