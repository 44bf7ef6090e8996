"""The mailbox under any interleaving of post, ack, reopen (a crash and restart of its
process), stale tmp files and garbage in new/ (hypothesis state machine).

Invariants, after every step:
- seqs strictly increase in the order items are posted, and are never reused;
- nothing posted is lost: every posted item is pending or acknowledged, with its text;
- acknowledged items stay acknowledged; pending ones are exactly those not acked;
- garbage never becomes an item: it is quarantined in bad/ with a `.why` beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from roost.mailbox import Mailbox, MailboxFull

MAX_REPLIES, MAX_AGENT = 4, 3
KINDS = ("reply", "message", "report")
GARBAGE = ("not-json", "wrong-name", "directory", "symlink", "seq-mismatch", "empty", "array")
texts = st.text(max_size=40)


class MailboxMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="roost-fuzz-"))
        self.path = self.root / "mailbox"
        self.box = Mailbox(self.path, max_replies=MAX_REPLIES, max_agent=MAX_AGENT)
        self.posted: dict[int, tuple[str, str]] = {}  # seq -> (kind, text), in post order
        self.acked: set[int] = set()
        self.last_seq = 0
        self.garbage = 0

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _pending_of(self, kinds: tuple[str, ...]) -> int:
        return sum(1 for seq, (kind, _) in self.posted.items() if seq not in self.acked and kind in kinds)

    @rule(kind=st.sampled_from(KINDS), text=texts)
    def post(self, kind: str, text: str) -> None:
        full = (
            self._pending_of(("reply",)) >= MAX_REPLIES
            if kind == "reply"
            else self._pending_of(("message", "report")) >= MAX_AGENT
        )
        sender = None if kind == "reply" else {"id": "a1b2c3d4", "name": "x", "relation": "child"}
        try:
            item = self.box.post(kind=kind, text=text, sender=sender)
        except MailboxFull:
            assert full, "refused below the cap"
            return
        assert not full, "accepted past the cap"
        assert item.seq > self.last_seq, (item.seq, self.last_seq)
        self.last_seq = item.seq
        self.posted[item.seq] = (kind, text)

    @precondition(lambda self: any(seq not in self.acked for seq in self.posted))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        pending = sorted(seq for seq in self.posted if seq not in self.acked)
        upto = data.draw(st.sampled_from(pending))
        moved = self.box.ack(upto)
        newly = {seq for seq in pending if seq <= upto}
        assert moved == len(newly)
        self.acked |= newly

    @rule(seq=st.integers(min_value=0, max_value=10**6))
    def ack_anything(self, seq: int) -> None:
        """An ack of any number (stale, future) moves exactly the pending items up to it."""
        pending = {s for s in self.posted if s not in self.acked and s <= seq}
        assert self.box.ack(seq) == len(pending)
        self.acked |= pending

    @rule()
    def reopen(self) -> None:
        """A crash and restart of the process: a new Mailbox over the same directory."""
        self.box = Mailbox(self.path, max_replies=MAX_REPLIES, max_agent=MAX_AGENT)

    @rule(age_hours=st.sampled_from((0, 2)))
    def stale_tmp(self, age_hours: int) -> None:
        """A writer killed while staging: a partial file left in tmp/."""
        leftover = self.path / "tmp" / f"crashed-{self.garbage}.partial"
        self.garbage += 1
        leftover.write_bytes(b'{"seq": 99, "kind": "re')
        if age_hours:
            old = leftover.stat().st_mtime - age_hours * 3600
            os.utime(leftover, (old, old))

    @rule(kind=st.sampled_from(GARBAGE))
    def garbage_in_new(self, kind: str) -> None:
        self.garbage += 1
        new = self.path / "new"
        # A seq the counter never handed out. A mailbox whose counter file is new rebuilds
        # it from the highest seq on disk, quarantined files included (they may be real
        # items that became unreadable), so garbage may move later seqs up: spacing the
        # names keeps a garbage file from landing on a real item's name.
        big = 10**11 + 10**6 * self.garbage
        name = f"{big:012d}.json"
        if kind == "not-json":
            (new / name).write_bytes(b"\xff\xfe not json")
        elif kind == "wrong-name":
            (new / f"garbage-{self.garbage}.txt").write_text("hello")
        elif kind == "directory":
            (new / name).mkdir()
        elif kind == "symlink":
            (new / name).symlink_to(self.root / "elsewhere.json")
        elif kind == "seq-mismatch":
            item = {
                "seq": 1,
                "kind": "reply",
                "from": None,
                "text": "forged",
                "created": "2026-11-30T11:20:00.123Z",
            }
            (new / name).write_text(json.dumps(item) + "\n")
        elif kind == "empty":
            (new / name).write_bytes(b"")
        else:
            (new / name).write_text("[]\n")

    @invariant()
    def nothing_lost_nothing_doubled(self) -> None:
        pending = self.box.pending()  # also quarantines whatever garbage new/ holds
        acked = self.box.acked()
        pending_seqs = [i.seq for i in pending]
        acked_seqs = [i.seq for i in acked]
        assert pending_seqs == sorted(s for s in self.posted if s not in self.acked)
        assert acked_seqs == sorted(self.acked)
        for item in pending + acked:
            kind, text = self.posted[item.seq]
            assert (item.kind, item.text) == (kind, text)
        assert self.box.counts() == {
            "replies": self._pending_of(("reply",)),
            "agent": self._pending_of(("message", "report")),
        }

    @invariant()
    def garbage_is_quarantined_with_a_reason(self) -> None:
        self.box.pending()  # a scan of new/, as every reader does
        new = self.path / "new"
        assert all(p.name.endswith(".json") and p.is_file() and not p.is_symlink() for p in new.iterdir()), (
            sorted(p.name for p in new.iterdir())
        )
        bad = self.path / "bad"
        if bad.is_dir():
            quarantined = [p for p in bad.iterdir() if not p.name.endswith(".why")]
            for path in quarantined:
                why = bad / (path.name + ".why")
                assert why.is_file() and why.read_text().strip(), path


TestMailboxMachine = MailboxMachine.TestCase
TestMailboxMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
