"""roostd's hubs in-process, supervisor-style: the daemon's handling of worker events
(`Daemon._worker_event`) and the `AgentRouter`, with small fakes in place of processes
and sockets (no roostd, no worker, no pi)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any, Unpack

import pytest

from roost.config import Settings
from roost.events.writer import EventLog
from roost.host import paths
from roost.job.record import Facts, JobRecord, Links
from roost.job.states import Attach, JobKind, JobState, Outcome, ProcState, WorkerExit
from roost.mailbox import Mailbox
from roost.supervise import daemon as daemon_module
from roost.supervise import router as router_module
from roost.supervise.handlers import jobs as job_ops
from roost.supervise.handlers import worker as worker_ops
from roost.supervise.router import AgentRouter, ForegroundPeer
from roost.supervise.usagebook import UsageBook

pytestmark = pytest.mark.usefixtures("home")


class FakeProc:
    """A WorkerProcess as the daemon and the router see it: no process behind it."""

    def __init__(self, record: JobRecord, alive: bool = False) -> None:
        self.record = record
        self.alive = alive
        self.state = ProcState.RUNNING if alive else ProcState.STOPPED
        self.spawned = 0
        self.reported = asyncio.Event()  # set by its worker's first worker_update

    def spawn(self) -> None:
        self.spawned += 1
        self.alive, self.state = True, ProcState.STARTING


class FakeConn:
    """A foreground pi's connection: keeps what is pushed to it."""

    def __init__(self) -> None:
        self.peer_id: str | None = None
        self.job_id: str | None = None
        self.sent: list[dict[str, Any]] = []

    async def send(self, frame: dict[str, Any]) -> bool:
        self.sent.append(frame)
        return True


def job(job_id: str, state: JobState = JobState.DONE, **fields: Any) -> JobRecord:
    fields.setdefault("session", str(paths.job_dir(job_id) / "session.jsonl"))
    record = JobRecord(id=job_id, name=f"n{job_id}", kind=JobKind.PI, cwd="/", state=state, **fields)
    paths.ensure_dir(record.dir)
    Path(record.session or "").touch()
    return record


def attach(record: JobRecord) -> None:
    record.set_attach(Attach.ATTACHING, "roost attach")
    record.set_attach(Attach.ATTACHED, "its worker let go")


# -- the daemon's worker events ----------------------------------------------------------


