"""The worker's single ordered queue: every mailbox item, all kinds, in seq order.

Replies go to pi as RPC `prompt` (steer while a run is active, a new run when idle);
agent items go to the roost extension, which injects them with `pi.sendMessage(...,
{deliverAs: "steer", triggerTurn: true})`. Items are acknowledged when pi has taken them
(their `message_end`), so a worker killed in between redelivers them; on start the worker
drops resends already in the session file.

Acks are cumulative, but a reply may answer an open dialog while earlier agent items wait,
so items can finish out of order: only the longest finished prefix is acknowledged.
Two channels (RPC stdin, extension socket) do not order against each other, so an item is
not sent on one while an item sent on the other is still unacknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from roost.mailbox import Item, Mailbox
from roost.transcript import Delivered, parse_millis

log = logging.getLogger(__name__)

DEDUPE_SKEW_MS = 5_000  # clocks of one machine; a user message older than the item by more
# than this cannot be that item's delivery


@dataclass
class InFlight:
    item: Item
    channel: str  # "rpc" | "ext"


class Delivery:
    def __init__(self, box: Mailbox) -> None:
        self.box = box
        self.inflight: list[InFlight] = []
        self.finished: set[int] = set()
        # pi writes a new session file only at its first assistant message: until then what
        # it took lives in its memory only, so acks wait (a killed pi gets the items again).
        self.durable = True

    # -- start-up ------------------------------------------------------------------------------
    def drop_resends(self, session: Delivered) -> int:
        """Mark pending items already in the session as finished; returns how many."""
        unused = list(session.user_messages)
        dropped = 0
        for item in self.box.pending():
            if item.kind != "reply":
                if item.seq in session.agent_seqs:
                    self.finished.add(item.seq)
                    dropped += 1
                continue
            created = parse_millis(item.created)
            for index, message in enumerate(unused):
                if message.text != item.text:
                    continue
                if created is not None and message.millis is not None and (
                    message.millis < created - DEDUPE_SKEW_MS
                ):
                    continue
                del unused[index]
                self.finished.add(item.seq)
                dropped += 1
                break
        self.ack_finished()
        return dropped

    # -- acknowledgement ----------------------------------------------------------------------
    def ack_finished(self) -> int:
        if not self.durable:
            return 0
        upto = None
        for item in self.box.pending():
            if item.seq not in self.finished:
                break
            upto = item.seq
        if upto is None:
            return 0
        moved = self.box.ack(upto)
        self.finished = {seq for seq in self.finished if seq > upto}
        return moved

    def taken(self, message: dict[str, Any], text: str) -> Item | None:
        """pi's message_end for `message`: the in-flight item it delivers, now finished."""
        role = message.get("role")
        for index, flight in enumerate(self.inflight):
            item = flight.item
            if role == "custom" and flight.channel == "ext":
                seq = (message.get("details") or {}).get("seq")
                if seq != item.seq:
                    continue
            elif role == "user" and flight.channel == "rpc":
                if text != item.text:
                    continue
            else:
                continue
            del self.inflight[index]
            self.finished.add(item.seq)
            self.ack_finished()
            return item
        return None

    def finish(self, item: Item) -> None:
        """An item consumed without a message (a reply that answered a dialog)."""
        self.finished.add(item.seq)
        self.ack_finished()

    # -- sending ---------------------------------------------------------------------------------
    async def pump(
        self,
        dialog_open: bool,
        ext_ready: bool,
        send_reply: Callable[[Item], Awaitable[None]],
        send_agent: Callable[[Item], Awaitable[None]],
        answer_dialog: Callable[[Item], Awaitable[None]],
    ) -> None:
        """Hand every deliverable pending item to pi, in order."""
        busy = {f.item.seq for f in self.inflight}
        for item in self.box.pending():
            if item.seq in self.finished or item.seq in busy:
                continue
            if dialog_open:
                if item.kind == "reply":
                    self.finish(item)
                    await answer_dialog(item)
                    dialog_open = False
                continue  # agent items wait while a dialog is open
            channel = "rpc" if item.kind == "reply" else "ext"
            if channel == "ext" and not ext_ready:
                return
            if any(f.channel != channel for f in self.inflight):
                return  # keep seq order across the two channels
            self.inflight.append(InFlight(item, channel))
            try:
                await (send_reply(item) if channel == "rpc" else send_agent(item))
            except Exception:
                self.inflight = [f for f in self.inflight if f.item.seq != item.seq]
                raise

    def requeue_inflight(self) -> None:
        """Forget what was sent but not taken (e.g. the extension reconnected)."""
        self.inflight.clear()
