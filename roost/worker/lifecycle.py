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
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

from roost import faults
from roost.job.record import JobRecord
from roost.job.states import EXIT_FATAL
from roost.mailbox import Mailbox
from roost.pi import problems
from roost.pi.compat import features_of
from roost.pi.transcript import content_text, delivered, read_entries
from roost.tasks import Tasks, first_of
from roost.wire import protocol
from roost.worker import runnote, startup
from roost.worker.answers import Answers
from roost.worker.budget import BudgetGuard, Ports
from roost.worker.daemon_link import DaemonLink
from roost.worker.delivery import Delivery
from roost.worker.extchannel import ExtensionChannel
from roost.worker.gate import Gate
from roost.worker.itempump import ItemPump
from roost.worker.launch import Early
from roost.worker.pi_process import PiError, PiProcess
from roost.worker.restore import restore
from roost.worker.runs import Run, RunTracker, first_line
from roost.worker.startup import Fatal
from roost.worker.streaming import Streamer

log = logging.getLogger("roost.worker")

READY_TIMEOUT = 60.0


class Worker(ItemPump):
    def __init__(self, early: Early) -> None:
        self.early = early
        self.tasks = Tasks(log)  # what nothing awaits: kept, its failure logged
        self.record: JobRecord = JobRecord.from_json(early.job)
        self.box = Mailbox(self.record.mailbox_dir)
        self.delivery = Delivery(self.box, self.record.dir / "delivery.jsonl")
        self.features = features_of(early.install)  # None: pi was not found (early.error)
        self.runs = RunTracker(summary=self.record.summary, settled_event=self.features.settled_event)
        self.notes = runnote.Keeper(self.record.dir / "run.json")  # the run in progress
        self.pi = PiProcess(self._on_pi_event)
        faults.pi_pid, faults.job_id = (lambda: self.pi.pid), self.record.id
        self.link = DaemonLink(self.record, self._on_daemon_event, self.snapshot, self.tasks)
        self.streamer = Streamer(self.link.partial)  # the live text, coalesced, to roostd
        self.wake = asyncio.Event()
        self.channel = ExtensionChannel(
            self.record.id,
            self.record.name,
            lambda: self.pi.pid,
            self.link,
            on_hello=self.wake.set,
            on_lost=self.delivery.requeue_inflight,
        )
        self.stop_reason: str | None = None
        self.stopping = asyncio.Event()
        self.fatal: str | None = None  # a configuration problem: the job fails, items stay
        self.run_error: str | None = None  # the last run's error with its fix (the row's error)
        self._run_error_shown = False
        self._settle_task: asyncio.Task[None] | None = None
        # A new worktree's files, written while pi boots (roost.worktrees.checkout).
        self.checkout: asyncio.Future[None] | None = None
        self._settle_after_checkout = False
        self.answers = Answers(self.record, self.runs, self.link, self._to_extension, self.notes)
        self.channel.gate = Gate(self.record, self.runs, self.link, self.report)  # approvals
        self.releasing = False  # `roost attach`: exit at the next safe point
        self.queued = False  # roostd queued its next run: a `turn` push lets it go
        self.turns = 0  # `turn` pushes received (roost.worker.itempump)
        self._session_private = False  # the session file was made 0600
        self.budget = BudgetGuard.of(  # usage and budgets (roost.usage)
            self.record,
            self.runs,
            Ports(
                report=self.report,
                wake=self.wake.set,
                to_extension=self._to_extension,
                to_roostd=lambda kind, text: self.link.send_reliably("usage_note", kind=kind, text=text),
                pi_command=self.pi.command,
                spawn=self.tasks.spawn,
            ),
            stats_from_pi=self.features.session_stats_whole_file,
        )

    # -- state reporting ---------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        snap = self.runs.snapshot()
        snap["busy"] = self.busy
        if self.run_error is not None or self._run_error_shown:
            snap["error"] = self.run_error  # None once: a later run clears what the row showed
            self._run_error_shown = self.run_error is not None
        self.budget.add_to_snapshot(snap)
        return snap

    def report(self) -> None:
        self.link.update(self.snapshot())

    def _to_extension(self, frame: dict[str, Any]) -> bool:
        """Send an event to pi's extension in the background; False when none is connected."""
        if self.channel.conn is None:
            return False
        self.tasks.spawn(self.channel.conn.send(frame), f"sending {frame.get('event')} to the extension")
        return True

    # -- start-up ------------------------------------------------------------------------
    def check_lock(self) -> None:
        """Refuse to start a second writer of the session (startup.check_lock)."""
        startup.check_lock(self.record)

    async def run(self) -> int:
        """Serve the job until it is told to stop or pi exits; returns the exit code.

        One teardown, whichever way it ends: what `_serve` opened closes in reverse order
        (so the extension socket's file is gone before roostd hears that this worker exits:
        the job's next worker binds the same path), then `_end` stops pi and tells roostd
        why, then the background tasks (the link to roostd among them) are cancelled.
        """
        try:
            async with contextlib.AsyncExitStack() as opened:
                came_up = await self._serve(opened)
            return await self._end(came_up)
        finally:
            await self.tasks.cancel_all()

    async def _serve(self, opened: contextlib.AsyncExitStack) -> bool:
        """Start pi (unless the launcher did), then deliver until told to stop or pi exits.
        False: told to stop while pi was still coming up."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, "stopped")
        early = self.early
        pi = startup.start_pi(early, self.check_lock)
        server = await asyncio.start_unix_server(
            self.channel.serve, sock=early.ext_socket, limit=protocol.MAX_FRAME + 1
        )
        opened.callback(early.ext_path.unlink, missing_ok=True)
        opened.callback(server.close)
        self.tasks.spawn(self.link.run(), "the link to roostd")
        await self.pi.attach(pi)

        def changed() -> None:  # from the watchdog thread
            loop.call_soon_threadsafe(self.wake.set)

        # Started while pi boots (a second or more), so the observer's own start-up (tens of
        # ms on a loaded machine) is not on the way to the first prompt; it only wakes the pump.
        opened.callback(self.box.watch(on_change=changed).close)
        # A new worktree's files are written now, while pi boots and the model answers;
        # the extension holds tool calls, and `_settled` the run's end, until they are.
        checkout = asyncio.ensure_future(startup.finish_checkout(self.record))
        ready = asyncio.ensure_future(self._until_ready())
        await first_of(ready, self.stopping.wait())
        if ready.cancelled():  # told to stop while pi was still coming up
            checkout.cancel()
            return False
        self.checkout = checkout
        checkout.add_done_callback(self._checkout_done)
        try:
            ready.result()
        except (PiError, TimeoutError) as exc:
            raise startup.why_not_up(self.pi, self.record, exc) from None
        await self._pick_up()
        self.wake.set()
        opened.callback(self.tasks.spawn(self._pump_loop(), "the delivery pump").cancel)
        await first_of(self.pi.exited.wait(), self.stopping.wait())
        return True

    async def _pick_up(self) -> None:
        """Pick up where the session stands: drop resends, count its usage, restore the
        last run's state, and continue a run a restart cut short."""
        assert self.record.session is not None
        entries = read_entries(self.record.session)
        dropped = self.delivery.drop_resends(delivered(entries))
        self.delivery.durable = any((e.get("message") or {}).get("role") == "assistant" for e in entries)
        if dropped:
            log.info("dropped %d resend(s) already in the session", dropped)
        self.budget.load(entries)
        self.answers.recover(entries)  # a run that ended while no worker saw it reports
        resume = self.budget.gate_resume(
            restore(
                self.runs, self.notes.note, entries, pending=bool(self.box.pending()), save=self.notes.save
            )
        )
        self.report()
        self.answers.resend()  # reports a killed worker noted and roostd never answered
        if resume is not None and self.channel.conn is not None:
            log.info("continuing the run a restart cut short (%s)", self.notes.note.cause)
            await self.channel.conn.send(protocol.event("note", content=resume))

    async def _end(self, came_up: bool) -> int:
        """Stop pi and tell roostd why this worker exits; returns the exit code."""
        if not came_up:
            await self.pi.shutdown()
            await self.link.exiting(self.stop_reason or "stopped")
            return 0
        if self.fatal is not None:
            await self.pi.shutdown()
            if not self.link.connected:  # main() says it on a connection of its own
                raise Fatal(self.fatal)
            await self.link.exiting(self.fatal, fatal=True)
            return EXIT_FATAL
        if self.stop_reason is not None:
            await self._shutdown_pi()
            await self.link.exiting(self.stop_reason)
            return 0
        log.error("pi exited unexpectedly (code %s)", self.pi.returncode)
        return 1

    def _checkout_done(self, task: asyncio.Future[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            # Its pi goes too (its tools wait for the files): roostd restarts the job, and
            # the next worker writes them again (a crash loop ends the job as failed).
            log.error("could not write the worktree's files: %s", exc)
            self.tasks.spawn(self.pi.shutdown(timeout=2), "stopping pi")
        elif self._settle_after_checkout:
            self._settle_after_checkout = False
            self._settled()

    async def _until_ready(self) -> None:
        """pi answers, and its roost extension said hello on the extension socket."""
        await self.pi.command("get_state", timeout=READY_TIMEOUT)
        await asyncio.wait_for(self.channel.ready.wait(), READY_TIMEOUT)

    async def _shutdown_pi(self) -> None:
        if self.stop_reason == "stopped" and self.notes.note.cause is not None:
            self.notes.save(runnote.RunNote(self.notes.note.cause, self.notes.note.started, stopped=True))
        if self.runs.streaming and self.stop_reason == "stopped":
            with contextlib.suppress(PiError, TimeoutError):
                await self.pi.command("abort", timeout=10)
        await self.pi.shutdown()

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stopping.set()

    # -- pi events ----------------------------------------------------------------------------
    def _on_pi_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if self.delivery.finished:
            # Every line pi prints comes after it saved the entries of earlier events.
            self.delivery.ack_finished()
        status = self.runs.status
        due = self.runs.on_event(event)
        self.streamer.on_event(event)
        if kind == "agent_start":
            self.run_error = None  # a new run (or pi's retry): the last error no longer holds
        if not self._session_private and kind in ("message_end", "turn_end", "agent_end"):
            self._session_private = startup.privatise_session(self.record)
        if kind == "message_end":
            message = event.get("message") or {}
            if message.get("role") == "assistant" and not self.delivery.durable:
                self.delivery.durable = True  # by now every pi has written the session file
            self.budget.on_message(message)
            taken = self.delivery.taken(message, content_text(message.get("content")))
            if taken is not None:
                faults.hit("taken", taken.text)
                self.wake.set()
        if due == "settled":
            self._settled()
        elif due == "ended" and (self._settle_task is None or self._settle_task.done()):
            self._settle_task = self.tasks.spawn(self._confirm_settled(), "the settle check")
        if status != self.runs.status or kind in (
            "agent_start",
            "agent_end",
            "tool_execution_start",
            "tool_execution_end",
            "extension_ui_request",
            "auto_retry_start",
            "compaction_end",
        ):
            self.report()  # `writing` too (a message_update): the link sends only a change
        if kind in ("compaction_end", "agent_end", "agent_settled"):
            self.wake.set()

    async def _confirm_settled(self) -> None:
        # A retry or compaction decided at agent_end shows up before this answer.
        try:
            state = await self.pi.command("get_state", timeout=30)
        except (PiError, TimeoutError):
            return
        state = state or {}
        if not self.runs.ended or self.runs.compacting or state.get("isCompacting"):
            return
        if state.get("pendingMessageCount") and not state.get("isStreaming") and self.channel.conn:
            # A steer that reached pi just as the run ended waits for the next prompt
            # (docs/pi-notes.md b, d): start that run so the reply is not stranded.
            log.info("a steer was stranded at the end of the run; starting a run for it")
            await self.channel.conn.send(protocol.event("kick"))
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
            self.run_error = self.answers.check(run) or self.run_error  # an output schema's
        self.budget.on_settled(run)
        self.answers.note_settled(run)  # the run note: ended, its report kept until sent
        self.report()
        self.wake.set()
        if run is not None:
            self.on_settled(run)

    def on_settled(self, run: Run) -> None:
        """Hand the run's result back to the parent when the run is report-worthy."""
        self.answers.hand_back(run)

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


def _on_abort(worker: Worker, event: dict[str, Any]) -> None:  # the run ends, the job stays
    worker.tasks.spawn(worker.pi.command("abort", timeout=10), "aborting the run")


DAEMON_EVENTS: dict[str, Callable[[Worker, dict[str, Any]], None]] = {
    "stop": Worker._on_stop,
    "budget": lambda worker, event: worker.budget.on_budget_event(event),
    "release": Worker._on_release,
    "abort": _on_abort,
    "turn": Worker._on_turn,
    "approval": lambda worker, event: worker.channel.gate.on_answer(event),
}
"""The worker's handler of each event roostd pushes to it (tests/unit/test_layout.py checks
them against protocol.PUSHED_EVENTS)."""


def main(early: Early) -> int:
    """Run the worker for a job whose launch (roost.worker.launch.start) is done."""
    logging.basicConfig(
        level=os.environ.get("ROOST_LOG_LEVEL", "INFO"),
        format="%(asctime)s worker[%(process)d] %(levelname)s %(message)s",
    )
    if early.ended_cut_line and early.job.get("session"):
        startup.log_cut_line(early.job["session"])
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
