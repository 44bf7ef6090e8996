"""The state machines of roost/job/states.py: every table in full, the item outcome matrix and
`is_settled` (seed M9's delivery rules, issue 10)."""

from __future__ import annotations

import itertools
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from roost.job.record import JobRecord
from roost.job.states import (
    ATTACHES,
    CLIENT_CAUSES,
    DIALOGS,
    JOB_MOVES,
    JOBS,
    PROCS,
    Attach,
    Dialog,
    IllegalTransition,
    ItemKind,
    JobKind,
    JobState,
    Machine,
    Outcome,
    ProcState,
    RunCause,
    item_outcome,
    run_cause,
)
from roost.mailbox.item import AGENT_KINDS, KINDS
from roost.supervise.jobstore import is_settled

J, P, A, D = JobState, ProcState, Attach, Dialog

# Each table written out as the allowed (from, to) pairs: a change to a table is a change
# to this test, on purpose.
EXPECTED: dict[str, set[tuple[Any, Any]]] = {
    "job": {
        (J.STARTING, J.RUNNING),
        (J.STARTING, J.QUEUED),
        (J.STARTING, J.DONE),
        (J.STARTING, J.NEEDS_INPUT),
        (J.STARTING, J.FAILED),
        (J.STARTING, J.STOPPED),
        (J.RUNNING, J.DONE),
        (J.RUNNING, J.NEEDS_INPUT),
        (J.RUNNING, J.FAILED),
        (J.RUNNING, J.STOPPED),
        (J.RUNNING, J.STARTING),
        (J.DONE, J.RUNNING),
        (J.DONE, J.NEEDS_INPUT),
        (J.DONE, J.REAPED),
        (J.DONE, J.STOPPED),
        (J.DONE, J.STARTING),
        (J.DONE, J.FAILED),
        (J.NEEDS_INPUT, J.RUNNING),
        (J.NEEDS_INPUT, J.DONE),
        (J.NEEDS_INPUT, J.STOPPED),
        (J.NEEDS_INPUT, J.FAILED),
        (J.NEEDS_INPUT, J.STARTING),
        (J.FAILED, J.STARTING),
        (J.FAILED, J.STOPPED),
        (J.FAILED, J.RUNNING),
        (J.FAILED, J.NEEDS_INPUT),
        (J.FAILED, J.DONE),
        (J.STOPPED, J.STARTING),
        (J.REAPED, J.STARTING),
        (J.REAPED, J.STOPPED),
        (J.REAPED, J.FAILED),
        (J.DONE, J.QUEUED),
        (J.NEEDS_INPUT, J.QUEUED),
        (J.FAILED, J.QUEUED),
        (J.STOPPED, J.QUEUED),
        (J.REAPED, J.QUEUED),
        (J.QUEUED, J.STARTING),
        (J.QUEUED, J.STOPPED),
        (J.QUEUED, J.RUNNING),
        (J.WAITING, J.STARTING),
        (J.WAITING, J.QUEUED),
        (J.WAITING, J.FAILED),
        (J.WAITING, J.STOPPED),
    },
    "worker": {
        (P.STOPPED, P.STARTING),
        (P.STARTING, P.RUNNING),
        (P.STARTING, P.BACKOFF),
        (P.STARTING, P.EXITED),
        (P.STARTING, P.FATAL),
        (P.RUNNING, P.BACKOFF),
        (P.RUNNING, P.EXITED),
        (P.RUNNING, P.FATAL),
        (P.RUNNING, P.STARTING),
        (P.BACKOFF, P.STARTING),
        (P.BACKOFF, P.EXITED),
        (P.BACKOFF, P.FATAL),
        (P.EXITED, P.STARTING),
        (P.FATAL, P.STARTING),
    },
    "attach": {
        (A.DETACHED, A.ATTACHING),
        (A.DETACHED, A.HANDING_OFF),
        (A.ATTACHING, A.ATTACHED),
        (A.ATTACHING, A.DETACHED),
        (A.ATTACHED, A.DETACHED),
        (A.ATTACHED, A.HANDING_OFF),
        (A.HANDING_OFF, A.DETACHED),
    },
    "dialog": {
        (D.CLOSED, D.OPEN),
        (D.OPEN, D.ANSWERED),
        (D.OPEN, D.CLOSED),
        (D.ANSWERED, D.CLOSED),
        (D.ANSWERED, D.OPEN),
    },
}
MACHINES: dict[str, Machine[Any]] = {"job": JOBS, "worker": PROCS, "attach": ATTACHES, "dialog": DIALOGS}


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_every_move_of_every_machine(name: str) -> None:
    machine = MACHINES[name]
    states = list(machine.table)
    assert set(states) == set(type(states[0])), "every state has a row"
    for current, target in itertools.product(states, repeat=2):
        allowed = current == target or (current, target) in EXPECTED[name]
        assert machine.allows(current, target) is allowed, (current, target)
        if allowed:
            assert machine.move(current, target, "test") is target
        else:
            with pytest.raises(IllegalTransition, match=f"{name} {current.value} -> {target.value}"):
                machine.move(current, target, "test")


