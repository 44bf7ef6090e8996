"""The worker's delivery half (a mixin of roost.worker.lifecycle's `Worker`): the pump that
sends the mailbox's items to pi when a run may take them (a reply as a prompt, an agent item
through the extension, a dialog's answer), each noted as the cause of the run it starts.
Before a run from idle it asks roostd for a slot (`turn`) and waits while its job is queued;
over budget, compacting, stopping or letting go of the session (`roost attach`) items wait.
A prompt pi refuses for a configuration problem fails the job (`fatal`), its item kept."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.host.fsutil import utc_now
from roost.job.states import ATTACH_REASON, SETTLED_JOB_STATES
from roost.pi import agentfiles, problems
from roost.wire import protocol
from roost.wire.protocol import RequestError
from roost.worker import runnote
from roost.worker.pi_process import PiError
from roost.worker.runs import dialog_answer, item_cause

if TYPE_CHECKING:
    from roost.job.record import JobRecord
    from roost.mailbox import Item
    from roost.pi.compat import PiFeatures
    from roost.tasks import Tasks
    from roost.worker.budget import BudgetGuard
    from roost.worker.daemon_link import DaemonLink
    from roost.worker.delivery import Delivery
    from roost.worker.extchannel import ExtensionChannel
    from roost.worker.pi_process import PiProcess
    from roost.worker.runs import RunTracker

log = logging.getLogger("roost.worker")


class ItemPump:
    """What the pump uses of the `Worker`, which sets every one of these."""

    record: JobRecord
    runs: RunTracker
    delivery: Delivery
    notes: runnote.Keeper
    pi: PiProcess
    features: PiFeatures
    channel: ExtensionChannel
    link: DaemonLink
    budget: BudgetGuard
    tasks: Tasks
    wake: asyncio.Event
    stopping: asyncio.Event
    releasing: bool
    queued: bool
    turns: int
    fatal: str | None
    report: Callable[[], None]
    request_stop: Callable[[str], None]

    @property
    def busy(self) -> bool:
        """A run is in progress or about to start (an item or roost's note is on its way)."""
        return self.runs.streaming or bool(self.delivery.inflight) or self.runs.next_cause is not None

    def _release_if_idle(self) -> None:
        """Attach: stop once no run is in progress and nothing is in flight."""
        if self.releasing and not self.busy and not self.runs.ended and not self.runs.dialog_open:
            self.request_stop(ATTACH_REASON)

    async def _pump_loop(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            if self.budget.blocked is not None:
                self._release_if_idle()
                continue  # over budget: items wait until the person raises it
            if not await self._slot_for_a_run():
                self._release_if_idle()
                continue  # queued by roostd (maxRunning, its group): a `turn` push wakes us
            if self.runs.compacting or self.stopping.is_set() or self.releasing:
                self._release_if_idle()
                # `roost attach` waits for the run to end; a run waiting on a dialog ends only
                # once a reply answers it, so that much is still delivered.
                if not (
                    self.releasing
                    and self.runs.dialog_open
                    and not self.runs.compacting
                    and not self.stopping.is_set()
                ):
                    continue
            try:
                await self.delivery.pump(
                    dialog_open=self.runs.dialog_open,
                    ext_ready=self.channel.ready.is_set(),
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

    async def _slot_for_a_run(self) -> bool:
        """A run from idle takes one of roostd's slots (README: Queue and limits): ask first.
        False while the job is queued, or roostd is away (after its hello we ask again)."""
        if self.queued:
            return False
        if (
            self.runs.state not in SETTLED_JOB_STATES
            or self.busy
            or self.runs.dialog_open
            or self.releasing
            or not self.delivery.has_new()
        ):
            return True  # a run in progress, the one this worker was started for, or none
        self.report()  # roostd hears that the last run ended before it hears the ask
        await asyncio.sleep(0)
        turns = self.turns
        try:
            go = await self.link.turn()
        except RequestError:  # roostd is away: ask again once a roostd has our hello
            self.tasks.spawn(self.link.after_hello(self.wake.set), "asking for a slot again")
            return False
        # roostd may queue the run and grant it a moment later: its `turn` push can be read
        # (and `_on_turn` run) before this coroutine resumes with the older answer. That
        # answer must not queue the worker again, for no second push would come: the push
        # has set `wake`, and the pump asks once more (roostd: the job is running, go).
        self.queued = not go and self.turns == turns
        return go

    def _on_turn(self, event: dict[str, Any]) -> None:
        self.turns += 1
        self.queued = False
        self.wake.set()

    def _provider(self) -> str | None:
        return problems.provider_of(self.record.model) or agentfiles.default_provider()

    def _refused(self, exc: PiError) -> bool:
        """pi refused a prompt: a configuration problem (no API key, unknown model) fails
        the job now, with pi's words and the fix; the item stays for `roost start`."""
        problem = problems.from_prompt_error(
            str(exc),
            self.record.id,
            provider=self._provider(),
            models_json_error=agentfiles.models_json_error(),
        )
        if problem is None:
            return False
        log.error("%s", problem.text())
        if self.runs.run is None and self.runs.next_cause is not None:
            self.runs.next_cause = None  # no run started: nothing to resume after the fix
            self.notes.save(runnote.RunNote())
        self.fatal = problem.text()
        self.stopping.set()
        return True

    def _note_cause(self, item: Item) -> None:
        cause = item_cause(item)
        if self.runs.run is not None:
            self.runs.run.sources.add(cause.value)
        elif self.runs.next_cause is None:
            self.runs.next_cause = cause
            self.notes.save(runnote.RunNote(cause.value, utc_now()))

    async def _send_reply(self, item: Item) -> None:
        self._note_cause(item)
        data = await self.pi.command("prompt", message=item.text, streamingBehavior="steer")
        if self.features.prompt_disposition and (data or {}).get("disposition") == "handled":
            # An extension command or input handler consumed it: no message will follow,
            # and no run starts for it.
            self.delivery.finish(item)
            if self.runs.run is None and self.runs.next_cause is not None:
                self.runs.next_cause = None
                self.notes.save(runnote.RunNote())

    async def _send_agent(self, item: Item) -> None:
        from roost.agents.envelope import agent_frame

        assert self.channel.conn is not None
        self._note_cause(item)
        sent = await self.channel.conn.send(protocol.event("inject", **agent_frame(item.to_dict(), item.seq)))
        if not sent:
            raise ConnectionError("the extension is not connected")

    async def _answer_dialog(self, item: Item) -> None:
        dialog = self.runs.dialog
        assert dialog is not None
        self._note_cause(item)
        await self.pi.send_raw(dialog_answer(dialog, item.text))
        self.runs.dialog_answered()
