"""roost's state machines and the words they travel as, each defined once.

Every machine is a `str` Enum with one table of allowed moves, changed only through
`Machine.move` (checked, and logged the same way everywhere), the way supervisor's
`states.py` does it. The vocabularies that are results rather than machines (an item's
`Outcome`, how a worker exited, a job's kind, a run's cause) are Enums too, so no bare
string stands for them anywhere else.

Depends on nothing else in roost, so every layer (daemon, worker, CLI, tests) can use it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from roost.errors import RoostError

log = logging.getLogger("roost.job.states")


class IllegalTransition(RoostError):
    """A state change the transition table does not allow (a bug, never user input)."""


S = TypeVar("S", bound=Enum)


class Machine(Generic[S]):
    """One state machine: its table of allowed moves and the one guarded setter."""

    def __init__(self, name: str, table: Mapping[S, frozenset[S]]) -> None:
        self.name = name
        self.table = table

    def allows(self, current: S, target: S) -> bool:
        return current == target or target in self.table[current]

    def check(self, current: S, target: S, what: str) -> None:
        """Raise IllegalTransition unless `current -> target` is allowed (staying put is)."""
        if not self.allows(current, target):
            raise IllegalTransition(f"{what}: {self.name} {current.value} -> {target.value} is not allowed")

    def move(self, current: S, target: S, what: str, why: str = "") -> S:
        """Check a move and log it; returns `target` for the caller to store."""
        self.check(current, target, what)
        if current != target:
            log.info(
                "%s: %s %s -> %s%s", what, self.name, current.value, target.value, f" ({why})" if why else ""
            )
        return target


# -- a job ----------------------------------------------------------------------------------
class JobState(str, Enum):
    STARTING = "starting"  # its worker is starting (or restarting after a crash)
    RUNNING = "running"  # a run is in progress
    DONE = "done"  # idle: the last run ended
    NEEDS_INPUT = "needs_input"  # it asked a question, or a dialog waits for an answer
    FAILED = "failed"  # the model failed, the command exited non-zero, or roostd gave up
    STOPPED = "stopped"  # the user stopped it: nothing wakes it but `roost start`
    REAPED = "reaped"  # idle long enough that its worker was let go; an item wakes it
    QUEUED = "queued"  # it would start a turn, but no slot is free (maxRunning, its group)
    WAITING = "waiting"  # it waits on other jobs (`--after`): no worker, its task not yet given


# Named groups, as supervisor does.
SETTLED_JOB_STATES = frozenset({JobState.DONE, JobState.NEEDS_INPUT, JobState.FAILED})
"""A run ended in these (the states a child reports in)."""
ENDED_JOB_STATES = frozenset({JobState.FAILED, JobState.STOPPED, JobState.REAPED})
"""No worker runs (or will, until something starts one)."""

_J = JobState
JOB_MOVES: dict[tuple[JobState, JobState], str] = {
    # Each move that happens, with why (and who makes it). roostd's Daemon.set_state makes
    # them all; a worker reports only WORKER_STATES, and its RunTracker keeps the same table.
    (_J.STARTING, _J.RUNNING): "its worker is up and a run starts (a shell job: at once)",
    (_J.STARTING, _J.DONE): "its worker restored an idle session, or a hand-off with no task",
    (_J.STARTING, _J.NEEDS_INPUT): "its worker restored a session that ended on a question",
    (_J.STARTING, _J.FAILED): "it cannot start: pi missing, its session held, crashed too often",
    (_J.STARTING, _J.STOPPED): "the user stopped it before it came up",
    (_J.RUNNING, _J.DONE): "the run ended (a shell job: its command exited 0)",
    (_J.RUNNING, _J.NEEDS_INPUT): "the run ended on a question, or a dialog opened",
    (_J.RUNNING, _J.FAILED): "the model failed, the command exited non-zero, roostd gave up",
    (_J.RUNNING, _J.STOPPED): "the user stopped it",
    (_J.RUNNING, _J.STARTING): "its worker crashed: a restart is scheduled",
    (_J.DONE, _J.RUNNING): "an item started a run",
    (_J.DONE, _J.NEEDS_INPUT): "an extension's dialog outside a run",
    (_J.DONE, _J.REAPED): "idle long enough: its worker was let go",
    (_J.DONE, _J.STOPPED): "the user stopped it",
    (_J.DONE, _J.STARTING): "its worker crashed, or an item wakes it without one",
    (_J.DONE, _J.FAILED): "its worker crashed too often or cannot restart; its session is held",
    (_J.NEEDS_INPUT, _J.RUNNING): "a reply answered it",
    (_J.NEEDS_INPUT, _J.DONE): "the dialog was cancelled",
    (_J.NEEDS_INPUT, _J.STOPPED): "the user stopped it",
    (_J.NEEDS_INPUT, _J.FAILED): "its worker crashed too often or cannot restart; its session is held",
    (_J.NEEDS_INPUT, _J.STARTING): "its worker crashed, or a reply wakes it without one",
    (_J.FAILED, _J.STARTING): "`roost start`, or an item (restart)",
    (_J.FAILED, _J.STOPPED): "the user stopped it",
    (_J.FAILED, _J.RUNNING): "a reply to a model error, its worker still running",
    (_J.FAILED, _J.NEEDS_INPUT): "an extension's dialog while it waits after a model error",
    (_J.FAILED, _J.DONE): "a budget that stopped it was raised: idle again",
    (_J.STOPPED, _J.STARTING): "`roost start`",
    (_J.REAPED, _J.STARTING): "an item wakes it",
    (_J.REAPED, _J.STOPPED): "the user stopped it",
    (_J.REAPED, _J.FAILED): "it could not be woken: its session is held by another writer",
    # The queue (supervise/jobqueue.py): a job born past the limits starts `queued`; one
    # that would start a turn with no slot free waits in it, its items in its mailbox.
    **{
        (source, _J.QUEUED): "no slot free to start it (maxRunning or its group's limit)"
        for source in (_J.DONE, _J.NEEDS_INPUT, _J.FAILED, _J.STOPPED, _J.REAPED)
    },
    (_J.QUEUED, _J.STARTING): "a slot freed: its worker starts and delivers its mailbox",
    # A remote runner (supervise/placement.py): its cluster cannot be reached; the job
    # waits queued, its items in its mailbox, and starts once the cluster answers.
    (_J.STARTING, _J.QUEUED): "its remote runner's cluster cannot be reached",
    (_J.QUEUED, _J.RUNNING): "a slot freed: its idle worker starts the next run",
    (_J.QUEUED, _J.STOPPED): "the user stopped it",
    # Dependencies (supervise/dependencies.py): a job made with `--after` is born `waiting`
    # and leaves it once, when its dependencies let it go (or fail it).
    (_J.WAITING, _J.STARTING): "its dependencies let it go: its task is given, its worker starts",
    (_J.WAITING, _J.QUEUED): "its dependencies let it go, but no slot is free",
    (_J.WAITING, _J.FAILED): "a dependency failed, was stopped or removed: it never runs",
    (_J.WAITING, _J.STOPPED): "the user stopped it: it never runs",
}
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    state: frozenset(to for (source, to) in JOB_MOVES if source == state) for state in JobState
}
JOBS: Machine[JobState] = Machine("job", JOB_TRANSITIONS)

WORKER_STATES = frozenset({JobState.RUNNING, JobState.DONE, JobState.NEEDS_INPUT, JobState.FAILED})
"""The states a worker may report for its job (the rest are roostd's to decide)."""


class JobKind(str, Enum):
    PI = "pi"  # a pi session
    SHELL = "shell"  # a command: no session, takes no replies or messages


# -- a worker process, as roostd supervises it ----------------------------------------------
class ProcState(str, Enum):
    """A worker process's lifecycle as the daemon supervises it (supervisor-like)."""

    STOPPED = "stopped"  # no process and none wanted
    STARTING = "starting"  # spawned (or being adopted), its hello not yet received
    RUNNING = "running"  # connected and alive
    BACKOFF = "backoff"  # exited unexpectedly; a restart is scheduled
    EXITED = "exited"  # exited on purpose (stop, reap, shell job finished)
    FATAL = "fatal"  # crashed too often, or refused to start: roostd gave up


_P = ProcState
PROC_TRANSITIONS: dict[ProcState, frozenset[ProcState]] = {
    _P.STOPPED: frozenset({_P.STARTING}),
    _P.STARTING: frozenset({_P.RUNNING, _P.BACKOFF, _P.EXITED, _P.FATAL}),
    _P.RUNNING: frozenset({_P.BACKOFF, _P.EXITED, _P.FATAL, _P.STARTING}),
    _P.BACKOFF: frozenset({_P.STARTING, _P.EXITED, _P.FATAL}),
    _P.EXITED: frozenset({_P.STARTING}),
    _P.FATAL: frozenset({_P.STARTING}),
}
PROCS: Machine[ProcState] = Machine("worker", PROC_TRANSITIONS)


class WorkerExit(str, Enum):
    """How a worker process ended (or was restarted), as roostd classifies it."""

    STOPPED = "stopped"  # asked to go (stop, rm, roostd's stop): the job is stopped
    REAPED = "reaped"  # let go when idle: an item wakes the job
    RELEASED = "released"  # let go of its session for a foreground pi (attach)
    SHELL = "shell"  # a shell job's command finished (detail: its exit code)
    FATAL = "fatal"  # it said restarting cannot help (session held elsewhere, pi missing)
    GAVE_UP = "gave_up"  # it crashed too often within the window
    CRASHED = "crashed"  # it crashed: a restart is scheduled
    RESTARTED = "restarted"  # the scheduled restart happened


REAP_REASON = "reaped"
"""The reason roostd gives a worker it lets go because its job was idle."""
ATTACH_REASON = "attach"
"""The reason roostd gives a worker that lets go of its session for `roost attach`."""
EXIT_FATAL = 3
"""A worker's (and a job pi's) exit code when restarting it cannot help (session held by
another process, pi missing): roostd gives up on the job at once. The extension keeps the
same number (`roost.ts`; a unit test compares them)."""


# -- a job held by a foreground pi ----------------------------------------------------------
class Attach(str, Enum):
    """Whether a foreground pi holds the job's session; the value is the row's status."""

    DETACHED = ""  # in the background: a worker may run it
    ATTACHING = "attaching"  # `roost attach` waits for the worker to let go at a safe point
    ATTACHED = "attached"  # a foreground pi holds the session; items wait in the mailbox
    HANDING_OFF = "handing off"  # a foreground pi gives its session to the job (/roost-bg)


_A = Attach
ATTACH_TRANSITIONS: dict[Attach, frozenset[Attach]] = {
    _A.DETACHED: frozenset({_A.ATTACHING, _A.HANDING_OFF}),
    _A.ATTACHING: frozenset({_A.ATTACHED, _A.DETACHED}),  # ... or it was cancelled
    _A.ATTACHED: frozenset({_A.DETACHED, _A.HANDING_OFF}),  # ... or /roost-bg in that pi
    _A.HANDING_OFF: frozenset({_A.DETACHED}),  # the foreground pi quit: the job takes over
}
ATTACHES: Machine[Attach] = Machine("attach", ATTACH_TRANSITIONS)


# -- an extension dialog in a job's pi (kept by its worker) ----------------------------------
class Dialog(str, Enum):
    CLOSED = "closed"  # none open
    OPEN = "open"  # pi asks (select, confirm, input, editor): the job needs input
    ANSWERED = "answered"  # a reply answered it; the run goes on


_D = Dialog
DIALOG_TRANSITIONS: dict[Dialog, frozenset[Dialog]] = {
    _D.CLOSED: frozenset({_D.OPEN}),
    _D.OPEN: frozenset({_D.ANSWERED, _D.CLOSED}),  # ... or the run ended with it open
    _D.ANSWERED: frozenset({_D.CLOSED, _D.OPEN}),  # ... or the run asks again
}
DIALOGS: Machine[Dialog] = Machine("dialog", DIALOG_TRANSITIONS)


# -- a run and an item ------------------------------------------------------------------------
class RunCause(str, Enum):
    """What started a run; decides whether the run reports to the parent (agents/handback.py)."""

    TASK = "task"
    REPLY = "reply"
    CLI = "cli"
    PARENT_MESSAGE = "parent_message"
    AGENT_MESSAGE = "agent_message"
    RESTORE = "restore"


CLIENT_CAUSES = frozenset({RunCause.REPLY, RunCause.CLI})
"""The causes a `roost reply` may claim (a person's answer, or a task from the CLI); the
others are roost's to assign (a child's task, a message from a parent or a peer)."""


ITEM_CAUSES = CLIENT_CAUSES | {RunCause.TASK}
"""The causes a reply item in a mailbox may carry (roostd writes `task` for a job's task)."""


def run_cause(value: object, allowed: frozenset[RunCause] = frozenset(RunCause)) -> RunCause:
    """`value` as a RunCause from `allowed`; ValueError (naming the choices) otherwise."""
    try:
        cause = RunCause(value)
    except ValueError:
        cause = None
    if cause is None or cause not in allowed:
        choices = ", ".join(sorted(c.value for c in allowed))
        raise ValueError(f"cause must be one of {choices}, not {value!r}")
    return cause


class Outcome(str, Enum):
    """What happened to an item, as its sender is told (the first word of the tool result)."""

    DELIVERED = "delivered"  # a live run takes it at its next tool boundary (or a dialog)
    QUEUED = "queued"  # it waits in the mailbox (worker starting, attached, failed or queued job)
    STARTED = "started"  # it starts a run (the job was idle, reaped or ended)
    NOT_RUNNING = "not running"  # a foreground peer that is gone: nothing was kept
    STOPPED = "stopped"  # the user stopped the job: nothing was kept
    WAITING_ON_DIALOG = "waiting on a dialog"  # kept until the person answers the dialog


@dataclass(frozen=True)
class ItemDecision:
    """roostd's decision for one item (`item_outcome`); the worker carries it out."""

    outcome: Outcome
    post: bool = True  # keep it in the mailbox
    wake: bool = False  # start a worker for it
    answers_dialog: bool = False  # a reply to an open dialog: the job runs on


class ItemKind(str, Enum):
    """What a mailbox item is (its `kind`)."""

    REPLY = "reply"  # a person's reply, or a job's task: a prompt over RPC (it may answer a dialog)
    MESSAGE = "message"  # an agent's message: injected by the extension
    REPORT = "report"  # a child's hand-back (or that it ended): injected by the extension


class PeerKind(str, Enum):
    """What an agent peer is: a job roostd runs, or a foreground pi with roost's extension."""

    JOB = "job"
    FOREGROUND = "foreground"


def item_outcome(
    *,
    kind: ItemKind,
    job: JobState,
    attached: bool,
    worker: ProcState | None,
    worker_alive: bool,
    dialog: bool,
    busy: bool,
    over_budget: bool = False,
) -> ItemDecision:
    """The one place an item's outcome is decided: delivered, queued, started, or refused.

    `kind`: a person's reply (it may answer a dialog), an agent's
    message, or a child's report. `worker` is the state of the job's worker process, None
    when roostd has none. `over_budget`: the job was stopped by its budget, and nothing runs
    until the person raises it (`roost budget`).
    """
    if job == JobState.STOPPED:
        if kind == ItemKind.REPORT:  # kept for when the person starts the parent again
            return ItemDecision(Outcome.QUEUED)
        return ItemDecision(Outcome.STOPPED, post=False)
    if job == JobState.QUEUED:  # its worker starts when a slot frees, and delivers it then
        return ItemDecision(Outcome.QUEUED)
    if attached:  # a foreground pi holds the session: delivered when it lets go
        return ItemDecision(Outcome.QUEUED)
    if not worker_alive:
        if worker == ProcState.BACKOFF or job == JobState.FAILED:
            return ItemDecision(Outcome.QUEUED)  # the restart (or `roost start`) takes it
        return ItemDecision(Outcome.STARTED, wake=True)
    if worker != ProcState.RUNNING or job == JobState.STARTING or over_budget:
        return ItemDecision(Outcome.QUEUED)
    if dialog:
        if kind == ItemKind.REPLY:
            return ItemDecision(Outcome.DELIVERED, answers_dialog=True)
        return ItemDecision(Outcome.WAITING_ON_DIALOG)
    return ItemDecision(Outcome.DELIVERED if busy else Outcome.STARTED)
