"""Replayed items and file modes (issue 34, docs/reference/mailbox.md): a copy of an item the mailbox
already holds, dropped into new/ under any seq, is quarantined to bad/ with a `.why`, never
yielded again; and every file the mailbox keeps is 0600, whatever mode it arrived with."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.wait import wait_until

from roost.mailbox import InvalidItem, Item, Mailbox, MailboxWatcher


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def replay(box: Mailbox, source: Path, seq: int, file_mode: int = 0o644) -> Path:
    """Copy an item file into new/ under `seq`, its "seq" field rewritten to agree with
    its name (as a hand-made forgery would), written elsewhere and renamed in (like mv)."""
    data = json.loads(source.read_bytes())
    data["seq"] = seq
    staged = box.path.parent / f"staged-{seq}"
    staged.write_text(json.dumps(data) + "\n")
    os.chmod(staged, file_mode)
    target = box.new_dir / f"{seq:012d}.json"
    os.rename(staged, target)
    return target


def why(box: Mailbox, seq: int) -> str:
    return (box.bad_dir / f"{seq:012d}.json.why").read_text()


def yielded_until_quarantined(box: Mailbox, watcher: MailboxWatcher, seq: int) -> list[Item]:
    """What the watcher yields until the copy under `seq` is in bad/ (or it yielded it)."""
    seen: list[Item] = []

    def done() -> bool:
        item = watcher.next_item(0)
        if item is not None:
            seen.append(item)
        return (box.bad_dir / f"{seq:012d}.json.why").exists() or bool(seen)

    wait_until(done, 10, what=f"the copy under seq {seq} to be seen")
    item = watcher.next_item(0.5)
    return seen + ([item] if item is not None else [])


def all_files(box: Mailbox) -> Iterator[Path]:
    yield box.path / "seq"
    for sub in (box.new_dir, box.cur_dir, box.bad_dir):
        yield from sub.iterdir()


# -- the rule --------------------------------------------------------------------------


@pytest.mark.parametrize("fresh", [False, True], ids=["same object", "reopened"])
def test_a_delivered_item_copied_under_an_unused_seq_is_quarantined(box: Mailbox, fresh: bool) -> None:
    first = box.post(kind="reply", text="deploy it")
    box.post(kind="reply", text="second")
    assert [i.text for i in box.pending()] == ["deploy it", "second"]
    box.ack(first.seq)
    replay(box, box.cur_dir / "000000000001.json", 9999)
    reader = Mailbox(box.path) if fresh else box
    assert [i.text for i in reader.pending()] == ["second"]
    assert not (box.new_dir / "000000009999.json").exists()
    assert (box.bad_dir / "000000009999.json").exists()
    assert why(box, 9999) == f"replay: it repeats acknowledged item 1 (same id {first.id})\n"
    # Posting goes on as before, and the replay stays out.
    later = box.post(kind="reply", text="later")
    assert [i.text for i in reader.pending()] == ["second", "later"]
    assert box.ack(later.seq) == 2


def test_a_copy_under_its_own_name_is_quarantined(box: Mailbox) -> None:
    box.post(kind="reply", text="once")
    box.pending()
    box.ack(1)
    (box.new_dir / "000000000001.json").write_bytes((box.cur_dir / "000000000001.json").read_bytes())
    assert Mailbox(box.path).pending() == []
    assert why(box, 1).startswith("replay: item 1 was already acknowledged (cur/")
    assert [i.text for i in box.acked()] == ["once"]  # the acknowledged one is untouched


def test_a_copy_of_a_pending_item_is_quarantined_and_the_original_kept(box: Mailbox) -> None:
    original = box.post(
        kind="message", text="hello", sender={"id": "a1b2c3d4", "name": "x", "relation": "child"}
    )
    with box.watch() as watcher:
        assert watcher.next_item(timeout=5) == original
        # Below and above the original: the item read first is the one kept.
        replay(box, box.new_dir / "000000000001.json", 7)
        assert yielded_until_quarantined(box, watcher, 7) == []
    assert "repeats pending item 1" in why(box, 7)
    assert [i.seq for i in box.pending()] == [1]


def test_of_two_copies_read_together_the_lower_seq_is_kept(box: Mailbox) -> None:
    box.post(kind="reply", text="twice")
    replay(box, box.new_dir / "000000000001.json", 40)
    assert [i.seq for i in Mailbox(box.path).pending()] == [1]
    assert "repeats pending item 1" in why(box, 40)


def test_the_watcher_never_yields_a_replay_of_what_it_delivered(box: Mailbox) -> None:
    item = box.post(kind="reply", text="answered")
    with box.watch() as watcher:
        assert watcher.next_item(timeout=5) == item
        box.ack(item.seq)
        replay(box, box.cur_dir / "000000000001.json", 9999)
        assert yielded_until_quarantined(box, watcher, 9999) == []
        fresh = box.post(kind="reply", text="fresh")
        assert watcher.next_item(timeout=5) == fresh


def test_items_alike_but_for_their_ids_are_two_items(box: Mailbox) -> None:
    for _ in range(3):
        box.post(kind="reply", text="yes")
    box.ack(1)
    reader = Mailbox(box.path)
    assert [i.seq for i in reader.pending()] == [2, 3]
    assert not any(box.bad_dir.iterdir())


def test_an_item_without_an_id_is_still_an_item(box: Mailbox) -> None:
    # Written before ids (or by hand): kept, as a file above the counter always was.
    legacy = Item(3, "reply", None, "old", "2026-11-30T11:20:00.123Z")
    (box.new_dir / "000000000003.json").write_text(legacy.to_json() + "\n")
    assert box.pending() == [legacy]
    assert "id" not in json.loads(legacy.to_json())


def test_an_id_must_be_hex(box: Mailbox) -> None:
    box.post(kind="reply", text="x")
    data = json.loads((box.new_dir / "000000000001.json").read_text())
    with pytest.raises(InvalidItem, match="id must be"):
        Item.from_dict({**data, "id": "../../etc"})
    with pytest.raises(InvalidItem, match="clashes"):
        box.post(kind="reply", text="x", id="0123456789abcdef")


def test_the_acked_index_reads_each_file_once(box: Mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        box.post(kind="reply", text=f"m{i}")
    box.ack(30)
    reader = Mailbox(box.path)
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: opened.append(str(p)) or real_open(p, *a, **k))
    for i in range(3):
        box.post(kind="reply", text=f"new{i}")
        reader.pending()
    cur_reads = [p for p in opened if "/cur/" in p]
    assert len(cur_reads) == 30, cur_reads


def test_a_delivering_reader_lists_cur_once(box: Mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its own acks keep the index up to date: no listing of a long cur/ per item.
    for i in range(10):
        box.post(kind="reply", text=f"m{i}")
    box.ack(10)
    reader = Mailbox(box.path)
    listed: list[str] = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p=".": listed.append(str(p)) or real_listdir(p))
    for i in range(5):
        item = box.post(kind="reply", text=f"new{i}")
        assert reader.pending()[-1] == item
        reader.ack(item.seq)
    assert sum(p.endswith("/cur") for p in listed) == 1, listed
    # A change to cur/ the reader did not make is seen by its mtime: a copy of an item
    # acked by another object. (Its mtime moved on by hand: in one clock tick it may not.)
    other = box.post(kind="reply", text="acked by another object")
    box.pending()
    box.ack(other.seq)
    stamp = os.stat(box.cur_dir).st_mtime_ns + 1_000_000_000
    os.utime(box.cur_dir, ns=(stamp, stamp))
    replay(box, box.cur_dir / f"{other.seq:012d}.json", 9999)
    assert [i.seq for i in reader.pending()] == []
    assert "repeats acknowledged item" in why(box, 9999)


# -- modes -----------------------------------------------------------------------------


def test_every_file_kept_is_0600_whatever_mode_it_came_with(box: Mailbox) -> None:
    first = box.post(kind="reply", text="one")
    box.ack(first.seq)
    os.chmod(box.path / "seq", 0o644)
    replay(box, box.cur_dir / "000000000001.json", 9999, 0o644)  # a replay, 0644
    fresh = Item(5000, "reply", None, "by hand", "2026-11-30T11:20:00.123Z")
    (box.new_dir / "000000005000.json").write_text(fresh.to_json() + "\n")
    os.chmod(box.new_dir / "000000005000.json", 0o664)  # an item, 0664
    (box.new_dir / "junk").write_bytes(b"x")
    os.chmod(box.new_dir / "junk", 0o666)  # not an item
    (box.new_dir / "000000006000.json").write_bytes(b"{")
    os.chmod(box.new_dir / "000000006000.json", 0o644)  # unreadable as an item
    assert [i.text for i in box.pending()] == ["by hand"]
    assert mode(box.new_dir / "000000005000.json") == 0o600  # pending, read: 0600
    box.post(kind="reply", text="two")
    box.ack(10**6)
    assert [i.text for i in box.acked()] == ["one", "by hand", "two"]
    assert sorted(p.name for p in box.bad_dir.iterdir()) == [
        "000000006000.json",
        "000000006000.json.why",
        "000000009999.json",
        "000000009999.json.why",
        "junk",
        "junk.why",
    ]
    files = list(all_files(box))
    assert {mode(p) for p in files} == {0o600}, {p.name: oct(mode(p)) for p in files}


def test_an_item_acked_unread_is_made_0600(box: Mailbox) -> None:
    item = Item(2, "reply", None, "never read here", "2026-11-30T11:20:00.123Z")
    path = box.new_dir / "000000000002.json"
    path.write_text(item.to_json() + "\n")
    os.chmod(path, 0o644)
    assert box.ack(2) == 1
    assert mode(box.cur_dir / "000000000002.json") == 0o600


def test_a_post_under_a_loose_umask_or_a_tight_one_writes_0600(box: Mailbox) -> None:
    for mask in (0o000, 0o277):
        old = os.umask(mask)
        try:
            item = box.post(kind="reply", text=f"umask {mask:o}")
        finally:
            os.umask(old)
        assert mode(box.new_dir / f"{item.seq:012d}.json") == 0o600


def test_the_delivery_journal_is_0600_whatever_mode_it_had(box: Mailbox, tmp_path: Path) -> None:
    from roost.worker.delivery import Delivery

    journal = tmp_path / "delivered.jsonl"
    journal.write_text("")
    os.chmod(journal, 0o644)
    (tmp_path / "delivered.tmp").write_text("")
    os.chmod(tmp_path / "delivered.tmp", 0o644)
    delivery = Delivery(box, journal)
    delivery.note_sent(box.post(kind="reply", text="sent"))
    assert mode(journal) == 0o600
    delivery._rewrite_journal({1: 0.0})  # through the leftover .tmp
    assert mode(journal) == 0o600
