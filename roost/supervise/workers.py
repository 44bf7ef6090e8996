"""Worker processes as roostd supervises them: spawn, adopt, exit, backoff, give up.

Each job with a process has one WorkerProcess. Its lifecycle is `roost.job.states.ProcState`;
every move goes through `_set_state`. Exits are noticed through a pidfd (event-driven, no
polling), which works for our own children and for workers adopted from a previous roostd
alike. Workers run in their own process session (`start_new_session`), so a roostd killed
with SIGKILL takes no worker (and no pi) with it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from roost.host import procid
from roost.job.states import ATTACH_REASON, EXIT_FATAL, PROCS, REAP_REASON, JobKind, ProcState, WorkerExit
from roost.locks import LockError, SessionLock, holder_is_alive, joblock, read_holder, writers
from roost.locks.holding import other_writer
from roost.supervise.runner import Launched, LocalRunner, RemoteLaunch, Runner, WorkerSpec, is_remote

if TYPE_CHECKING:
    from roost.config import Settings
    from roost.job.record import JobRecord
    from roost.wire.connection import Connection

log = logging.getLogger(__name__)

BACKOFF_CAP_SECONDS = 30.0


class WorkerProcess:
    """The process side of one job. `report(proc, how, detail)` tells the daemon of every
    exit and of each backoff restart (`how`: a states.WorkerExit)."""

    def __init__(
        self,
        record: JobRecord,
        settings_source: Callable[[], Settings],
        report: Callable[[WorkerProcess, WorkerExit, str], None],
        runner: Runner | None = None,
    ) -> None:
        self.record = record
        self.state = ProcState.STOPPED
        self.conn: Connection | None = None
        self._settings = settings_source
        self._report = report
        self._runner: Runner = runner or LocalRunner()
        self._launched: Launched | None = None  # the process this roostd started
        self._pidfd: int | None = None
        self._remote: RemoteLaunch | None = None  # a worker on another machine, its runner watching
        self._session_lock: SessionLock | None = None  # held by roostd for a remote worker's pi
        self._restart: asyncio.TimerHandle | None = None
        self._exited = asyncio.Event()
        self.expected_exit: str | None = None  # why we asked it to go (stop, reap, rm)
        self.fatal_reason: str | None = None  # from the worker's worker_exiting
        # Clear while the record may be stale: a worker adopted by a roostd that just
        # started has not yet said where its run is (its first worker_update).
        self.reported = asyncio.Event()
        self.reported.set()

    # -- state -----------------------------------------------------------------------
    def _set_state(self, target: ProcState) -> None:
        self.state = PROCS.move(self.state, target, f"job {self.record.id}")

    @property
    def alive(self) -> bool:
        return self._pidfd is not None or self._remote is not None

    @property
    def exited(self) -> asyncio.Event:
        """Set once the current process has exited."""
        return self._exited

    @property
    def connected(self) -> bool:
        return self.conn is not None and not self.conn.closed.is_set()

    # -- starting ----------------------------------------------------------------------
    def command(self) -> list[str]:
        module = "roost.worker.shell" if self.record.kind == JobKind.SHELL else "roost.worker"
        return [sys.executable, "-m", module, self.record.id]

    def spawn(self) -> bool:
        """Start a fresh worker process for the job. True when its record, with the new
        worker's identity, is saved (the caller need not save it again)."""
        if self._restart is not None:
            self._restart.cancel()
            self._restart = None
        self.expected_exit = None
        self.fatal_reason = None
        self._exited = asyncio.Event()
        if self.adopt():
            # The worker its record names is alive (a roostd that never saw its exit):
            # a second one must never start.
            log.warning(
                "job %s: adopted live worker pid %s instead of starting another",
                self.record.id,
                self.record.process.worker_pid,
            )
            return False
        refusal = self._remote_refusal()
        if refusal is not None:  # as a local worker refuses before its pi starts: FATAL
            log.error("job %s: not started on its runner: %s", self.record.id, refusal)
            if self.state != ProcState.STARTING:
                self._set_state(ProcState.STARTING)
            self._set_state(ProcState.FATAL)
            self._report(self, WorkerExit.FATAL, refusal)
            return False
        evict_strangers(self.record.dir)
        cwd = self.record.cwd if os.path.isdir(self.record.cwd) else str(self.record.dir)
        # The worker waits on `go` before it takes the job's lock or reads anything: it
        # runs only once its pid and start time are saved, so a worker no record names
        # never exists (a roostd killed in between never releases it, and it exits).
        launched = self._runner.launch(
            WorkerSpec(
                self.record.id,
                self.command(),
                cwd,
                self.record.dir / "worker.log",
                spare=self.record.kind == JobKind.PI,
            )
        )
        self._launched = launched
        process = self.record.process
        process.worker_pid, process.worker_start = launched.pid or None, launched.start_time  # 0: remote
        process.worker_ticks, process.worker_boot = launched.start_ticks, launched.boot_id
        try:
            self._watch_launched(launched)
        except BaseException:
            launched.cancel()
            raise
        self._set_state(ProcState.STARTING)
        if self.record.kind == JobKind.SHELL:  # a shell worker never says hello: it runs once spawned
            self._set_state(ProcState.RUNNING)
        try:
            self.record.save()
        except OSError as exc:  # not saved: never released, the worker exits
            log.error("job %s: the new worker's pid could not be saved (%s): it exits", self.record.id, exc)
            self.fatal_reason = f"roostd could not record its worker: {exc}"
            launched.cancel()
            return False
        try:
            launched.go()
        except OSError as exc:  # it is gone already: its exit is on its way
            log.error("job %s: the new worker could not be released: %s", self.record.id, exc)
        return True

    def _remote_refusal(self) -> str | None:
        """Why a pi job's worker must not start on a remote runner: another process writes
        its session on this machine (roost.locks.holding's one rule). A remote worker's pi
        cannot see this machine's writers, so roostd looks for it, on every start, a
        restart after a crash included; a local worker looks itself (Worker.check_lock)."""
        kind_of = getattr(self._runner, "kind_of", None)  # a Placement; a bare runner is local
        session = self.record.session
        if self.record.kind != JobKind.PI or not session:
            return None
        if kind_of is None or kind_of(self.record) == "local":
            return None
        held = other_writer(session, self.record.id)
        return held.message(self.record.id) if held is not None else None

    def adopt(self) -> bool:
        """Take over the live worker the job's record names (its pid and start time, saved
        before the worker ran): False when it is gone. A process that merely holds the
        job's worker lock is never adopted: any process of the user can take a lock."""
        process = self.record.process
        pid = process.worker_pid
        if pid is None:
            return self._adopt_remote()
        if not procid.same_process(pid, process.worker_start, process.worker_ticks, process.worker_boot):
            return False
        self._launched = None
        self._exited = asyncio.Event()
        try:
            self._watch(pid)
        except ProcessLookupError:
            return False
        self._set_state(ProcState.STARTING)  # RUNNING once it reconnects with its token
        if self.record.kind == JobKind.SHELL:
            self._set_state(ProcState.RUNNING)  # never reports: its exit says it all
        else:
            self.reported.clear()  # its run may have ended while no roostd listened
        return True

    def _adopt_remote(self) -> bool:
        """Take over the remote attempt a previous roostd started (its runner knows it)."""
        adopt = getattr(self._runner, "adopt", None)
        launched = adopt(self.record) if adopt is not None else None
        if launched is None:
            return False
        self._launched = launched
        self._exited = asyncio.Event()
        self._watch_launched(launched)
        launched.go()
        self._set_state(ProcState.STARTING)  # RUNNING once it reconnects with its token
        self.reported.clear()
        return True

    def _watch_launched(self, launched: Launched) -> None:
        if is_remote(launched):
            self._remote = launched
            self._hold_session()
            launched.on_exit(self._remote_exit)
        else:
            self._watch(launched.pid)

    def not_the_worker(self, pid: int) -> str | None:
        """Why the live process `pid` is not the job's worker, or None when it is: the pid
        roostd saved when it started (or adopted) it, and still the process that started
        then (its start ticks since boot, or its start time in a record of an older roostd:
        procid.matches). Says which of the two failed, and with what."""
        process = self.record.process
        if process.worker_pid != pid:
            return f"job {self.record.id}: its worker is pid {process.worker_pid}, not pid {pid}"
        if procid.same_process(pid, process.worker_start, process.worker_ticks, process.worker_boot):
            return None
        start, ticks, boot = procid.identity(pid)
        now = "gone" if start is None else f"started at {_when(start, ticks, boot)}"
        saved = _when(process.worker_start, process.worker_ticks, process.worker_boot)
        return (
            f"job {self.record.id}: pid {pid} is not the worker roostd started: it {now}, "
            f"the worker started at {saved}"
        )

    def _watch(self, pid: int) -> None:
        self._pidfd = os.pidfd_open(pid)
        asyncio.get_running_loop().add_reader(self._pidfd, self._handle_exit)

    def connected_as_worker(self, conn: Connection) -> None:
        self.conn = conn
        if self.state == ProcState.STARTING:
            self._set_state(ProcState.RUNNING)

    # -- exits ---------------------------------------------------------------------------
    def _handle_exit(self) -> None:
        assert self._pidfd is not None
        asyncio.get_running_loop().remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = None
        code: int | None = None
        if self._launched is not None:
            code = self._launched.wait()
            self._launched = None
        self._exited_with(code)

    def _hold_session(self) -> None:
        """A remote worker's pi locks its node's copy of the session only: roostd holds this
        machine's writer lock for it (peer: the job) until its attempt ends, so a foreground
        pi on the session is refused and `roost attach` takes it over as with a local job's pi
        (docs/locks.md)."""
        if self.record.kind != JobKind.PI or not self.record.session or self._session_lock is not None:
            return
        lock = SessionLock(self.record.session, peer=self.record.id)
        try:
            if lock.acquire():
                self._session_lock = lock
                return
            holder = lock.holder()
        except LockError as exc:
            log.warning("job %s: the session's writer lock could not be taken: %s", self.record.id, exc)
            return
        who = f"pid {holder.pid}" if holder is not None else "another process"
        log.warning("job %s: its session's writer lock is held by %s", self.record.id, who)

    def _let_go_of_session(self) -> None:
        if self._session_lock is not None:
            lock, self._session_lock = self._session_lock, None
            # The session as roost leaves it, as a local worker notes it when its pi exits:
            # a pi outside roost (retitled, no lock) that writes it next is found by that.
            writers.remember(str(self.record.session), str(self.record.dir))
            try:
                lock.release()
            except LockError as exc:
                log.warning("job %s: the session's writer lock: %s", self.record.id, exc)

    def _remote_exit(self, code: int | None) -> None:
        self._let_go_of_session()  # before its exit is told: an attach waiting on it takes it next
        self._remote = None
        self._launched = None
        self._exited_with(code)

    def _exited_with(self, code: int | None) -> None:
        self.record.process.worker_pid = None
        self.record.process.worker_start = None
        self.record.process.worker_ticks = self.record.process.worker_boot = None
        self.conn = None
        self._exited.set()
        self.reported.set()  # its end is roostd's to say now
        if code == joblock.EXIT_DUPLICATE:  # a process roostd never started held the lock
            evict_strangers(self.record.dir)
        how, detail = self._classify(code)
        self._report(self, how, detail)

    def _classify(self, code: int | None) -> tuple[WorkerExit, str]:
        """How the process ended, and the detail: a reason, or a shell command's code."""
        if self.record.kind == JobKind.SHELL and self.expected_exit is None:
            code = self._shell_exit_code(code)
            self._set_state(ProcState.EXITED)
            return WorkerExit.SHELL, str(code) if code is not None else "unknown"
        if self.expected_exit == REAP_REASON:
            self._set_state(ProcState.EXITED)
            return WorkerExit.REAPED, self.expected_exit
        if self.expected_exit == ATTACH_REASON or (self.expected_exit is None and self.record.attached):
            # It let go (or died while letting go) for `roost attach`: a foreground pi is
            # about to own the session, so no worker may be started for it now.
            self._set_state(ProcState.EXITED)
            return WorkerExit.RELEASED, ATTACH_REASON
        if self.expected_exit is not None:
            self._set_state(ProcState.EXITED)
            return WorkerExit.STOPPED, self.expected_exit
        if code == EXIT_FATAL or self.fatal_reason:
            self._set_state(ProcState.FATAL)
            return WorkerExit.FATAL, self.fatal_reason or "worker refused to start"
        now = time.time()
        settings = self._settings()
        window = settings.restartWindowSeconds
        limit = settings.restartMaxCrashes
        self.record.process.crashes = [t for t in self.record.process.crashes if now - t < window] + [now]
        how = (
            f"exit code {code}"
            if code is not None and code >= 0
            else (f"signal {-code}" if code is not None else "exited")
        )
        if len(self.record.process.crashes) >= limit:
            self._set_state(ProcState.FATAL)
            return WorkerExit.GAVE_UP, (
                f"worker crashed {len(self.record.process.crashes)} times within {window:g}s "
                f"(last: {how}); roostd gave up"
            )
        base = settings.restartBackoffSeconds
        delay = min(base * 2 ** (len(self.record.process.crashes) - 1), BACKOFF_CAP_SECONDS)
        self._set_state(ProcState.BACKOFF)
        self._restart = asyncio.get_running_loop().call_later(delay, self._restart_now)
        return WorkerExit.CRASHED, f"worker {how}; restarting in {delay:.1f}s"

    def _shell_exit_code(self, code: int | None) -> int | None:
        if code is not None:
            return code
        try:  # an adopted shell job: its wrapper wrote the status beside the log
            data = json.loads((self.record.dir / "exit.json").read_text())
            return int(data["code"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _restart_now(self) -> None:
        self._restart = None
        if self.state == ProcState.BACKOFF:
            self.spawn()
            if not self._refused():  # else spawn reported why
                self._report(self, WorkerExit.RESTARTED, "")

    def _refused(self) -> bool:
        return self.state == ProcState.FATAL

    # -- stopping ------------------------------------------------------------------------
    async def stop(self, reason: str, timeout: float) -> None:
        """Make the worker exit on purpose and wait for it (SIGKILL after `timeout`)."""
        self.expected_exit = reason
        if self._restart is not None:
            self._restart.cancel()
            self._restart = None
            if self.state == ProcState.BACKOFF:
                self._set_state(ProcState.EXITED)
        if self._remote is not None:
            await self._stop_remote(self._remote, reason, timeout)
            return
        pid = self.record.process.worker_pid
        if self._pidfd is None or pid is None:
            return
        if not await self._ask_to_stop(reason):
            self._signal(pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self._exited.wait(), timeout)
        except TimeoutError:
            log.warning("job %s worker did not stop in %.0fs: killing it", self.record.id, timeout)
            self._signal(pid, signal.SIGKILL)
            await self._exited.wait()

    async def _ask_to_stop(self, reason: str) -> bool:
        """Tell a connected worker to stop (False: it could not be told)."""
        if not self.connected:
            return False
        from roost.wire import protocol

        assert self.conn is not None
        return await self.conn.send(protocol.event("stop", reason=reason))

    async def _stop_remote(self, remote: RemoteLaunch, reason: str, timeout: float) -> None:
        if not await self._ask_to_stop(reason):
            remote.kill()
        try:
            await asyncio.wait_for(self._exited.wait(), timeout)
        except TimeoutError:
            log.warning("job %s remote worker did not stop in %.0fs: stopping it", self.record.id, timeout)
            remote.kill()
            await self._exited.wait()

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pid, sig)  # the worker leads its own process group (and so its pi)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(pid, sig)

    def forget(self) -> None:
        """Stop watching (daemon shutdown): the process keeps running for the next roostd."""
        if self._restart is not None:
            self._restart.cancel()
            self._restart = None
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self._remote is not None:
            self._remote.forget()
            self._remote = None
        self._let_go_of_session()


def _when(start: float | None, ticks: int | None, boot: str | None) -> str:
    """A process start as `not_the_worker` names it: the time, then its ticks and boot."""
    since_boot = f" (tick {ticks} of boot {boot[:8]})" if ticks is not None and boot else ""
    return f"{start!r}{since_boot}"


EVICT_GRACE_SECONDS = 2.0


def evict_strangers(job_dir: Path, keep: int | None = None) -> list[int]:
    """Stop every process that holds the job's worker lock (as the kernel says) other than
    `keep`: not a worker roostd started and recorded (roostd records before a worker may take
    the lock), so either a process that took it to pass for the worker, or the worker of a
    record that was lost. Its process group (its pi) goes with it. The stopped pids."""
    stopped = []
    for pid in joblock.kernel_holders(job_dir):
        if pid in (keep, os.getpid()):
            continue
        start, ticks, boot = procid.identity(pid)
        if procid.stop_exact(pid, start, EVICT_GRACE_SECONDS, ticks, boot):
            log.warning("%s: stopped pid %s, which held its worker lock", job_dir.name, pid)
            stopped.append(pid)
    return stopped


def stop_leftovers(record: JobRecord) -> list[int]:
    """Stop what still runs for a job that roostd no longer runs (removed, or its record
    unreadable): the holders of its worker lock (a worker and its pi) and the live holder
    of its session's writer lock, checked by pid and start time. The session's only when
    the file is the job's own (a record that could not be read names any path) and no
    foreground pi has it through `roost attach`. The stopped pids."""
    stopped = evict_strangers(record.dir)
    session = record.session
    if session and not record.attached and os.path.dirname(session) == str(record.dir):
        holder = read_holder(session)
        if (
            holder is not None
            and holder.pid != os.getpid()
            and holder_is_alive(holder)
            and procid.stop_exact(
                holder.pid, holder.start_time, EVICT_GRACE_SECONDS, holder.start_ticks, holder.boot_id
            )
        ):
            log.warning("job %s: stopped pid %s, which held its session", record.id, holder.pid)
            stopped.append(holder.pid)
    return stopped