class Harness:
    """A Daemon whose workers are FakeProcs; every event it emits is kept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(daemon_module, "agent_catalog", lambda cwd: None)
        self.daemon = daemon_module.Daemon()
        self.events: list[dict[str, Any]] = []
        self.daemon.events.listeners.append(self.events.append)
        self.ended: list[tuple[str, str]] = []
        monkeypatch.setattr(
            self.daemon.agents, "job_ended", lambda record, why: self.ended.append((record.id, why))
        )

    def add(self, record: JobRecord, alive: bool = True) -> FakeProc:
        self.daemon.jobs[record.id] = record
        proc = FakeProc(record, alive)
        self.daemon.procs[record.id] = proc  # type: ignore[assignment]
        return proc

    def exit(self, proc: FakeProc, how: WorkerExit, detail: str = "") -> None:
        self.daemon._worker_event(proc, how, detail)  # type: ignore[arg-type]

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Harness:
    return Harness(monkeypatch)


def test_an_idle_reap_moves_the_job_to_reaped(harness: Harness) -> None:
    record = job("00000001", JobState.DONE, busy=True, status="idle")
    proc = harness.add(record)
    harness.exit(proc, WorkerExit.REAPED, "idle")
    assert (record.state, record.busy, record.status) == (JobState.REAPED, False, "")
    assert harness.events[-1]["type"] == "job.state"
    assert (harness.events[-1]["from"], harness.events[-1]["to"]) == ("done", "reaped")
    assert json.loads(record.file.read_text())["state"] == "reaped"  # persisted


def test_a_stop_is_announced_once(harness: Harness) -> None:
    record = job("00000002", JobState.RUNNING)
    proc = harness.add(record)
    harness.exit(proc, WorkerExit.STOPPED, "stopped")
    assert record.state == JobState.STOPPED and harness.types() == ["job.state"]
    harness.exit(proc, WorkerExit.STOPPED, "stopped")  # `roost stop` set it already
    assert harness.types() == ["job.state"]


# The job moves the integration and e2e layers did not make (a log of every move over both
# showed the other 26 of states.JOB_MOVES), made here through roostd's own paths.
def test_a_crash_or_a_give_up_while_it_waits_on_a_question(harness: Harness) -> None:
    asking = job("00000011", JobState.NEEDS_INPUT, question="which one?")
    harness.exit(harness.add(asking), WorkerExit.CRASHED, "worker signal 9")
    assert asking.state == JobState.STARTING
    giving_up = job("00000012", JobState.NEEDS_INPUT, question="which one?")
    harness.exit(harness.add(giving_up), WorkerExit.GAVE_UP, "crashed 3 times")
    assert (giving_up.state, giving_up.question) == (JobState.FAILED, None)


def test_a_reaped_job_is_stopped(harness: Harness) -> None:
    record = job("00000013", JobState.REAPED)
    harness.daemon.jobs[record.id] = record  # no worker: it was let go
    asyncio.run(job_ops._stop(harness.daemon, record))
    assert record.state == JobState.STOPPED and harness.ended == [(record.id, "stopped")]


def test_a_dialog_opens_in_a_job_failed_by_its_model(harness: Harness) -> None:
    record = job("00000014", JobState.FAILED, error="model error")
    proc = harness.add(record)  # its worker still runs (a model error is no crash)
    conn = FakeConn()
    conn.job_id = record.id
    asyncio.run(
        worker_ops.worker_update(
            harness.daemon,
            conn,
            {  # type: ignore[arg-type]
                "state": "needs_input",
                "question": "pick",
                "dialog": True,
                "options": ["a", "b"],
            },
        )
    )
    assert (record.state, record.dialog, record.options) == (JobState.NEEDS_INPUT, True, ["a", "b"])
    assert proc.reported.is_set()  # its record is current: a schedule may weigh it


def test_a_shell_exit_is_done_or_failed_by_its_code(harness: Harness) -> None:
    ok = job("00000003", JobState.RUNNING)
    ok.kind = JobKind.SHELL
    bad = job("00000004", JobState.RUNNING)
    bad.kind = JobKind.SHELL
    harness.exit(harness.add(ok), WorkerExit.SHELL, "0")
    harness.exit(harness.add(bad), WorkerExit.SHELL, "2")
    assert (ok.state, ok.process.exit_code, ok.status) == (JobState.DONE, 0, "exit 0")
    assert (bad.state, bad.process.exit_code, bad.error) == (JobState.FAILED, 2, "command exited with 2")
    assert harness.types()[-1] == "job.failed"


def test_a_crash_restarts_after_a_backoff(harness: Harness) -> None:
    record = job("00000005", JobState.RUNNING, dialog=True)
    record.process.crashes = [1.0]
    harness.exit(harness.add(record), WorkerExit.CRASHED, "exited with 1")
    assert (record.state, record.status, record.dialog) == (JobState.STARTING, "exited with 1", False)
    crashed = harness.events[0]
    assert (crashed["type"], crashed["crashes"], crashed["reason"]) == ("worker.crashed", 1, "exited with 1")
    assert harness.ended == []  # a restart is no end: the parent hears nothing


def test_giving_up_fails_the_job_and_tells_its_parent(harness: Harness) -> None:
    record = job("00000006", JobState.STARTING, question="which?", dialog=True)
    harness.exit(harness.add(record), WorkerExit.GAVE_UP, "pi exited 5 times")
    assert harness.types()[:2] == ["worker.crashed", "worker.gave_up"]
    assert (record.state, record.error, record.summary) == (
        JobState.FAILED,
        "pi exited 5 times",
        "pi exited 5 times",
    )
    assert (record.question, record.dialog) == (None, False)
    assert harness.ended == [("00000006", "crashed repeatedly")]


def test_a_fatal_exit_is_no_crash(harness: Harness) -> None:
    record = job("00000007", JobState.STARTING)
    harness.exit(harness.add(record), WorkerExit.FATAL, "no model: configure one")
    assert "worker.crashed" not in harness.types() and "worker.gave_up" in harness.types()
    assert record.state == JobState.FAILED
    assert harness.ended == [("00000007", "no model: configure one")]


def test_a_release_starts_a_worker_only_for_what_waits(harness: Harness) -> None:
    waiting = job("00000008", JobState.DONE)
    proc = harness.add(waiting, alive=False)
    harness.daemon.mailbox(waiting).post(kind="reply", text="more", sender=None, cause="reply")
    harness.exit(proc, WorkerExit.RELEASED, "released")
    assert proc.spawned == 1 and waiting.state == JobState.STARTING

    held = job("00000009", JobState.DONE)
    attach(held)
    proc = harness.add(held, alive=False)
    harness.daemon.mailbox(held).post(kind="reply", text="more", sender=None, cause="reply")
    harness.exit(proc, WorkerExit.RELEASED, "released")
    assert proc.spawned == 0 and held.state == JobState.DONE  # the foreground pi has it


def test_a_removed_job_and_a_restart_change_nothing(harness: Harness) -> None:
    record = job("0000000a", JobState.RUNNING)
    proc = harness.add(record)
    harness.exit(proc, WorkerExit.RESTARTED, "")
    assert record.state == JobState.RUNNING and harness.events == []
    del harness.daemon.jobs[record.id]
    harness.exit(proc, WorkerExit.GAVE_UP, "gone")
    assert record.state == JobState.RUNNING and harness.events == []


# -- the agent router ------------------------------------------------------------------------


class FakeTable:
    """The JobTable the router uses: records, fake workers, real mailboxes and event log."""

    def __init__(self, home: Path) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self.procs: dict[str, Any] = {}
        self.events = EventLog(home)
        self.usage_book = UsageBook()
        self.started: list[tuple[str, str]] = []
        self.emitted: list[dict[str, Any]] = []
        self.events.listeners.append(self.emitted.append)
        self._boxes: dict[str, Mailbox] = {}

    def settings(self) -> Settings:
        return Settings()

    def mailbox(self, record: JobRecord) -> Mailbox:
        return self._boxes.setdefault(record.id, Mailbox(record.mailbox_dir))

    def set_state(
        self, record: JobRecord, target: JobState, reason: str | None = None, **facts: Unpack[Facts]
    ) -> None:
        record.state = target
        record.apply(facts)

    def job_changed(self, record: JobRecord, persist: bool = True) -> None:
        pass

    def start_worker(self, record: JobRecord, why: str) -> None:
        self.started.append((record.id, why))
        self.procs[record.id] = FakeProc(record, alive=True)

    def add(self, record: JobRecord, alive: bool = False) -> JobRecord:
        self.jobs[record.id] = record
        self.mailbox(record)  # made at launch, as roostd does
        if alive:
            self.procs[record.id] = FakeProc(record, alive=True)
        return record


@pytest.fixture
def table(home: Path) -> FakeTable:
    paths.ensure_dir(paths.roost_home())
    return FakeTable(paths.roost_home())


def fg_peer(peer_id: str, session: str | None, conn: FakeConn) -> ForegroundPeer:
    return ForegroundPeer(id=peer_id, session=session, name=peer_id, cwd="/", pid=1, conn=conn)  # type: ignore[arg-type]


def test_a_session_is_routed_to_its_live_job_first(table: FakeTable) -> None:
    router = AgentRouter(table)
    old = table.add(job("000000b1", created="2020-01-01T00:00:00Z"))
    new = table.add(job("000000b2", session=old.session, created="2021-01-01T00:00:00Z"), alive=True)
    assert router.job_for_session(old.session) is new  # live beats older
    assert router.live_peer_for_session(old.session) == new.id
    table.procs.clear()
    assert router.job_for_session(old.session) is old  # none live: the oldest
    assert router.live_peer_for_session(old.session) is None
    router.register(fg_peer("fa", old.session, FakeConn()))
    assert router.live_peer_for_session(old.session) == "fa"  # a foreground pi holds it


def test_a_message_to_an_idle_job_wakes_it(table: FakeTable) -> None:
    router = AgentRouter(table)
    target = table.add(job("000000c1", JobState.DONE))
    sender = table.add(job("000000c2", JobState.RUNNING), alive=True)
    outcome = asyncio.run(router.send_message(router.job_peer(target), router.job_peer(sender), "hello"))
    assert outcome == Outcome.STARTED
    assert table.started == [("000000c1", "a message arrived")]
    assert [i.text for i in table.mailbox(target).pending()] == ["hello"]
    sent = table.emitted[-1]
    assert (sent["type"], sent["outcome"], sent["to"]["id"]) == ("message.sent", "started", "000000c1")
    assert "hello" not in str(sent)  # the event carries no body


def test_a_report_waits_for_its_parents_session_then_goes_to_its_pi(table: FakeTable) -> None:
    router = AgentRouter(table)
    parent_session = str(Path(paths.roost_home()) / "parent.jsonl")
    child = table.add(
        job("000000d1", JobState.DONE, links=Links(parent_session=parent_session, spawned=True))
    )

    async def scenario() -> FakeConn:
        await router.route_report(child, {"result": "all done", "state": "done"})
        assert child.reports.undelivered is not None  # nobody holds the parent's session
        conn = FakeConn()
        router.register(fg_peer("fp", parent_session, conn))  # the parent's pi comes back
        for _ in range(20):  # the retry is a task of its own
            await asyncio.sleep(0)
        return conn

    conn = asyncio.run(scenario())
    assert child.reports.undelivered is None
    assert [f["event"] for f in conn.sent] == ["deliver"]
    assert "all done" in str(conn.sent[0])
    assert table.emitted[-1]["type"] == "job.report"


def test_a_handback_sent_twice_is_delivered_once(table: FakeTable) -> None:
    router = AgentRouter(table)
    parent = table.add(job("000000e1", JobState.RUNNING), alive=True)
    child = table.add(
        job("000000e2", JobState.DONE, links=Links(parent_session=parent.session, spawned=True))
    )
    report = {"result": "r", "state": "done", "id": "abc123"}
    asyncio.run(router.route_report(child, report))
    asyncio.run(router.route_report(child, dict(report)))  # the worker sent it again
    assert [i.kind for i in table.mailbox(parent).pending()] == ["report"]
    assert child.reports.last == "abc123"


def test_a_quitting_foreground_pi_hands_its_job_back(table: FakeTable) -> None:
    router = AgentRouter(table)
    record = table.add(job("000000f1", JobState.DONE))
    attach(record)
    conn = FakeConn()
    router.register(fg_peer("fq", record.session, conn))
    assert router.holders == {conn: record.id}
    table.mailbox(record).post(kind="reply", text="later", sender=None, cause="reply")
    router.peer_disconnected(conn)  # type: ignore[arg-type]
    assert not record.attached and "fq" not in router.foreground
    assert table.started == [("000000f1", "its foreground pi quit")]  # an item waited
    assert router.detach(record, "again") == "started"  # already back: says what is true


def test_only_a_spawned_job_reports_its_end(table: FakeTable) -> None:
    router = AgentRouter(table)
    parent = table.add(job("000000a1", JobState.RUNNING), alive=True)
    alone = table.add(job("000000a2", JobState.STOPPED))
    child = table.add(
        job("000000a3", JobState.STOPPED, links=Links(parent_session=parent.session, spawned=True))
    )

    async def scenario() -> None:
        router.job_ended(alone, "stopped")
        router.job_ended(child, "stopped")
        for _ in range(20):
            await asyncio.sleep(0)

    asyncio.run(scenario())
    items = table.mailbox(parent).pending()
    assert [(i.kind, i.extra.get("ended")) for i in items] == [("report", True)]


async def until(predicate: Any, what: str, timeout: float = 30.0) -> None:
    """Wait on the loop until `predicate()` holds (its tasks run meanwhile)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def test_a_report_whose_routing_failed_is_logged_and_routed_again(
    table: FakeTable, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(router_module, "REPORT_RETRY_SECONDS", 0.05)
    router = AgentRouter(table)
    parent = table.add(job("000000a6", JobState.STOPPED))  # keeps it without waking
    child = table.add(
        job("000000a7", JobState.STOPPED, links=Links(parent_session=parent.session, spawned=True))
    )
    box = table.mailbox(parent)
    post, failed = box.post, []

    def fails_once(**item: Any) -> Any:
        if not failed:
            failed.append(item["kind"])
            raise OSError(28, "No space left on device")
        return post(**item)

    monkeypatch.setattr(box, "post", fails_once)

    async def scenario() -> None:
        router.job_ended(child, "stopped")
        await until(lambda: failed, "the first attempt")
        assert child.reports.undelivered is not None  # kept meanwhile
        await until(box.pending, "the report in the parent's mailbox")
        await until(lambda: router._tasks.running == 0, "the routing to end")
        await router.close()

    with caplog.at_level(logging.ERROR, logger="roost.supervise.router"):
        asyncio.run(scenario())
    assert failed == ["report"]
    assert [(i.kind, i.extra.get("ended")) for i in box.pending()] == [("report", True)]
    assert child.reports.undelivered is None
    assert [e["outcome"] for e in table.emitted if e["type"] == "job.report"] == ["queued"]
    assert [r.getMessage() for r in caplog.records] == [
        "job 000000a7: its report could not be routed (OSError: [Errno 28] No space left "
        "on device): routing it again in 0.05s"
    ]


def test_a_report_kept_after_a_failure_goes_once_when_its_parent_comes_back(
    table: FakeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry and the parent's return (retry_undelivered) both want the kept report:
    whoever takes it from the record routes it, once."""
    monkeypatch.setattr(router_module, "REPORT_RETRY_SECONDS", 0.3)
    router = AgentRouter(table)
    parent_session = str(Path(paths.roost_home()) / "parent.jsonl")
    child = table.add(
        job("000000a8", JobState.DONE, links=Links(parent_session=parent_session, spawned=True))
    )
    save, saves = child.save, []

    def fails_once() -> None:
        saves.append(1)
        if len(saves) == 1:  # keeping it for the absent parent: the disk is full
            raise OSError(28, "No space left on device")
        save()

    monkeypatch.setattr(child, "save", fails_once)
    conn = FakeConn()

    async def scenario() -> None:
        await router.hand_over(child, {"result": "all done", "state": "done", "id": "feed01"})
        assert child.reports.undelivered is not None  # kept, and its retry is waiting
        router.register(fg_peer("fp", parent_session, conn))  # the parent's pi comes back
        await until(lambda: router._tasks.running == 0, "the retry to end")

    asyncio.run(scenario())
    assert [f["event"] for f in conn.sent] == ["deliver"]
    assert child.reports.undelivered is None and child.reports.last == "feed01"


def test_the_op_table_and_the_handlers_are_checked_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """protocol.DAEMON_OPS is the one list of ops: every op has a handler, every handler
    an op, or roostd does not start."""
    from roost.supervise.handlers import worktrees
    from roost.wire.protocol import DAEMON_OPS

    assert set(daemon_module.Daemon().handlers) == set(DAEMON_OPS)
    full = worktrees.handlers
    monkeypatch.setattr(
        worktrees, "handlers", lambda core: {k: v for k, v in full(core).items() if k != "gc"}
    )
    with pytest.raises(AssertionError, match="gc"):
        daemon_module.Daemon()


# -- rows of an old job.json -------------------------------------------------------------------
FIXTURES = Path(__file__).parent.parent / "fixtures" / "jobjson"


def test_rows_of_a_job_json_written_by_main_c0781a3_are_what_main_showed(harness: Harness) -> None:
    """`roost show --json` (a JobRow and its details) is the contract: reading the flat
    schema-1 records through the grouped JobRecord changes none of it. The .show.json files
    are what main c0781a3's `roost show --json` printed for the same two jobs (but for
    `environment`, the names of the variables of the machine that ran them: null here, as
    for a job without env.json)."""
    from roost.job.record import load_record
    from roost.supervise.handlers.jobs import show

    records = [load_record(FIXTURES / f"main-c0781a3-{name}.json") for name in ("parent", "child")]
    for record in records:
        harness.add(record)
    for record, name in zip(records, ("parent", "child"), strict=True):
        shown = asyncio.run(show(harness.daemon, FakeConn(), {"job": record.id}))["job"]  # type: ignore[arg-type]
        expected = json.loads((FIXTURES / f"main-c0781a3-{name}.show.json").read_text())
        # Fields added since (README: JSON output) come on top: the rest is unchanged.
        assert shown.pop("queue") == {"position": None, "group": None, "priority": 0}
        assert shown.pop("after") is None  # it waited on no job
        assert shown.pop("schedule") is None  # no schedule made it
        assert shown.pop("result") is None and shown.pop("outputSchema") is None
        assert shown.pop("sandbox") is None  # made without --sandbox
        assert shown.pop("approvals") is None  # no approval policy
        assert shown["worktree"].pop("origin") == record.worktree["origin"]  # where it started
        assert list(shown) == list(expected)
        for key in ("dir", "mailbox"):  # under this test's ROOST_HOME
            assert Path(shown.pop(key)).parts[-2:] == Path(expected.pop(key)).parts[-2:]
        assert shown == expected


# -- `list` as `roost ls --json` prints it ------------------------------------------------------
def listed(harness: Harness, **args: Any) -> dict[str, Any]:
    return asyncio.run(job_ops.list_jobs(harness.daemon, FakeConn(), args))  # type: ignore[arg-type]


def test_list_text_is_the_rows_as_the_cli_prints_them(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`list` with `text` (what `roost ls --json` asks): roostd's document is the one the
    CLI would make of the rows, escapes included (a summary with C1, bidi and a newline);
    with `tree`, children under their parents, as `roost ls --tree --json` orders them."""
    import orjson

    from roost.job.tree import tree_order
    from roost.text.escapes import json_text
    from roost.wire import protocol

    monkeypatch.setattr(protocol, "_fast", orjson)  # as in roostd: orjson makes the text
    root = job("00000001", summary="plain \x9b[2J \u202eevil\u202c\nnext")
    harness.add(root)
    harness.add(job("00000002", links=Links(parent_session=root.session, root_session=root.session)))
    harness.add(job("00000003"))
    rows = listed(harness)["jobs"]
    text = listed(harness, text=True)["text"]
    assert (
        text
        == json_text(rows)
        == json.dumps(rows, indent=2, ensure_ascii=False)
        .replace("\x9b", "\\u009b")
        .replace("\u202e", "\\u202e")
        .replace("\u202c", "\\u202c")
    )
    assert json.loads(text) == rows
    tree = json.loads(listed(harness, text=True, tree=True)["text"])
    assert tree == tree_order(rows) == listed(harness, tree=True)["jobs"]
    assert [(r["id"], r["depth"]) for r in tree] == [("00000001", 0), ("00000002", 1), ("00000003", 0)]


def test_list_text_past_the_frame_limit_gives_the_rows(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The indented document is ~1.6x the rows' frame: where it would not fit in a frame,
    the rows come instead (the CLI prints them itself), never an error."""
    from roost.wire import protocol

    for n in range(1, 4):
        harness.add(job(f"0000000{n}", summary="x" * 2000))
    rows = listed(harness)["jobs"]
    rows_frame = len(protocol.encode({"type": "response", "id": 1, "ok": True, "result": {"jobs": rows}}))
    monkeypatch.setattr(protocol, "MAX_FRAME", rows_frame + 100)
    assert listed(harness, text=True) == {"jobs": rows}
    monkeypatch.setattr(protocol, "MAX_FRAME", 10 * rows_frame)
    assert set(listed(harness, text=True)) == {"text"}
