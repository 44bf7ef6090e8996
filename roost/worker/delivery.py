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

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roost import faults
from roost.job.states import ItemKind
from roost.mailbox import Item, Mailbox
from roost.pi.transcript import Delivered

log = logging.getLogger(__name__)

CLOCK_SLACK_MS = 5  # pi stamps a message after it received it; both use this machine's clock


@dataclass
class InFlight:
    item: Item
    channel: str  # "rpc" | "ext"


class Delivery:
    def __init__(self, box: Mailbox, journal: Path | None = None) -> None:
        self.box = box
        self.journal = journal
        self.inflight: list[InFlight] = []
        self.finished: set[int] = set()
        # pi 0.73 writes a new session file only at its first assistant message (1.x at the
        # first user message): until then what it took may live in its memory only, so acks
        # wait for the first assistant message on both (a killed pi gets the items again).
        self.durable = True

    # -- start-up ------------------------------------------------------------------------------
    def drop_resends(self, session: Delivered) -> int:
        """Mark pending items already in the session as finished; returns how many.

        Agent items carry their seq into the session. A user reply is a plain user
        message there, so the journal says when each reply was handed to pi: a reply never
        sent cannot be in the session, and a sent one is matched only by a user message
        with its text that pi took after that moment (two equal replies stay apart).
        """
        sent = self._read_journal()
        unused = list(session.user_messages)
        dropped = 0
        pending = self.box.pending()
        for item in pending:
            if item.kind != ItemKind.REPLY:
                if item.seq in session.agent_seqs:
                    self.finished.add(item.seq)
                    dropped += 1
                continue
            sent_at = sent.get(item.seq)
            if sent_at is None:
                continue
            for index, message in enumerate(unused):
                if message.text != item.text:
                    continue
                if message.millis is not None and message.millis < sent_at - CLOCK_SLACK_MS:
                    continue
                del unused[index]
                self.finished.add(item.seq)
                dropped += 1
                break
        self._rewrite_journal(
            {seq: at for seq, at in sent.items() if any(item.seq == seq for item in pending)}
        )
        self.ack_finished()
        return dropped

    # -- the journal of replies handed to pi -------------------------------------------------
    def note_sent(self, item: Item) -> None:
        """Record, durably, that a reply goes to pi now (before it is written to pi)."""
        if self.journal is None:
            return
        line = json.dumps({"seq": item.seq, "at": time.time() * 1000}) + "\n"
        fd = os.open(
            self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        os.fchmod(fd, 0o600)  # the user's alone, whatever mode it was found with
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def _read_journal(self) -> dict[int, float]:
        sent: dict[int, float] = {}
        if self.journal is None:
            return sent
        try:
            with open(self.journal, encoding="utf-8") as handle:
                for line in handle:
                    try:
                        entry = json.loads(line)
                        sent[int(entry["seq"])] = float(entry["at"])
                    except (ValueError, KeyError, TypeError):
                        continue  # a line cut short by a crash
        except FileNotFoundError:
            pass
        return sent

    def _rewrite_journal(self, sent: dict[int, float]) -> None:
        if self.journal is None:
            return
        if not sent and not self.journal.exists():
            return  # nothing to prune or repair: spare a fresh job's start an fsync
        tmp = self.journal.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o600)  # a leftover .tmp keeps its mode through O_TRUNC
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for seq, at in sorted(sent.items()):
                handle.write(json.dumps({"seq": seq, "at": at}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.journal)

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
        if faults.enabled():
            acked = [item.text for item in self.box.pending() if item.seq <= upto]
            for text in acked:
                faults.hit("before_ack", text)
        moved = self.box.ack(upto)
        if faults.enabled():
            for text in acked:
                faults.hit("after_ack", text)
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
            # pi prints message_end just before it appends the entry to the session file;
            # the ack waits for pi's next line (`ack_finished` from the worker), by which
            # time the entry is on disk.
            self.finished.add(item.seq)
            return item
        return None

    def finish(self, item: Item) -> None:
        """An item consumed without a message (a reply that answered a dialog, or that an
        extension handled)."""
        self.inflight = [f for f in self.inflight if f.item.seq != item.seq]
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
        dialog_only: bool = False,
    ) -> None:
        """Hand every deliverable pending item to pi, in order (with `dialog_only`: only
        the first reply, as the answer to the open dialog)."""
        busy = {f.item.seq for f in self.inflight}
        for item in self.box.pending():
            if item.seq in self.finished or item.seq in busy:
                continue
            if dialog_open:
                if item.kind == ItemKind.REPLY:
                    self.finish(item)
                    await answer_dialog(item)
                    dialog_open = False
                continue  # agent items wait while a dialog is open
            if dialog_only:
                return
            channel = "rpc" if item.kind == ItemKind.REPLY else "ext"
            if channel == "ext" and not ext_ready:
                return
            if any(f.channel != channel for f in self.inflight):
                return  # keep seq order across the two channels
            faults.hit("posted", item.text)
            if channel == "rpc":
                self.note_sent(item)
            self.inflight.append(InFlight(item, channel))
            try:
                await (send_reply(item) if channel == "rpc" else send_agent(item))
            except Exception:
                self.inflight = [f for f in self.inflight if f.item.seq != item.seq]
                raise
            faults.hit("sent", item.text)

    def has_new(self) -> bool:
        """An item waits that pi has not been handed yet."""
        busy = {f.item.seq for f in self.inflight}
        return any(item.seq not in self.finished and item.seq not in busy for item in self.box.pending())

    def requeue_inflight(self) -> None:
        """Forget what was sent but not taken (e.g. the extension reconnected)."""
        self.inflight.clear()
