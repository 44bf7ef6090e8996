"""The time rules of schedules, pure: when a schedule fires next, which firings were
missed, what `--catch-up` makes of them, and the debounce of a file trigger.

Nothing here reads a clock: every function is given `now` (epoch seconds), and
`Debounce` its clock, so the rules (DST included) are tested with a fake one. Cron
expressions are evaluated by cronsim in the schedule's own zone (zoneinfo), with Debian
cron's rules at a DST change: a time the clock skips fires at the first minute after the
gap, a time the clock passes twice fires once (an expression with `*` in its minute or
hour field fires in both passes, as it names every minute).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

KINDS = ("cron", "every", "at", "change")
CATCH_UP = ("one", "none", "all")
OVERLAP = ("skip", "queue")
SESSIONS = ("new", "same")

EVERY_MIN = 1.0
"""The shortest --every, in seconds (a firing is a run of an agent: more is a mistake)."""
CATCH_UP_MAX = 24
"""`--catch-up all` fires at most this many missed firings (the latest ones); a day of
a one-minute schedule missed is not 1,440 runs."""
ON_TIME = 10.0
"""A timer that finds a firing this late (seconds) or less finds it on time (cause `time`);
later, it was missed (the machine slept) and `--catch-up` decides. What fell due while
roostd was down was missed, however recent."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def parse_duration(text: str) -> float:
    """`30m`, `2s`, `1h30m`, `1d`, `1.5h` as seconds; ValueError says what is accepted."""
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    if not spec or "".join(n + u for n, u in parts) != spec:
        raise ValueError(
            f"{text!r} is not a duration: use a number and a unit, s, m, h or d (30s, 15m, 1h30m, 1d)"
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


def zone(name: str) -> ZoneInfo:
    """The time zone named `name` (IANA, such as Europe/Berlin); ValueError if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {name!r}: give an IANA name such as Europe/Berlin or UTC"
        ) from None


def check_cron(expr: str) -> str:
    """The expression as kept (five fields, spaces normalised); ValueError if invalid."""
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(
            f"cron expression {expr!r} must have 5 fields: minute hour day-of-month month day-of-week"
        )
    try:
        CronSim(" ".join(fields), datetime(2026, 1, 1))
    except CronSimError as exc:
        raise ValueError(f"cron expression {expr!r}: {exc}") from None
    return " ".join(fields)


def parse_at(text: str, tz: ZoneInfo, now: float) -> float:
    """`--at`: an ISO date and time (`2026-12-24T07:00`, `2026-12-24 07:00`) or a time of
    day (`07:00`: the next one), in the schedule's zone, unless it names its own offset."""
    spec = text.strip()
    if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", spec):
        today = datetime.fromtimestamp(now, tz).date().isoformat()
        when = _local(datetime.fromisoformat(f"{today}T{spec.zfill(5)}"), tz)
        return (
            when
            if when > now
            else _local(datetime.fromtimestamp(when, tz).replace(tzinfo=None) + timedelta(days=1), tz)
        )
    try:
        moment = datetime.fromisoformat(spec)
    except ValueError:
        raise ValueError(
            f"--at {text!r} is not a time: give HH:MM or an ISO date and time (2026-12-24T07:00)"
        ) from None
    if moment.tzinfo is not None:
        return moment.timestamp()
    return _local(moment, tz)


def _local(naive: datetime, tz: ZoneInfo) -> float:
    """A wall-clock time in `tz` as epoch seconds; a time the clock skips at a DST change
    counts as the same time after the gap (fold=0 reads it with the offset before it)."""
    return naive.replace(tzinfo=tz).timestamp()


@dataclass(frozen=True)
class When:
    """What a schedule fires on: `cron` (expr: the expression), `every` (expr: seconds),
    `at` (expr: epoch seconds) or `change` (expr: the paths, fired by the watcher only);
    `tz` the zone its times are read in; `anchor` where an `every` counts from."""

    kind: str
    expr: str
    tz: str
    anchor: float

    def next_after(self, after: float) -> float | None:
        """The first firing strictly after `after` (None: never again, or not timed)."""
        if self.kind == "cron":
            start = datetime.fromtimestamp(after, zone(self.tz))
            return next(CronSim(self.expr, start)).timestamp()
        if self.kind == "every":
            period = float(self.expr)
            steps = int((after - self.anchor) // period) + 1 if after >= self.anchor else 0
            return self.anchor + max(steps, 0) * period
        if self.kind == "at":
            at = float(self.expr)
            return at if at > after else None
        return None

    def due(self, since: float, now: float, limit: int = CATCH_UP_MAX + 1) -> list[float]:
        """The firings in (since, now], at most the last `limit` of them (oldest first)."""
        found: list[float] = []
        if self.kind == "every":  # arithmetic: a long absence costs nothing to count
            period = float(self.expr)
            last = self.next_after(now)
            assert last is not None
            times = [last - k * period for k in range(1, limit + 1)]
            return sorted(t for t in times if since < t <= now and t >= self.anchor)
        if self.kind == "cron":  # backwards from now: a long absence costs `limit` steps
            # (from a second past now: the first step back is a whole second)
            back = CronSim(self.expr, datetime.fromtimestamp(now + 1, zone(self.tz)), reverse=True)
            for moment in back:
                if moment.timestamp() <= since or len(found) == limit:
                    break
                if moment.timestamp() <= now:
                    found.append(moment.timestamp())
            return found[::-1]
        at = self.next_after(since)
        return [at] if at is not None and at <= now else []


def firings(
    due: list[float], now: float, catch_up: str, grace: float | None = ON_TIME
) -> list[tuple[float, str]]:
    """What fires of `due` (oldest first) at `now`: each as (due time, cause). The latest,
    if it is on time (at most `grace` late; None: nothing is, after a restart), fires
    (`time`) and stands for the missed ones under `one`; the missed ones fire as
    `catch-up`: the latest of them (`one`), none, or all of them up to CATCH_UP_MAX (`all`)."""
    if not due:
        return []
    on_time = due[-1] if grace is not None and now - due[-1] <= grace else None
    missed = due[:-1] if on_time is not None else due
    out: list[tuple[float, str]] = []
    if catch_up == "all":
        out = [(t, "catch-up") for t in missed[-CATCH_UP_MAX:]]
    elif catch_up == "one" and missed and on_time is None:
        out = [(missed[-1], "catch-up")]
    if on_time is not None:
        out.append((on_time, "time"))
    return out


class Debounce:
    """A file trigger's burst rule: changes gather until `window` seconds pass with none
    (or `window` * MAX_WAIT after the first, so a steady stream still fires); then one
    firing takes them all. `clock` is injected (tests use a fake one)."""

    MAX_WAIT = 10

    def __init__(self, window: float, clock: Callable[[], float]) -> None:
        self.window = window
        self._clock = clock
        self._paths: dict[str, None] = {}  # ordered, each once
        self._first = 0.0
        self._last = 0.0

    def note(self, paths: list[str]) -> float:
        """Record changed paths; returns when to look again (`take`)."""
        now = self._clock()
        if not self._paths:
            self._first = now
        self._last = now
        self._paths.update(dict.fromkeys(paths))
        return self.deadline()

    def deadline(self) -> float:
        return min(self._last + self.window, self._first + self.window * self.MAX_WAIT)

    def take(self) -> list[str] | None:
        """The gathered paths if the burst is over (and forget them), else None."""
        if not self._paths or self._clock() < self.deadline():
            return None
        paths = list(self._paths)
        self._paths.clear()
        return paths

    @property
    def pending(self) -> bool:
        return bool(self._paths)
