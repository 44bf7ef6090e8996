"""roost's state machines: each a `str` Enum with one table of allowed moves.

Depends on nothing else in roost, so every layer (daemon, worker, CLI, tests) can use it.
`check_transition` is the one place an illegal move fails loudly.
"""

from __future__ import annotations

from enum import Enum

from roost.errors import RoostError


class IllegalTransition(RoostError):
    """A state change the transition table does not allow (a bug, never user input)."""


class JobState(str, Enum):
    STARTING = "starting"
    RUNNING = "running"
    DONE = "done"
    NEEDS_INPUT = "needs_input"
    FAILED = "failed"
    STOPPED = "stopped"
    REAPED = "reaped"


# Named groups, as supervisor does.
SETTLED_JOB_STATES = frozenset({JobState.DONE, JobState.NEEDS_INPUT, JobState.FAILED})
ENDED_JOB_STATES = frozenset({JobState.FAILED, JobState.STOPPED, JobState.REAPED})
WAKEABLE_JOB_STATES = frozenset({JobState.DONE, JobState.REAPED})
"""States in which a new mailbox item starts a run (and its sender is told `started`)."""

_J = JobState
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    _J.STARTING: frozenset({_J.RUNNING, _J.DONE, _J.NEEDS_INPUT, _J.FAILED, _J.STOPPED}),
    _J.RUNNING: frozenset({_J.DONE, _J.NEEDS_INPUT, _J.FAILED, _J.STOPPED, _J.STARTING}),
    _J.DONE: frozenset({_J.RUNNING, _J.NEEDS_INPUT, _J.REAPED, _J.STOPPED, _J.FAILED, _J.STARTING}),
    _J.NEEDS_INPUT: frozenset({_J.RUNNING, _J.DONE, _J.STOPPED, _J.FAILED, _J.STARTING}),
    _J.FAILED: frozenset({_J.STARTING, _J.STOPPED, _J.RUNNING, _J.DONE, _J.NEEDS_INPUT}),
    _J.STOPPED: frozenset({_J.STARTING}),
    _J.REAPED: frozenset({_J.STARTING, _J.STOPPED, _J.FAILED}),
}


class ProcState(str, Enum):
    """A worker process's lifecycle as the daemon supervises it (supervisor-like)."""

    STOPPED = "stopped"  # no process and none wanted
    STARTING = "starting"  # spawned (or being adopted), its hello not yet received
    RUNNING = "running"  # connected and alive
    BACKOFF = "backoff"  # exited unexpectedly; a restart is scheduled
    EXITED = "exited"  # exited on purpose (stop, reap, shell job finished)
    FATAL = "fatal"  # crashed too often: roostd gave up


_P = ProcState
PROC_TRANSITIONS: dict[ProcState, frozenset[ProcState]] = {
    _P.STOPPED: frozenset({_P.STARTING}),
    _P.STARTING: frozenset({_P.RUNNING, _P.BACKOFF, _P.EXITED, _P.FATAL}),
    _P.RUNNING: frozenset({_P.BACKOFF, _P.EXITED, _P.FATAL, _P.STARTING}),
    _P.BACKOFF: frozenset({_P.STARTING, _P.EXITED, _P.FATAL}),
    _P.EXITED: frozenset({_P.STARTING}),
    _P.FATAL: frozenset({_P.STARTING}),
}


EXIT_FATAL = 3
"""A worker's (and a job pi's) exit code when restarting it cannot help (session held by
another process, pi missing): roostd gives up on the job at once. The extension keeps the
same number (`roost.ts`)."""


class RunCause(str, Enum):
    """What started a run; decides whether the run reports to the parent (seed M9b)."""

    TASK = "task"
    REPLY = "reply"
    CLI = "cli"
    PARENT_MESSAGE = "parent_message"
    AGENT_MESSAGE = "agent_message"
    RESTORE = "restore"


def check_transition(
    table: dict, current: Enum, target: Enum, what: str = "state"
) -> None:
    """Raise IllegalTransition unless `current -> target` is allowed (staying put is)."""
    if current == target:
        return
    if target not in table[current]:
        raise IllegalTransition(f"{what}: {current.value} -> {target.value} is not allowed")