def test_a_move_is_logged_once_and_staying_put_is_not(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="roost.job.states"):
        JOBS.move(J.RUNNING, J.DONE, "job ab12", "the run ended")
        JOBS.move(J.DONE, J.DONE, "job ab12")
    assert [r.getMessage() for r in caplog.records] == ["job ab12: job running -> done (the run ended)"]


def test_the_attach_status_goes_through_its_setter() -> None:
    record = JobRecord(id="ab12cd34", name="j", kind=JobKind.PI, cwd="/")
    assert record.attach == A.DETACHED
    record.set_attach(A.ATTACHING)
    assert (record.attached, record.status, record.attach) == (True, "attaching", A.ATTACHING)
    with pytest.raises(IllegalTransition):
        record.set_attach(A.HANDING_OFF)
    record.set_attach(A.ATTACHED)
    record.set_attach(A.DETACHED)
    assert (record.attached, record.status) == (False, "")


def test_a_client_may_claim_only_a_reply_or_the_cli_as_cause() -> None:
    assert run_cause("reply", CLIENT_CAUSES) == RunCause.REPLY
    assert run_cause("cli", CLIENT_CAUSES) == RunCause.CLI
    for claimed in ("task", "parent_message", "agent_message", "restore", "nonsense", None, 3):
        with pytest.raises(ValueError, match="cause must be one of cli, reply"):
            run_cause(claimed, CLIENT_CAUSES)


# -- the outcome matrix -------------------------------------------------------------------------
def decide(
    kind: str = "message",
    job: JobState = J.DONE,
    attached: bool = False,
    worker: ProcState | None = P.RUNNING,
    alive: bool = True,
    dialog: bool = False,
    busy: bool = False,
) -> tuple[Outcome, bool, bool, bool]:
    d = item_outcome(
        kind=ItemKind(kind),
        job=job,
        attached=attached,
        worker=worker,
        worker_alive=alive,
        dialog=dialog,
        busy=busy,
    )
    return d.outcome, d.post, d.wake, d.answers_dialog


def test_outcome_matrix() -> None:
    O = Outcome  # noqa: E741
    # A stopped job is not woken and keeps nothing, except a child's report.
    assert decide("message", J.STOPPED) == (O.STOPPED, False, False, False)
    assert decide("reply", J.STOPPED) == (O.STOPPED, False, False, False)
    assert decide("report", J.STOPPED) == (O.QUEUED, True, False, False)
    # A foreground pi holds the session: kept until it lets go.
    assert decide("message", J.DONE, attached=True) == (O.QUEUED, True, False, False)
    # No worker: started (it is woken), unless a restart is due or the job failed.
    for job in (J.DONE, J.REAPED, J.NEEDS_INPUT, J.STARTING):
        assert decide("message", job, worker=None, alive=False) == (O.STARTED, True, True, False)
        assert decide("message", job, worker=P.EXITED, alive=False) == (O.STARTED, True, True, False)
    assert decide("message", J.STARTING, worker=P.BACKOFF, alive=False) == (O.QUEUED, True, False, False)
    assert decide("reply", J.FAILED, worker=P.FATAL, alive=False) == (O.QUEUED, True, False, False)
    # A worker that is starting (or a job that is) takes it when ready.
    assert decide("message", J.DONE, worker=P.STARTING) == (O.QUEUED, True, False, False)
    assert decide("message", J.STARTING, worker=P.RUNNING) == (O.QUEUED, True, False, False)
    # An open dialog: a reply answers it, agent items wait and say why.
    assert decide("reply", J.NEEDS_INPUT, dialog=True, busy=True) == (O.DELIVERED, True, False, True)
    assert decide("message", J.NEEDS_INPUT, dialog=True, busy=True) == (
        O.WAITING_ON_DIALOG,
        True,
        False,
        False,
    )
    assert decide("report", J.NEEDS_INPUT, dialog=True) == (O.WAITING_ON_DIALOG, True, False, False)
    # A live worker: delivered into a run in progress, else it starts one.
    assert decide("message", J.RUNNING, busy=True) == (O.DELIVERED, True, False, False)
    assert decide("message", J.DONE) == (O.STARTED, True, False, False)
    assert decide("reply", J.NEEDS_INPUT) == (O.STARTED, True, False, False)


