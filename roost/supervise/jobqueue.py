"""The queue: how many jobs may run a turn at once, and which waiting job goes next.

A job counts against the limits while it is `starting` or `running` (its worker is coming
up, or its pi or shell runs a turn); `done`, `needs_input` and the ended states hold no
slot. The limits are `maxRunning` (0: from the machine, `machine_limit`) and each named
group's `parallel` (`$ROOST_HOME/groups.json`, written by roostd only). A job that would
start a turn (a new job, an item that wakes a job without a worker, `roost start`) with no
slot free is `queued` instead; its items wait in its mailbox. The queue is derived from
job.json alone (the state, and `queue`: group, priority, seq), so a roostd killed at any
point restarts with the same queue in the same order: queued jobs stay queued, and the
jobs that held a slot hold it again. Order: higher priority first, then first come
(`seq`, given when a job enters the queue). A spawn queued past its tree's caps
(`caps`) also waits until its tree has room (`agents.limits.spawn_refusal`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, Unpack

from roost.agents.limits import SpawnCounts, spawn_refusal
from roost.host import paths
from roost.host import trusted as trust
from roost.host.fsutil import atomic_write_json
from roost.job.states import ENDED_JOB_STATES, JobKind, JobState
from roost.supervise.coalesce import Coalesced
from roost.wire import protocol
from roost.wire.protocol import BAD_REQUEST, NOT_FOUND, RequestError

if TYPE_CHECKING:
    from roost.config import Settings
    from roost.job.record import Facts, JobRecord
    from roost.supervise.workers import WorkerProcess
    from roost.wire.connection import Connection


class JobTable(Protocol):
    """What the queue uses of the daemon (a leaf, as `base.JobTable` names this module)."""

    jobs: dict[str, JobRecord]
    procs: dict[str, WorkerProcess]
    job_listeners: list[Callable[[JobRecord], None]]  # the queue subscribes its `changed`

    def settings(self) -> Settings: ...

    def set_state(
        self, record: JobRecord, target: JobState, reason: str | None = None, **facts: Unpack[Facts]
    ) -> None: ...

    def job_changed(self, record: JobRecord, persist: bool = True) -> None: ...

    def start_worker(self, record: JobRecord, why: str, *, admitted: bool = False) -> None: ...


log = logging.getLogger(__name__)

COUNTED = frozenset({JobState.STARTING, JobState.RUNNING})
"""The states that hold a slot."""
JOB_MB = 150
"""Memory one pi job takes (its pi and its worker, RSS), in MB: measured (README: Queue
and limits) as ~120 MB for pi 1.6 and ~25 MB for its worker."""
GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
PRIORITY_MAX = 1_000_000


@functools.cache
def machine_limit() -> int:
    """maxRunning's default: 2 per core (a turn mostly waits on the model, but pi's start
    and tools take a core), and no more than the available memory holds at JOB_MB each.
    Read once per roostd: the memory roostd's jobs will share is what was free at its start."""
    cores = os.cpu_count() or 1
    available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    return derive_limit(cores, available)


def derive_limit(cores: int, available: int | None) -> int:
    """min(2 per core, what `available` bytes hold at JOB_MB a job), at least 1."""
    by_memory = available // (JOB_MB * 2**20) if available is not None else cores * 2
    return max(1, min(cores * 2, by_memory))


def groups_file() -> Any:
    return paths.roost_home() / "groups.json"


def load_groups() -> dict[str, int]:
    """The named groups and their limits; a bad file is logged and read as none."""
    path = groups_file()
    try:
        data = json.loads(trust.read_text(path, follow=False))
        groups = data["groups"]
        return {
            str(name): int(spec["parallel"])
            for name, spec in groups.items()
            if GROUP_NAME.fullmatch(str(name)) and int(spec["parallel"]) >= 1
        }
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.error("ignoring unreadable %s: %s", path, exc)
        return {}


