"""A seq counter that lies (docs/security.md, door 5): rolled back to a lower but well-formed
value, it must not hand out a seq again (a repeated seq is dropped by the worker as
"already in the session", and an ack would replace the acknowledged item in cur/)."""

from __future__ import annotations

import re

import pytest

from roost.mailbox import Mailbox


def roll_back(box: Mailbox, last: int) -> None:
    """Rewrite the counter with a lower `last` (and `reserved`), same boot: well-formed."""
    seq_file = box.path / "seq"
    record = seq_file.read_text()
    record = re.sub(r"last=\d+", f"last={last:012d}", record)
    record = re.sub(r"reserved=\d+", f"reserved={last:012d}", record)
    record = re.sub(r"acked=\d+", f"acked={last:012d}", record)
    seq_file.write_text(record)


@pytest.mark.parametrize("fresh", [False, True], ids=["same object", "reopened"])
def test_a_rolled_back_counter_never_repeats_a_seq(box: Mailbox, fresh: bool) -> None:
    seqs = [box.post(kind="reply", text=f"m{i}").seq for i in range(5)]
    box.ack(3)
    roll_back(box, 1)
    if fresh:
        box = Mailbox(box.path)
    after = [box.post(kind="reply", text=f"after{i}").seq for i in range(3)]
    assert min(after) > max(seqs) and len(set(after)) == 3
    # Nothing acknowledged was replaced, nothing pending was dropped or quarantined.
    assert [i.text for i in box.acked()] == ["m0", "m1", "m2"]
    assert [i.text for i in box.pending()] == ["m3", "m4", "after0", "after1", "after2"]
    assert not any(box.bad_dir.iterdir())


def test_a_counter_behind_bad_files_moves_past_them(box: Mailbox) -> None:
    box.post(kind="reply", text="one")
    (box.bad_dir / "000000000040.json").write_bytes(b"x")
    roll_back(box, 0)
    assert Mailbox(box.path).post(kind="reply", text="two").seq == 41


def test_a_reader_keeps_items_above_a_rolled_back_counter(box: Mailbox) -> None:
    for i in range(4):
        box.post(kind="reply", text=f"m{i}")
    roll_back(box, 1)
    reader = Mailbox(box.path)  # a worker: it only reads and acks
    assert [i.seq for i in reader.pending()] == [1, 2, 3, 4]
    assert not any(box.bad_dir.iterdir())
    assert box.post(kind="reply", text="next").seq == 5


def test_an_in_order_counter_costs_no_scan(box: Mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    box.post(kind="reply", text="first")  # the first post checks the disk once
    scans = []
    counter = box._counter
    original = counter._highest_on_disk
    monkeypatch.setattr(counter, "_highest_on_disk", lambda: scans.append(1) or original())
    for i in range(20):
        box.post(kind="reply", text=str(i))
    assert scans == []