# -- is_settled --------------------------------------------------------------------------------
def settled(
    state: JobState,
    kind: JobKind = JobKind.PI,
    busy: bool = False,
    dialog: bool = False,
    proc: ProcState | None = P.RUNNING,
    alive: bool = True,
    pending: int = 0,
    granted: bool = False,
) -> bool:
    record = JobRecord(id="ab12cd34", name="j", kind=kind, cwd="/", state=state, busy=busy, dialog=dialog)
    procs = {} if proc is None else {record.id: SimpleNamespace(state=proc, alive=alive)}
    mailbox = SimpleNamespace(pending=lambda: [object()] * pending)
    queue = SimpleNamespace(granted={record.id} if granted else set())
    daemon = SimpleNamespace(procs=procs, mailbox=lambda _record: mailbox, queue=queue)
    return is_settled(daemon, record)  # type: ignore[arg-type]


def test_is_settled() -> None:
    assert settled(J.STOPPED, busy=True, pending=3)
    assert settled(J.FAILED, proc=None, pending=2)  # waits for `roost start`
    assert settled(J.REAPED, proc=P.EXITED, alive=False)
    assert not settled(J.REAPED, proc=P.EXITED, alive=False, pending=1)  # it is being woken
    assert settled(J.DONE, kind=JobKind.SHELL) and settled(J.FAILED, kind=JobKind.SHELL)
    assert not settled(J.RUNNING, kind=JobKind.SHELL)
    assert settled(J.NEEDS_INPUT, busy=True, dialog=True)  # blocked on the person
    assert not settled(J.STARTING)
    assert not settled(J.RUNNING, busy=True)
    assert not settled(J.DONE, proc=P.STARTING)
    assert not settled(J.DONE, pending=1)
    assert settled(J.DONE) and settled(J.NEEDS_INPUT)


def test_a_run_granted_to_an_idle_worker_is_not_settled_before_the_worker_says_so() -> None:
    """`turn` makes an idle job `running` (roost.supervise.jobqueue.JobQueue.turn). Its worker
    may take the item out of new/ (pi's message_end) before roostd has read the update that
    says the run is busy: the worker handles several of pi's lines in one step, and sends
    its update after them. A `roost wait` right after a reply then answered "running",
    settled, in a clean-clone CI run. Until the worker's update, the grant keeps it waiting."""
    assert not settled(J.RUNNING, granted=True)
    assert settled(J.RUNNING)  # the worker reported: busy or not is its word now


def test_an_attached_job_stays_attached_whatever_its_worker_last_said() -> None:
    record = JobRecord(id="ab12cd34", name="j", kind=JobKind.PI, cwd="/")
    record.set_attach(A.ATTACHING)
    record.status = ""  # the worker's last update, as it lets go
    assert record.attach == A.ATTACHING  # its own field: not read back from the status
    assert JobRecord.from_json(record.to_json()).attach == A.ATTACHING
    record.set_attach(A.ATTACHED)
    assert (record.attached, record.status) == (True, "attached")


def test_the_mailbox_knows_every_item_kind() -> None:
    # The mailbox is a leaf that keeps its own list (its file format); it must match.
    assert tuple(k.value for k in ItemKind) == KINDS
    assert {ItemKind.MESSAGE.value, ItemKind.REPORT.value} == AGENT_KINDS


def test_every_job_move_says_why() -> None:
    assert set(JOB_MOVES) == EXPECTED["job"]
    assert all(why.strip() for why in JOB_MOVES.values())
