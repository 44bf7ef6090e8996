"""roostd: the per-user daemon. Owns the job table, the socket and the workers.

Start-up order matters: the daemon lock (one daemon per ROOST_HOME) is taken before the
pid file is written and before the socket is bound, so a second daemon can never unlink
a live daemon's socket. Workers survive the daemon: on start it re-adopts the live ones
(they reconnect with their token) and restarts those that died meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
from pathlib import Path
from typing import Any, Unpack

from roost import __version__
from roost.config import Settings, load_settings
from roost.events.writer import EventLog
from roost.host import paths
from roost.host import trusted as trust
from roost.host.fsutil import atomic_write_text
from roost.job.record import Facts, JobRecord
from roost.job.states import JOBS, Attach, JobKind, JobState, WorkerExit
from roost.locks import holder_is_alive, read_holder
from roost.mailbox import Mailbox, MailboxError
from roost.supervise import admission, budget, jobstore, logsetup, searchkeeper
from roost.supervise.admission import DAEMON_BOUNDS, Admission, connection_cap, raise_fd_limit
from roost.supervise.base import JobListener
from roost.supervise.core import Core
from roost.supervise.dependencies import Dependencies
from roost.supervise.handlers import agents, attach, events, inbox, jobs, queue, schedules, worker, worktrees
from roost.supervise.handlers import results as results_ops
from roost.supervise.handlers import search as search_ops
from roost.supervise.handlers import streamed as streamed_ops
from roost.supervise.handlers import usage as usage_ops
from roost.supervise.hooks import HookRunner
from roost.supervise.idle import IdleKeeper
from roost.supervise.jobqueue import JobQueue
from roost.supervise.jobs import agent_catalog
from roost.supervise.placement import Placement
from roost.supervise.router import AgentRouter
from roost.supervise.runner import LocalRunner
from roost.supervise.scheduler import Scheduler
from roost.supervise.usagebook import UsageBook
from roost.supervise.workerexits import WorkerExits
from roost.supervise.workers import WorkerProcess, evict_strangers, stop_leftovers
from roost.wire import protocol
from roost.wire.connection import Connection, Handler, serve_connection
from roost.wire.ops import DAEMON_OPS, Op
from roost.worktrees import row_fields

log = logging.getLogger("roostd")


class AlreadyRunning(Exception):
    """Another roostd holds this ROOST_HOME."""


class Daemon:
    def __init__(self) -> None:
        self.home = paths.roost_home()
        self.jobs: dict[str, JobRecord] = {}
        self.procs: dict[str, WorkerProcess] = {}
        self._mailboxes: dict[str, Mailbox] = {}
        self.connections: set[Connection] = set()
        self.subscribers: set[Connection] = set()
        self.admission = Admission(connection_cap(1024), self.connections, self._kept)
        self._changed: dict[str, asyncio.Event] = {}
        self._saver = jobstore.RecordSaver(self)
        self._stopping = asyncio.Event()
        self._lock_file: Any = None
        self._any_changed = asyncio.Event()
        # Called by job_changed, in the order they subscribed: the services below, as they
        # are built (the queue first: a slot freed, its positions cleared, before anyone
        # weighs or shows the job; then the idle keeper, the dependencies, the search
        # keeper), then roostd's own (`wait_change`'s waiters, the rows pushed to
        # subscribers: last, so a row shows what every service made of the change).
        self.job_listeners: list[JobListener] = []
        self.agents = AgentRouter(self)
        self.usage_book = UsageBook()
        self.queue = JobQueue(self)  # maxRunning, groups, the order of queued jobs
        self.idle = IdleKeeper(self)  # warm windows and the live-pi cap
        # Local workers (with a spare), or a remote runner's per job (supervise/placement.py).
        self.runner = Placement(
            self, LocalRunner(spare=lambda: self.settings().spareWorker), self._on_connection
        )
        self.deps = Dependencies(self)  # jobs waiting on others (`--after`)
        self.exits = WorkerExits(self, self._saver.save)  # what a worker's end means to its job
        # Every event goes through self.events.emit: appended to events.jsonl, pushed to
        # followers (`roost events --follow`), handed to the hooks.
        self.events = EventLog(self.home, enabled=lambda: self.settings().eventLog)
        self.hooks = HookRunner(self.settings)
        self.events.listeners.append(self.hooks.on_event)
        self.schedules = Scheduler(self)  # timers and file triggers: runs that start by themselves
        self.search = searchkeeper.SearchKeeper(self)  # the search index's one writer
        self.job_listeners += [self._wake_waiters, self._push_row]
        self.handlers = self._build_handlers()

    # -- settings, mailboxes ------------------------------------------------------------
    @staticmethod
    def settings() -> Settings:
        return load_settings()

    def mailbox(self, record: JobRecord) -> Mailbox:
        """The job's mailbox, opened once: opening makes its directories and sweeps tmp/,
        and the object keeps its parsed items, so rows and checks stay cheap."""
        box = self._mailboxes.get(record.id)
        if box is None:
            box = Mailbox(record.mailbox_dir)  # its caps: the mailbox defaults (README: Mailboxes)
            self._mailboxes[record.id] = box
        return box

    def add_job(self, record: JobRecord) -> None:
        """Register a new job (the one place a job comes into being)."""
        self.jobs[record.id] = record
        self.events.emit(
            "job.created", record, kind=record.kind, cwd=record.cwd, parent=record.links.parent_peer
        )

    def forget_job(self, record: JobRecord) -> None:
        """Drop a removed job from every table (its files are the caller's business)."""
        if self.jobs.pop(record.id, None) is not None:
            self.events.emit("job.removed", record)
        self.procs.pop(record.id, None)
        self._mailboxes.pop(record.id, None)
        self.idle.forget(record)

    # -- lifecycle --------------------------------------------------------------------------
    def _take_daemon_lock(self) -> None:
        trust.check_home(self.home)  # before and after it is made: never another's folder
        paths.ensure_dir(self.home)
        trust.check_home(self.home)
        lock_path = self.home / "roostd.lock"
        # Held for the daemon's whole life; never opened through a planted symlink.
        handle = os.fdopen(
            os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "a+"
        )
        if not admission.take_daemon_lock(handle, read_pid_file):  # waits out a dying roostd's hold
            handle.close()
            pid = read_pid_file()
            raise AlreadyRunning(f"roostd is already running for {self.home} (pid {pid})")
        self._lock_file = handle
        atomic_write_text(paths.pid_file(), f"{os.getpid()}\n")

    async def run(self) -> None:
        self._take_daemon_lock()
        paths.ensure_dir(paths.jobs_dir())
        paths.ensure_dir(paths.locks_dir())
        sock = paths.socket_path()
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()  # stale: we hold the daemon lock, so no live daemon owns it
        fd_limit = raise_fd_limit()
        self.admission.cap = connection_cap(fd_limit)
        log.info("open-file limit %d: at most %d connections", fd_limit, self.admission.cap)
        old_umask = os.umask(0o177)
        try:
            self.admission.start(str(sock), self._on_connection)
        finally:
            os.umask(old_umask)
        os.chmod(sock, 0o600)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopping.set)
        self.events.open()  # under the daemon lock: one appender per log
        self.events.emit("daemon.started", pid=os.getpid(), version=__version__)
        self._load_jobs()
        self.search.start()  # after the jobs: each one's files caught up from its offsets
        self.runner.prepare()  # a pi worker started ahead of the next job (supervise.spare)
        self.schedules.start()  # after the jobs: a catch-up firing may reply to one
        # What is loaded now (modules, the job records) lives as long as roostd: out of the
        # collector's full passes, which with 1,000 records took up to ~270 ms of a `list`
        # (README: Scale). Start-up's garbage is freed first, or it would be kept for good.
        gc.collect()
        gc.freeze()
        log.info(
            "roostd %s listening on %s (pid %d, %d jobs)", __version__, sock, os.getpid(), len(self.jobs)
        )
        try:
            await self._stopping.wait()
        finally:
            await self._shutdown()

    def request_shutdown(self) -> None:
        self._stopping.set()

    async def _shutdown(self) -> None:
        log.info("roostd shutting down; workers keep running")
        self.admission.close()
        for conn in list(self.connections):
            conn.close()
        for proc in self.procs.values():
            proc.forget()
        self.runner.close()
        self.idle.close()
        await self.schedules.close()
        await self.agents.close()  # a report waiting to be routed again stays in its record
        paths.socket_path().unlink(missing_ok=True)
        paths.pid_file().unlink(missing_ok=True)
        self.events.emit("daemon.stopped", pid=os.getpid())
        for sub in list(self.events.subscriptions):
            self.events.unsubscribe(sub)
        self.events.close()
        self.hooks.close()

    def _load_jobs(self) -> None:
        self.jobs, recovered = jobstore.load_all()
        for record in list(self.jobs.values()):
            try:
                self._resume_job(record)
            except Exception as exc:  # one job must not keep roostd (and every job) down
                log.exception("job %s: could not be resumed", record.id)
                record.process.worker_pid = None
                with contextlib.suppress(Exception):
                    self.set_state(
                        record,
                        JobState.FAILED,
                        busy=False,
                        status="",
                        error=f"roostd could not resume it: {exc}",
                    )
        for record in recovered:
            # Nothing runs from an unreadable record: its worker and pi would run on, refused.
            stop_leftovers(record)
            self.jobs[record.id] = record
        self.deps.resume()  # waiting jobs weighed again: their dependencies may have ended
        self.queue.schedule()  # the jobs that held a slot hold it again; the queue goes on

    def _resume_job(self, record: JobRecord) -> None:
        """After roostd's start: adopt the job's live worker, or start one if it was busy."""
        proc = self.proc(record)
        if proc.adopt():  # the pid and start time in its record
            log.info("job %s: adopting live worker pid %s", record.id, record.process.worker_pid)
            return
        record.process.worker_pid = None
        evict_strangers(record.dir)  # a lock holder roostd never recorded is no worker of ours
        if record.attached:
            holder = read_holder(record.session) if record.session else None
            if holder is not None and holder_is_alive(holder):
                return  # a foreground pi still holds it; it re-registers on its next call
            record.set_attach(Attach.DETACHED, "its foreground pi is gone")
            self._saver.save(record)
        if record.state in (JobState.STOPPED, JobState.FAILED, JobState.QUEUED, JobState.WAITING):
            return  # a queued job starts from the queue, a waiting one from self.deps
        if record.kind == JobKind.SHELL:
            self.exits.shell_ended_meanwhile(record)
            return
        if record.state in (JobState.STARTING, JobState.RUNNING):
            # It was working when the last roostd went away and its worker is gone.
            self.start_worker(record, "worker died while roostd was down")
        elif self.mailbox(record).pending():
            self.start_worker(record, "an item is waiting")
        # Otherwise it is idle (done, needs_input, reaped): an item starts it.

    # -- connections ---------------------------------------------------------------------
    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer, DAEMON_BOUNDS)
        self.connections.add(conn)
        try:
            if await conn.send(protocol.greeting()):
                await serve_connection(conn, self.handlers, DAEMON_OPS, self._authorize)
        except asyncio.CancelledError:
            pass  # shutting down
        finally:
            self.connections.discard(conn)
            self.subscribers.discard(conn)
            for sub in conn.info.pop("subscriptions", ()):
                self.events.unsubscribe(sub)
            self._connection_closed(conn)

    def _kept(self, conn: Connection) -> bool:
        """Never closed to make room: it waits for pushed events by design."""
        return conn in self.subscribers or bool(conn.info.get("subscriptions") or conn.info.get("follows"))

    def _authorize(self, conn: Connection, op: Op) -> str | None:
        if op.caller == "worker" and conn.job_id is None:
            return f"{op.name}: only a worker connection (after worker_hello) may call it"
        if op.caller == "peer" and conn.peer_id is None:
            return f"{op.name}: register first (peer_register), or call it from a job"
        return None

    def _connection_closed(self, conn: Connection) -> None:
        if conn.job_id is not None:
            proc = self.procs.get(conn.job_id)
            if proc is not None and proc.conn is conn:
                proc.conn = None
        if conn.job_id is None:
            self.agents.peer_disconnected(conn)

    def _build_handlers(self) -> dict[str, Handler]:
        handlers: dict[str, Handler] = {}
        core: Core = self  # checks, for mypy, that Daemon is what the handlers expect
        for module in (
            jobs,
            worker,
            agents,
            attach,
            events,
            usage_ops,
            worktrees,
            inbox,
            queue,
            schedules,
            streamed_ops,
            results_ops,
            search_ops,
        ):
            handlers.update(module.handlers(core))
        missing = set(DAEMON_OPS) ^ set(handlers)
        assert not missing, f"ops without a handler (or handlers without an op): {missing}"
        return handlers

    # -- jobs ------------------------------------------------------------------------------
    def proc(self, record: JobRecord) -> WorkerProcess:
        """The job's WorkerProcess, made on first use (one per job)."""
        proc = self.procs.get(record.id)
        if proc is None:
            proc = WorkerProcess(record, self.settings, self._worker_event, self.runner)
            self.procs[record.id] = proc
        return proc

    def find_job(self, ref: str) -> JobRecord:
        """A job by id or exact unique name; RequestError otherwise."""
        from roost.wire.protocol import NOT_FOUND, RequestError

        record = self.jobs.get(ref)
        if record is not None:
            return record
        named = [r for r in self.jobs.values() if r.name == ref]
        if len(named) == 1:
            return named[0]
        if not named:
            raise RequestError(NOT_FOUND, f"no job with id or name {ref!r} (roost ls lists them)")
        ids = ", ".join(sorted(r.id for r in named))
        raise RequestError(NOT_FOUND, f"the name {ref!r} is ambiguous (jobs {ids}): use the id")

    def set_state(
        self, record: JobRecord, target: JobState, reason: str | None = None, **facts: Unpack[Facts]
    ) -> None:
        """The one function that changes a job's state: checks, persists, announces (the
        job.state event, and job.needs_input / job.failed on entering those states)."""
        if reason is None:
            reason = str(facts.get("error") or facts.get("status") or "")
        source = record.state
        record.state = JOBS.move(source, target, f"job {record.id}", reason)
        record.apply(facts)
        self.job_changed(record)
        if source == JobState.STARTING and target != source:
            self.runner.worker_up(record.id)  # its pi is up: the next spare may start
        if source == target or record.id not in self.jobs:
            return
        self.events.emit("job.state", record, **{"from": source.value}, to=target.value, reason=reason)
        if target == JobState.NEEDS_INPUT:
            self.events.emit(
                "job.needs_input",
                record,
                question=record.question,
                dialog=record.dialog,
                options=record.options if record.dialog else None,
            )
        elif target == JobState.FAILED:
            self.events.emit("job.failed", record, error=record.error)

    def job_changed(self, record: JobRecord, persist: bool = True) -> None:
        """After any change of a job: saved (`persist`), then every listener told, in
        order (`job_listeners`, Daemon.__init__ says which)."""
        if persist and record.id in self.jobs:
            self._saver.save(record)
        for listener in self.job_listeners:
            listener(record)

    def _wake_waiters(self, record: JobRecord) -> None:
        event = self._changed.pop(record.id, None)
        if event is not None:
            event.set()
        self._any_changed.set()
        self._any_changed = asyncio.Event()

    def _push_row(self, record: JobRecord) -> None:
        if self.subscribers:
            row = self.row(record)
            for conn in list(self.subscribers):  # bounded: a client that never reads is dropped
                conn.push(protocol.event("job", row=row))

    async def wait_any_change(self, timeout: float | None) -> bool:
        """Until any job changes (or `timeout`); False on timeout."""
        try:
            await asyncio.wait_for(self._any_changed.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def wait_change(self, record: JobRecord, timeout: float | None) -> bool:
        event = self._changed.setdefault(record.id, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def start_worker(self, record: JobRecord, why: str, *, admitted: bool = False) -> None:
        """Start the job's worker, if the queue's gate lets it (`admitted`: the caller asked
        the gate already, see JobQueue); with no slot free the job waits queued."""
        proc = self.proc(record)
        if proc.alive or record.recovered:  # a stand-in for an unreadable record never runs
            return
        if not admitted and not self.queue.admit(record, why):
            return
        log.info("job %s: starting worker (%s)", record.id, why)
        record.process.exit_code = None
        if record.state != JobState.STARTING:
            self.set_state(record, JobState.STARTING, why, status="starting", error=None)
        if record.kind == JobKind.PI:
            record.agent_catalog = agent_catalog(record.cwd)
        try:
            saved = proc.spawn()
        except OSError as exc:  # e.g. worker.log replaced by a symlink: refused, not followed
            log.error("job %s: could not start its worker: %s", record.id, exc)
            self.set_state(
                record,
                JobState.FAILED,
                busy=False,
                status="",
                error=f"roostd could not start its worker: {exc}",
            )
            return
        if record.kind == JobKind.SHELL:  # a shell worker sends no hello: it runs once spawned
            self.set_state(record, JobState.RUNNING, status="running")
        elif not saved:  # spawn saved it with the worker's identity: one fsync, not two
            self._saver.save(record)

    def _worker_event(self, proc: WorkerProcess, how: WorkerExit, detail: str) -> None:
        self.exits.report(proc.record, how, detail)  # one handler per WorkerExit

    # -- rows ---------------------------------------------------------------------------------
    def row(self, record: JobRecord) -> dict[str, Any]:
        """The JobRow contract (README: JSON output)."""
        pending = {"replies": 0, "agent": 0}
        if record.id in self.jobs:  # a removed job's mailbox is gone: never recreate it
            with contextlib.suppress(OSError, MailboxError):
                pending = self.mailbox(record).counts()
        parent = self.agents.live_peer_for_session(record.links.parent_session)
        return {
            "id": record.id,
            "name": record.name,
            "kind": record.kind,
            "state": record.state.value,
            "status": record.status,
            "summary": record.summary,
            "question": record.question,
            "dialog": record.dialog,
            "options": record.options if record.dialog else None,
            "cwd": record.cwd,
            "session": record.session,
            "parent": parent,
            "agent": record.agent,
            "parentSession": record.links.parent_session,
            "rootSession": record.links.root_session,
            "worktree": row_fields(record.worktree),
            "sandbox": record.sandbox,  # roost.sandbox
            "pending": pending,
            "usage": budget.row_usage(self, record),
            "result": record.result,  # the last valid structured result (roost result)
            "created": record.created,
            "updated": record.updated,
            **self.queue.row_fields(record),  # `queue`; a queued job's status: its position
            **self.deps.row_fields(record),  # `after`: what it waits (or waited) on
            "schedule": self.schedules.job_field(record.id),  # the schedule that started it
        }


def read_pid_file() -> int | None:
    try:
        return int(Path(paths.pid_file()).read_text().strip())
    except (OSError, ValueError):
        return None


def main() -> int:
    logsetup.setup(paths.roost_home() / "roostd.log", os.environ.get("ROOST_LOG_LEVEL", "INFO"))
    protocol.use_fast_json()
    try:
        asyncio.run(Daemon().run())
    except (AlreadyRunning, trust.UntrustedFile) as exc:
        log.error("%s", exc)
        return 1
    return 0
