"""The worker: one per live pi job. pi's RPC client, the mailbox's consumer, roostd's agent.

    python -m roost.worker JOB_ID

Lifecycle: (roost.worker.launch, before the heavy imports: open the extension socket and
start pi when the session is free) -> otherwise check the session's writer lock and start
pi -> wait until pi answers and the extension said hello -> drop resends -> deliver items as
they arrive (watchdog wakes it; no polling) -> report state to roostd (reconnecting
whenever roostd restarts) -> exit 0 when told to stop, 1 if pi died (roostd restarts us),
EXIT_FATAL when restarting cannot help.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import time
from collections.abc import Callable
from typing import Any

from roost import paths, protocol
from roost.agents.handback import should_report
from roost.config import load_settings
from roost.fsutil import utc_now
from roost.jobs import JobRecord
from roost.jsonlines import Connection, serve_connection
from roost.mailbox import Item, Mailbox
from roost.pi import problems
from roost.pi.compat import features_of
from roost.protocol import EXTENSION_OPS, REFUSED, RESULT_MAX, UNAUTHORIZED, Op, RequestError
from roost.states import ATTACH_REASON, EXIT_FATAL, ITEM_CAUSES, JobState, RunCause, run_cause
from roost.transcript import content_text, delivered, interrupted, read_entries
from roost.worker import faults, launch, runnote, usage
from roost.worker.daemon_link import DaemonLink
from roost.worker.delivery import Delivery
from roost.worker.launch import Early
from roost.worker.pi_process import PiError, PiProcess
from roost.worker.runs import Run, RunTracker, dialog_answer, first_line, open_question

log = logging.getLogger("roost.worker")

READY_TIMEOUT = 60.0
OLD_PI_GRACE = 10.0  # seconds a previous pi of this job gets to exit before SIGKILL
HOLDER_GRACE = 5.0  # seconds a foreign holder of the session gets to let go at start-up


class Fatal(Exception):
    """Restarting the worker cannot help (session locked elsewhere, pi missing, ...)."""


class Worker:
    def __init__(self, early: Early) -> None:
        self.early = early
        self.record: JobRecord = JobRecord.from_json(early.job)
        self.box = Mailbox(self.record.mailbox_dir)
        self.delivery = Delivery(self.box, self.record.dir / "delivery.jsonl")
        self.features = features_of(early.install)  # None: pi was not found (early.error)
        self.runs = RunTracker(summary=self.record.summary,
                               settled_event=self.features.settled_event)
        self.run_note_path = self.record.dir / "run.json"
        self.run_note = runnote.read(self.run_note_path)
        self.pi = PiProcess(self._on_pi_event)
        faults.pi_pid, faults.job_id = (lambda: self.pi.pid), self.record.id
        self.link = DaemonLink(self.record, self._on_daemon_event, self.snapshot)
        self.ext: Connection | None = None
        self.ext_ready = asyncio.Event()
        self.wake = asyncio.Event()
        self.stop_reason: str | None = None
        self.stopping = asyncio.Event()
        self.fatal: str | None = None  # a configuration problem: the job fails, items stay
        self.run_error: str | None = None  # the last run's error with its fix (the row's error)
        self._run_error_shown = False
        self._settle_task: asyncio.Task[None] | None = None
        # A new worktree's files, written while pi boots (roost.worktrees.checkout).
        self.checkout: asyncio.Future[None] | None = None
        self._settle_after_checkout = False
        self.parent_chain = 0  # parent-message runs in a row (hand-back loop guard)
        self.releasing = False  # `roost attach`: exit at the next safe point
        self._session_private = False  # the session file was made 0600
        self.meter = usage.new_meter(self.record)  # usage and budgets (roost.usage)

    # -- state reporting ---------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        snap = self.runs.snapshot()
        snap["busy"] = self.busy
        if self.run_error is not None or self._run_error_shown:
            snap["error"] = self.run_error  # None once: a later run clears what the row showed
            self._run_error_shown = self.run_error is not None
        usage.add_to_snapshot(self, snap)
        return snap

    @property
    def busy(self) -> bool:
        """A run is in progress or about to start (an item or roost's note is on its way)."""
        return (self.runs.streaming or bool(self.delivery.inflight)
                or self.runs.next_cause is not None)

    def report(self) -> None:
        self.link.update(self.snapshot())

    # -- start-up ------------------------------------------------------------------------
    def check_lock(self) -> None:
        """Refuse to start a second writer of the session (docs/locks.md, "Other writers"):
        the writer lock's holder, or another writer that roost.writers finds."""
        from roost.locks.holding import other_writer, own_pis

        session, job_id = self.record.session, self.record.id
        assert session is not None
        for pid in own_pis(session, job_id):
            self._stop_old_pi(pid)
        # A foreground pi that just handed its session off exits a moment after letting go;
        # give a holder a short while before refusing.
        deadline = time.monotonic() + HOLDER_GRACE
        held = other_writer(session, job_id)
        while held is not None and time.monotonic() < deadline:
            time.sleep(0.05)  # start-up only: the worker has nothing else to do yet
            held = other_writer(session, job_id)
        if held is None:
            from roost import writers

            writers.remember(session, str(self.record.dir))  # what our pi starts from
            return
        log.error("session %s: pid %d %s", session, held.pid, held.how)
        # Fatal: the item that woke the job stays in the mailbox (nothing was delivered);
        # `roost start` delivers it once the other writer has quit.
        raise Fatal(held.message(job_id))

    def _stop_old_pi(self, pid: int) -> None:
        """Our own previous pi outlived its worker: it must go before a new one writes."""
        import psutil  # only on this path: it costs a worker's start-up ~8 ms of imports

        log.warning("stopping pid %d, a previous pi of this job", pid)
        # Wait until it is gone: while it lives it holds the lock, and our pi would
        # refuse the session (exit 3), which fails the job for good.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                old_pi = psutil.Process(pid)
                old_pi.send_signal(sig)
                old_pi.wait(timeout=OLD_PI_GRACE)
                return
            except psutil.NoSuchProcess:
                return
            except psutil.TimeoutExpired:
                log.warning("pid %d ignored SIG%s", pid, sig.name[3:])

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, "stopped")
        early = self.early
        ext_sock = early.ext_path
        if early.error is not None:
            raise Fatal(early.error)
        if early.pi is None:  # the session's lock file exists: see who holds it first
            self.check_lock()
            assert early.install is not None  # found, or early.error says why not
            try:
                early.pi = launch.spawn_pi(early.job, ext_sock, early.install)
            except launch.LaunchError as exc:
                raise Fatal(str(exc)) from None
        server = await asyncio.start_unix_server(
            self._on_ext_connection, sock=early.ext_socket, limit=protocol.MAX_FRAME + 1
        )
        link_task = asyncio.create_task(self.link.run())
        await self.pi.attach(early.pi)

        def changed() -> None:  # from the watchdog thread
            loop.call_soon_threadsafe(self.wake.set)

        # Started while pi boots (a second or more), so the observer's own start-up (tens of
        # ms on a loaded machine) is not on the way to the first prompt; it only wakes the pump.
        watcher = self.box.watch(on_change=changed)
        # A new worktree's files are written now, while pi boots and the model answers;
        # the extension holds tool calls, and `_settled` the run's end, until they are.
        checkout = asyncio.ensure_future(self._finish_checkout())
        ready = asyncio.ensure_future(self._until_ready())
        stop = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait({ready, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not ready.done():  # told to stop while pi was still coming up
            ready.cancel()
            checkout.cancel()
            watcher.close()
            server.close()
            await self.pi.shutdown()
            await self.link.exiting(self.stop_reason or "stopped")
            link_task.cancel()
            ext_sock.unlink(missing_ok=True)
            return 0
        self.checkout = checkout
        checkout.add_done_callback(self._checkout_done)
        try:
            ready.result()
        except (PiError, TimeoutError) as exc:
            watcher.close()
            code = self.pi.returncode
            if self.pi.exited.is_set() and code == EXIT_FATAL:
                raise Fatal(f"pi refused the session (see {self.record.dir}/worker.log)") from None
            if self.pi.exited.is_set():
                problem = problems.from_startup(list(self.pi.stderr_tail), self.record.id,
                                                roost_extension=str(paths.extension_path()))
                if problem is not None:  # restarting it would fail the same way
                    raise Fatal(problem.text()) from None
            raise PiError(f"pi did not come up: {exc}") from None
        assert self.record.session is not None
        entries = read_entries(self.record.session)
        dropped = self.delivery.drop_resends(delivered(entries))
        self.delivery.durable = any(
            (e.get("message") or {}).get("role") == "assistant" for e in entries
        )
        if dropped:
            log.info("dropped %d resend(s) already in the session", dropped)
        self.meter.load(entries)
        resume = usage.gate_resume(self, self._restore(entries))
        self.report()
        if resume is not None and self.ext is not None:
            log.info("continuing the run a restart cut short (%s)", self.run_note.cause)
            await self.ext.send(protocol.event("note", content=resume))
        self.wake.set()
        pump = asyncio.create_task(self._pump_loop())
        done, _ = await asyncio.wait(
            [asyncio.create_task(self.pi.exited.wait()), asyncio.create_task(self.stopping.wait())],
            return_when=asyncio.FIRST_COMPLETED,
        )
        pump.cancel()
        watcher.close()
        server.close()
        ext_sock.unlink(missing_ok=True)
        if self.fatal is not None:
            await self.pi.shutdown()
            if self.link.connected:  # else main() says it on a connection of its own
                await self.link.exiting(self.fatal, fatal=True)
                link_task.cancel()
                return EXIT_FATAL
            link_task.cancel()
            raise Fatal(self.fatal)
        if self.stop_reason is not None:
            await self._shutdown_pi()
            await self.link.exiting(self.stop_reason)
            link_task.cancel()
            return 0
        link_task.cancel()
        log.error("pi exited unexpectedly (code %s)", self.pi.returncode)
        return 1

    async def _finish_checkout(self) -> None:
        worktree = self.record.worktree
        if not worktree:
            return
        from roost.worktrees import checkout

        if await asyncio.to_thread(checkout.finish_pending, self.record.dir,
                                   str(worktree["path"])):
            log.info("wrote the files of worktree %s", worktree["path"])

    def _checkout_done(self, task: asyncio.Future[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            # Its pi goes too (its tools wait for the files): roostd restarts the job, and
            # the next worker writes them again (a crash loop ends the job as failed).
            log.error("could not write the worktree's files: %s", exc)
            asyncio.ensure_future(self.pi.shutdown(timeout=2))
        elif self._settle_after_checkout:
            self._settle_after_checkout = False
            self._settled()

    def _restore(self, entries: list[dict[str, Any]]) -> str | None:
        """After a (re)start: was a run cut short, and is it continued? Returns the note
        that continues it when nothing pending will (seed: a restore alone is no run)."""
        note = self.run_note
        cut_short = note.in_progress and interrupted(entries)
        settings = load_settings()
        resume = cut_short and settings.resumeInterrupted and note.resumes < settings.resumeMaxInRow
        if resume:
            # The continuation is the same run: it keeps its cause for the hand-back rules.
            self.runs.next_cause = note.run_cause()
            self._save_note(runnote.RunNote(note.cause, note.started, note.resumes + 1))
        elif note.cause is not None and not note.stopped:
            self._save_note(runnote.RunNote())
        if self.box.pending():
            return None  # the next item starts the run (with the kept cause when resuming)
        if resume:
            self.runs.enter(JobState.RUNNING)
            self.runs.status = "continuing"
            when = str(entries[-1].get("timestamp") or "") if entries else ""
            return interrupted_note(when)
        self.runs.enter(JobState.DONE)
        self.runs.status = ""
        question = open_question(entries)
        if cut_short:
            self.runs.enter(JobState.NEEDS_INPUT)
            self.runs.status = "interrupted"
            self.runs.question = (
                "The last run was interrupted when its worker restarted; reply to continue."
            )
        elif question is not None:  # still unanswered (e.g. stopped while it waited)
            self.runs.enter(JobState.NEEDS_INPUT)
            self.runs.question = question
        return None

    def _save_note(self, note: runnote.RunNote) -> None:
        self.run_note = note
        try:
            runnote.write(self.run_note_path, note)
        except OSError as exc:
            log.warning("could not write %s: %s", self.run_note_path, exc)

    async def _until_ready(self) -> None:
        """pi answers, and its roost extension said hello on the extension socket."""
        await self.pi.command("get_state", timeout=READY_TIMEOUT)
        await asyncio.wait_for(self.ext_ready.wait(), READY_TIMEOUT)

    async def _shutdown_pi(self) -> None:
        if self.stop_reason == "stopped" and self.run_note.cause is not None:
            self._save_note(runnote.RunNote(self.run_note.cause, self.run_note.started,
                                            stopped=True))
        if self.runs.streaming and self.stop_reason == "stopped":
            with contextlib.suppress(PiError, TimeoutError):
                await self.pi.command("abort", timeout=10)
        await self.pi.shutdown()

    def _release_if_idle(self) -> None:
        """Attach: stop once no run is in progress and nothing is in flight."""
        if self.releasing and not self.busy and not self.runs.ended and self.runs.dialog is None:
            self.request_stop(ATTACH_REASON)

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stopping.set()

    # -- delivery ---------------------------------------------------------------------------
    async def _pump_loop(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            if self.meter.blocked is not None:
                self._release_if_idle()
                continue  # over budget: items wait until the person raises it
            if self.runs.compacting or self.stopping.is_set() or self.releasing:
                self._release_if_idle()
                # `roost attach` waits for the run to end; a run waiting on a dialog ends only
                # once a reply answers it, so that much is still delivered.
                if not (self.releasing and self.runs.dialog is not None
                        and not self.runs.compacting and not self.stopping.is_set()):
                    continue
            try:
                await self.delivery.pump(
                    dialog_open=self.runs.dialog is not None,
                    ext_ready=self.ext_ready.is_set(),
                    send_reply=self._send_reply,
                    send_agent=self._send_agent,
                    answer_dialog=self._answer_dialog,
                    dialog_only=self.releasing,
                )
            except PiError as exc:
                if self._refused(exc):
                    return
                log.warning("delivery paused: %s", exc)
            except ConnectionError as exc:
                log.warning("delivery paused: %s", exc)
            self.report()

    def _provider(self) -> str | None:
        return problems.provider_of(self.record.model) or _default_provider()

    def _refused(self, exc: PiError) -> bool:
        """pi refused a prompt: a configuration problem (no API key, unknown model) fails
        the job now, with pi's words and the fix; the item stays for `roost start`."""
        problem = problems.from_prompt_error(
            str(exc), self.record.id, provider=self._provider(),
            models_json_error=_models_json_error())
        if problem is None:
            return False
        log.error("%s", problem.text())
        if self.runs.run is None and self.runs.next_cause is not None:
            self.runs.next_cause = None  # no run started: nothing to resume after the fix
            self._save_note(runnote.RunNote())
        self.fatal = problem.text()
        self.stopping.set()
        return True

    def _cause_of(self, item: Item) -> RunCause:
        if item.kind == "reply":
            # roostd checked the cause it accepted (a client's: reply or cli; its own: task).
            try:
                return run_cause(item.extra.get("cause", "reply"), ITEM_CAUSES)
            except ValueError:
                return RunCause.REPLY
        relation = (item.sender or {}).get("relation")
        return RunCause.PARENT_MESSAGE if relation == "parent" else RunCause.AGENT_MESSAGE

    def _note_cause(self, item: Item) -> None:
        cause = self._cause_of(item)
        if self.runs.run is not None:
            self.runs.run.sources.add(cause.value)
        elif self.runs.next_cause is None:
            self.runs.next_cause = cause
            self._save_note(runnote.RunNote(cause.value, utc_now()))

    async def _send_reply(self, item: Item) -> None:
        self._note_cause(item)
        data = await self.pi.command("prompt", message=item.text, streamingBehavior="steer")
        if self.features.prompt_disposition and (data or {}).get("disposition") == "handled":
            # An extension command or input handler consumed it: no message will follow,
            # and no run starts for it.
            self.delivery.finish(item)
            if self.runs.run is None and self.runs.next_cause is not None:
                self.runs.next_cause = None
                self._save_note(runnote.RunNote())

    async def _send_agent(self, item: Item) -> None:
        from roost.agents.envelope import agent_frame

        assert self.ext is not None
        self._note_cause(item)
        sent = await self.ext.send(protocol.event("inject", **agent_frame(item.to_dict(), item.seq)))
        if not sent:
            raise ConnectionError("the extension is not connected")

    async def _answer_dialog(self, item: Item) -> None:
        dialog = self.runs.dialog
        assert dialog is not None
        self._note_cause(item)
        await self.pi.send_raw(dialog_answer(dialog, item.text))
        self.runs.dialog_answered()

    # -- pi events ----------------------------------------------------------------------------
    def _on_pi_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if self.delivery.finished:
            # Every line pi prints comes after it saved the entries of earlier events.
            self.delivery.ack_finished()
        due = self.runs.on_event(event)
        if kind == "agent_start":
            self.run_error = None  # a new run (or pi's retry): the last error no longer holds
        if not self._session_private and kind in ("message_end", "turn_end", "agent_end"):
            self._privatise_session()
        if kind == "message_end":
            message = event.get("message") or {}
            if message.get("role") == "assistant" and not self.delivery.durable:
                self.delivery.durable = True  # by now every pi has written the session file
            usage.on_message(self, message)
            taken = self.delivery.taken(message, content_text(message.get("content")))
            if taken is not None:
                faults.hit("taken", taken.text)
                self.wake.set()
        if due == "settled":
            self._settled()
        elif due == "ended" and (self._settle_task is None or self._settle_task.done()):
            self._settle_task = asyncio.create_task(self._confirm_settled())
        if kind in ("agent_start", "agent_end", "tool_execution_start", "tool_execution_end",
                    "extension_ui_request", "auto_retry_start", "compaction_end"):
            self.report()
        if kind in ("compaction_end", "agent_end", "agent_settled"):
            self.wake.set()

    def _privatise_session(self) -> None:
        """Make a roost-made session file 0600 once pi has created it.

        pi creates the file itself with the umask it was given (the user's: its tools need
        it), so often 0644; pre-creating it empty confuses pi 0.73 (its next open forks the
        session), so the worker closes it down right after pi's first write instead.
        """
        session = self.record.session
        if not session or os.path.dirname(session) != str(self.record.dir):
            self._session_private = True  # a session roost did not create stays as it is
            return
        try:
            fd = os.open(session, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fchmod(fd, 0o600)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return  # not written yet (pi 0.73 writes at the first assistant message)
        except OSError as exc:
            log.warning("could not make %s private: %s", session, exc)
        self._session_private = True

    async def _confirm_settled(self) -> None:
        # A retry or compaction decided at agent_end shows up before this answer.
        try:
            state = await self.pi.command("get_state", timeout=30)
        except (PiError, TimeoutError):
            return
        state = state or {}
        if not self.runs.ended or self.runs.compacting or state.get("isCompacting"):
            return
        if state.get("pendingMessageCount") and not state.get("isStreaming") and self.ext:
            # A steer that reached pi just as the run ended waits for the next prompt
            # (docs/pi-notes.md b, d): start that run so the reply is not stranded.
            log.info("a steer was stranded at the end of the run; starting a run for it")
            await self.ext.send(protocol.event("kick"))
            return
        self._settled()

    def _settled(self) -> None:
        if self.checkout is not None and not self.checkout.done():
            # A run that ended before the worktree was written (it used no tool) ends
            # once it is: its report and `done` describe the whole tree.
            self._settle_after_checkout = True
            return
        run = self.runs.settle()
        if run is not None:
            self.run_error = None
            if run.stop_reason == "error" and run.error:
                problem = problems.from_run_error(run.error, self.record.id, self._provider())
                self.run_error = problem.text()
                self.runs.summary = first_line(f"error: {problem.message}")
        usage.on_settled(self, run)
        if self.run_note.cause is not None:
            self._save_note(runnote.RunNote())
        self.report()
        self.wake.set()
        if run is not None:
            self.on_settled(run)

    def on_settled(self, run: Run) -> None:
        """Hand the run's result back to the parent when the run is report-worthy."""
        if not self.record.spawned:
            return
        report, self.parent_chain = should_report(
            run.cause, run.sources, run.stop_reason, self.parent_chain
        )
        if not report:
            return
        self.link.send_reliably(
            "handback",
            report=secrets.token_hex(8),  # roostd hands each id over once
            result=run.final_text[:RESULT_MAX],
            state=self.runs.state.value,
            question=self.runs.question,
            error=run.error,
        )

    # -- roostd ---------------------------------------------------------------------------------
    def _on_daemon_event(self, event: dict[str, Any]) -> None:
        """One of roostd's pushes (protocol.PUSHED_EVENTS to the worker): DAEMON_EVENTS."""
        handler = DAEMON_EVENTS.get(str(event.get("event")))
        if handler is None:  # both ends speak one protocol version: a bug on roostd's side
            log.warning("ignoring an undeclared event from roostd: %r", event.get("event"))
            return
        handler(self, event)

    def _on_stop(self, event: dict[str, Any]) -> None:
        self.request_stop(str(event.get("reason") or "stopped"))

    def _on_release(self, event: dict[str, Any]) -> None:
        self.releasing = True  # let go of the session once nothing is in progress
        self._release_if_idle()

    # -- the extension's socket -----------------------------------------------------------------
    async def _on_ext_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        conn = Connection(reader, writer)
        if not await conn.send(protocol.greeting("roost-worker")):
            return
        try:
            await serve_connection(conn, self._ext_handlers(), EXTENSION_OPS, self._ext_authorize)
        finally:
            if self.ext is conn:
                self.ext = None
                self.ext_ready.clear()
                self.delivery.requeue_inflight()

    def _ext_authorize(self, conn: Connection, op: Op) -> str | None:
        if op.caller == "peer" and conn.peer_id is None:
            return f"{op.name}: say ext_hello first"
        return None

    def _ext_handlers(self) -> dict[str, Any]:
        async def ext_hello(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
            # No secret: anything pi's environment held, a tool could read back from
            # /proc/<pi>/environ. The kernel says which process connected (SO_PEERCRED);
            # only this worker's pi itself (not a tool it runs) is the job's extension.
            peer = conn.peer
            if peer is None or peer.uid != os.getuid() or peer.pid != self.pi.pid:
                raise RequestError(UNAUTHORIZED, "only this worker's pi may connect")
            if request.get("pid") != peer.pid:
                raise RequestError(UNAUTHORIZED, "ext_hello: pid does not match the caller")
            conn.peer_id = self.record.id
            self.ext = conn
            self.ext_ready.set()
            self.wake.set()
            return {"job": self.record.id, "name": self.record.name}

        async def forward(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
            args = {k: v for k, v in request.items() if k not in ("id", "op")}
            if not self.link.connected:
                raise RequestError(REFUSED, "roostd is not reachable right now; try again")
            return await self.link.request(str(request["op"]), **args)

        return {"ext_hello": ext_hello, "peers": forward, "send": forward, "spawn": forward}


DAEMON_EVENTS: dict[str, Callable[[Worker, dict[str, Any]], None]] = {
    "stop": Worker._on_stop,
    "budget": usage.on_budget_event,
    "release": Worker._on_release,
}
"""The worker's handler of each event roostd pushes to it (tests/unit/test_layout.py checks
them against protocol.PUSHED_EVENTS)."""


def main(early: Early) -> int:
    """Run the worker for a job whose launch (roost.worker.launch.start) is done."""
    logging.basicConfig(
        level=os.environ.get("ROOST_LOG_LEVEL", "INFO"),
        format="%(asctime)s worker[%(process)d] %(levelname)s %(message)s",
    )
    worker = Worker(early)
    try:
        return asyncio.run(_run(worker))
    except Fatal as exc:
        log.error("%s", exc)
        asyncio.run(worker.link.tell_fatal(str(exc)))
        return EXIT_FATAL


async def _run(worker: Worker) -> int:
    try:
        return await worker.run()
    except PiError as exc:
        log.error("%s", exc)
        await worker.pi.shutdown(timeout=2)
        return 1


def _default_provider() -> str | None:
    """The provider pi's settings choose (pi 1.x says only "the selected model" when its
    key is missing)."""
    try:
        settings = json.loads((paths.agent_dir() / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    provider = settings.get("defaultProvider") if isinstance(settings, dict) else None
    return provider if isinstance(provider, str) and provider else None


def _models_json_error() -> str | None:
    """Why pi could not read models.json (pi itself says nothing of it in RPC mode)."""
    try:
        json.loads((paths.agent_dir() / "models.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return str(exc)
    return None


def interrupted_note(when: str) -> str:
    """What a continued run starts with: from roost, not from the user."""
    at = f" at {when}" if when else ""
    return (
        f"[roost] Your previous run was interrupted{at}: its process was restarted before "
        "the run finished. This note comes from roost, the supervisor, not from the user. "
        "Continue the task from where it stopped; check the state of any step that was in "
        "progress before you repeat it."
    )