def checked_priority(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > PRIORITY_MAX:
        raise RequestError(
            BAD_REQUEST, f"priority must be a whole number within ±{PRIORITY_MAX:,}, not {value!r}"
        )
    return value


def _info(record: JobRecord) -> dict[str, Any]:
    return record.queue if isinstance(record.queue, dict) else {}


def group_of(record: JobRecord) -> str | None:
    group = _info(record).get("group")
    return group if isinstance(group, str) else None


def priority_of(record: JobRecord) -> int:
    value = _info(record).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _seq_of(record: JobRecord) -> int:
    value = _info(record).get("seq")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def order_key(record: JobRecord) -> tuple[int, int, str]:
    return (-priority_of(record), _seq_of(record), record.created)


class JobQueue:
    """Built once by `Daemon.__init__`: the gate every worker start passes (`admit`), the
    pump that starts queued jobs when a slot frees, positions for rows, the groups.

    The gate is asked once per start, by whoever decides it: `Daemon.start_worker` (every
    start but two), `jobs_service.launch` (a new job, before its record is first saved:
    it is born queued), and the pump, whose plan is the gate's answer (`_start`). The last
    two tell `start_worker` so (`admitted`)."""

    def __init__(self, table: JobTable) -> None:
        self.table = table
        table.job_listeners.append(self.changed)
        self.groups = load_groups()
        self._seq: int | None = None
        self.schedule = Coalesced(self.pump)
        """Run the pump soon (once, however many changes come first)."""
        self._positions: dict[str, int] = {}  # cached; cleared when the order may change
        self._shown: dict[str, int] = {}  # the positions the pump last pushed rows for
        self._states: dict[str, JobState] = {}
        # Jobs held `running` for a run their live worker was granted (`turn`) and has not
        # reported yet: its idle-but-busy report (the prompt on its way) keeps them running.
        self.granted: set[str] = set()

    # -- limits --------------------------------------------------------------------------
    def limit(self) -> int:
        setting = self.table.settings().maxRunning
        return setting if setting > 0 else machine_limit()

    def _counts(self) -> tuple[int, Counter[str]]:
        total, by_group = 0, Counter[str]()
        for record in self.table.jobs.values():
            if record.state in COUNTED:
                total += 1
                group = group_of(record)
                if group is not None:
                    by_group[group] += 1
        return total, by_group

    def _tree_has_room(self, record: JobRecord) -> bool:
        """A spawn queued past its tree's caps: do they allow it now? Queued jobs are not
        counted (they run nothing), the ones that hold a worker or will run are."""
        links = record.links
        live = [
            r
            for r in self.table.jobs.values()
            if r.kind == JobKind.PI
            and r is not record
            and r.state not in ENDED_JOB_STATES
            and r.state != JobState.QUEUED
        ]
        root = links.root_session
        counts = SpawnCounts(
            parent_depth=max(0, links.depth - 1),
            live_children=sum(
                1
                for r in live
                if (
                    r.links.parent_session == links.parent_session
                    if links.parent_session
                    else r.links.parent_peer == links.parent_peer
                )
            ),
            live_in_tree=sum(1 for r in live if (r.links.root_session or r.session) == root) if root else 0,
            live_spawned=sum(1 for r in live if r.links.spawned),
        )
        return spawn_refusal(counts, self.table.settings(), True) is None

    def _plan(self, candidate: JobRecord | None = None) -> tuple[list[JobRecord], list[JobRecord]]:
        """The queued jobs (with `candidate`), in order, and those of them that fit now."""
        queued = [r for r in self.table.jobs.values() if r.state == JobState.QUEUED]
        if candidate is not None and not any(r is candidate for r in queued):
            queued.append(candidate)
        queued.sort(key=order_key)
        total, by_group = self._counts()
        limit, chosen, caps_taken = self.limit(), [], False
        for record in queued:
            if total >= limit:
                break
            if record.attached:
                continue  # a foreground pi holds its session: it goes when it is back
            if _info(record).get("runner"):
                continue  # its remote runner's cluster is away: its runner starts it (supervise/placement.py)
            group = group_of(record)
            if group in self.groups and by_group[group] >= self.groups[group]:
                continue  # its group is full: the next one may be of another group
            if _info(record).get("caps"):
                # One spawn past the caps at a time: the next is weighed once it counts.
                if caps_taken or not self._tree_has_room(record):
                    continue
                caps_taken = True
            chosen.append(record)
            total += 1
            if group is not None:
                by_group[group] += 1
        return chosen, queued

    # -- the gate ----------------------------------------------------------------------------
    def place(
        self, record: JobRecord, group: str | None = None, priority: int = 0, caps: bool = False
    ) -> None:
        """A new job's group and priority (checked), before it is launched."""
        if group is not None and group not in self.groups:
            raise RequestError(
                NOT_FOUND,
                f"no group {group!r}: roost group add {group} "
                "--parallel N makes it (roost group ls lists them)",
            )
        record.queue = {"group": group, "priority": priority, "seq": 0}
        if caps:
            record.queue["caps"] = True

    def admit(self, record: JobRecord, why: str) -> bool:
        """May the job start its worker now? If not, it is queued (a new job, not yet in
        the table, is born queued; the caller then saves it and starts nothing)."""
        known = record.id in self.table.jobs
        if known and record.state in COUNTED:
            return True  # it holds its slot already (a restart)
        chosen, _ = self._plan(record)
        if any(r is record for r in chosen):
            _info(record).pop("caps", None)
            return True
        if record.state != JobState.QUEUED:
            record.queue = {**_info(record), "seq": self._next_seq()}
            if known:
                self.table.set_state(record, JobState.QUEUED, f"queued: {why}", status="queued", busy=False)
            else:
                record.state, record.status = JobState.QUEUED, "queued"
            self._positions.clear()
        return False

    def turn(self, record: JobRecord) -> bool:
        """An idle job's live worker has new work (a reply, a message, a report) and asks
        for a slot before it starts a run: True, run now (the job is `running` from here);
        False, it is queued, and a `turn` push tells its worker when a slot frees."""
        if record.state in COUNTED:
            return True  # the run this worker was started for, or one granted already
        if self.has_room(record):
            self.table.set_state(record, JobState.RUNNING, status="thinking")
            self.granted.add(record.id)
            return True
        self.admit(record, "its next run")  # not chosen: it is queued
        return False

    def has_room(self, record: JobRecord) -> bool:
        """Would the job get a slot now (its place in the queue considered)?"""
        if record.state in COUNTED:
            return True
        chosen, _ = self._plan(record)
        return any(r is record for r in chosen)

    def hello(self, record: JobRecord, conn: Connection) -> None:
        """A worker (re)connected: a `turn` it may have missed (a queued worker asks again,
        and this roostd answers)."""
        conn.push(protocol.event("turn"))

    def _start(self, record: JobRecord) -> None:
        """Start a queued job the pump chose: its worker, or the run its live worker waits for."""
        proc = self.table.procs.get(record.id)
        if proc is None or not proc.alive:
            self.table.start_worker(record, "a slot is free", admitted=True)  # the plan chose it
            return
        self.table.set_state(record, JobState.RUNNING, "a slot is free", status="thinking")
        self.granted.add(record.id)
        if proc.conn is not None:  # else its worker_hello brings the news (`hello`)
            proc.conn.push(protocol.event("turn"))

    def _next_seq(self) -> int:
        if self._seq is None:
            self._seq = max((_seq_of(r) for r in self.table.jobs.values()), default=0)
        self._seq += 1
        return self._seq

    # -- the pump --------------------------------------------------------------------------
    def changed(self, record: JobRecord) -> None:
        """A job changed (a listener of Daemon.job_changed, the first): a slot may have
        freed, the order changed."""
        before = self._states.get(record.id)
        removed = record.id not in self.table.jobs
        if removed or record.state != JobState.RUNNING:
            self.granted.discard(record.id)
        if removed:
            self._states.pop(record.id, None)
        else:
            self._states[record.id] = record.state
        if before != record.state or removed:
            if JobState.QUEUED in (before, record.state) or removed:
                self._positions.clear()
            self.schedule()

    def pump(self) -> None:
        """Start the queued jobs that fit, in order; tell the rest their new position."""
        chosen, queued = self._plan()
        for record in chosen:
            _info(record).pop("caps", None)
            try:
                self._start(record)
            except Exception:  # one job must not keep the others queued for ever
                log.exception("job %s: could not be started from the queue", record.id)
        self._positions.clear()
        shown, self._shown = self._shown, {}
        for record in queued:
            position = self.position(record)
            if position is not None:
                self._shown[record.id] = position
                if shown.get(record.id) != position:  # its row shows the new place
                    self.table.job_changed(record, persist=False)

    # -- rows and the queue op -----------------------------------------------------------
    def position(self, record: JobRecord) -> int | None:
        if record.state != JobState.QUEUED:
            return None
        if not self._positions:
            queued = sorted(
                (r for r in self.table.jobs.values() if r.state == JobState.QUEUED), key=order_key
            )
            self._positions = {r.id: n for n, r in enumerate(queued, 1)}
        return self._positions.get(record.id)

    def row_fields(self, record: JobRecord) -> dict[str, Any]:
        """The row's `queue` (README: JSON output), and a queued job's status with its place."""
        position = self.position(record)
        fields: dict[str, Any] = {
            "queue": {"position": position, "group": group_of(record), "priority": priority_of(record)}
        }
        if position is not None:
            waits = _info(record).get("runner")  # its cluster is away (supervise/placement.py)
            fields["status"] = f"waiting: {waits}" if waits else f"queued (position {position})"
        return fields

    def queued(self) -> list[JobRecord]:
        return sorted((r for r in self.table.jobs.values() if r.state == JobState.QUEUED), key=order_key)

    def move(self, record: JobRecord, priority: int | None, first: bool) -> None:
        """A new priority (or the head of the queue: above every other queued job's)."""
        if first:
            others = [priority_of(r) for r in self.queued() if r is not record]
            priority = max([priority_of(record), *(p + 1 for p in others)])
            seq = min((_seq_of(r) for r in self.queued()), default=1) - 1
            record.queue = {**_info(record), "priority": checked_priority(priority), "seq": seq}
        else:
            record.queue = {**_info(record), "priority": checked_priority(priority)}
        self._positions.clear()
        self.table.job_changed(record)
        self.schedule()
        for other in self.queued():
            if other is not record:
                self.table.job_changed(other, persist=False)

    # -- groups --------------------------------------------------------------------------
    def set_group(self, name: str, parallel: int | None) -> None:
        """Add or change a group (`parallel` None: remove it); saved before it applies."""
        if not isinstance(name, str) or not GROUP_NAME.fullmatch(name):
            raise RequestError(
                BAD_REQUEST,
                f"group name {name!r}: 1-40 letters, digits, "
                "`.`, `_` or `-`, starting with a letter or digit",
            )
        groups = dict(self.groups)
        if parallel is None:
            if name not in groups:
                raise RequestError(NOT_FOUND, f"no group {name!r} (roost group ls lists them)")
            del groups[name]
        else:
            if isinstance(parallel, bool) or not isinstance(parallel, int) or not 1 <= parallel <= 10_000:
                raise RequestError(BAD_REQUEST, "parallel must be a whole number from 1 to 10000")
            groups[name] = parallel
        atomic_write_json(groups_file(), {"groups": {n: {"parallel": p} for n, p in sorted(groups.items())}})
        self.groups = groups
        self.schedule()

    def group_rows(self) -> list[dict[str, Any]]:
        _total, by_group = self._counts()
        waiting = Counter(group_of(r) for r in self.table.jobs.values() if r.state == JobState.QUEUED)
        return [
            {"name": name, "parallel": parallel, "running": by_group[name], "queued": waiting[name]}
            for name, parallel in sorted(self.groups.items())
        ]

    def summary(self) -> dict[str, Any]:
        total, _ = self._counts()
        return {"maxRunning": self.limit(), "running": total}
