"""Behaviour suite of roost.mailbox: format, ordering, caps, acks, bad files, watch."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kit.wait import wait_until

from roost.errors import RoostError
from roost.mailbox import InvalidItem, Item, Mailbox, MailboxError, MailboxFull, fileops, watch
from roost.mailbox import box as box_module

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "roost-mailbox"
CHILD = {"id": "a1b2c3d4", "name": "Checkout refactor", "relation": "child"}
CREATED_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# -- layout and format -----------------------------------------------------------


def test_creates_private_layout(tmp_path: Path) -> None:
    path = tmp_path / "jobs" / "a1b2c3d4" / "mailbox"
    Mailbox(path)
    for sub in ("", "tmp", "new", "cur", "bad"):
        directory = path / sub
        assert directory.is_dir()
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, sub


def test_opening_tightens_loose_modes(tmp_path: Path) -> None:
    path = tmp_path / "mailbox"
    (path / "new").mkdir(parents=True, mode=0o755)
    os.chmod(path / "new", 0o755)
    Mailbox(path)
    assert stat.S_IMODE((path / "new").stat().st_mode) == 0o700


def test_item_file_is_one_json_line_with_the_contract_keys(box: Mailbox) -> None:
    item = box.post(
        kind="report",
        text="line one\nline two \u2028 caf\u00e9",
        sender=CHILD,
        result="all green",
        state="done",
        question=None,
        error=None,
    )
    path = box.new_dir / "000000000001.json"
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    data = json.loads(raw)
    assert list(data) == [
        "seq",
        "id",
        "kind",
        "from",
        "text",
        "created",
        "result",
        "state",
        "question",
        "error",
    ]
    assert re.fullmatch(r"[0-9a-f]{16}", data["id"])
    assert data["seq"] == 1 and data["kind"] == "report" and data["from"] == CHILD
    assert data["text"] == "line one\nline two \u2028 caf\u00e9"
    assert CREATED_RE.match(data["created"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert item == Item(
        1,
        "report",
        CHILD,
        data["text"],
        data["created"],
        {
            "result": "all green",
            "state": "done",
            "question": None,
            "error": None,
        },
        data["id"],
    )
    assert Item.from_json(raw) == item
    assert Item.from_json(item.to_json()) == item


def test_user_reply_has_null_from(box: Mailbox) -> None:
    box.post(kind="reply", text="yes, go ahead")
    data = json.loads((box.new_dir / "000000000001.json").read_text())
    assert data["from"] is None
    assert box.pending()[0].sender is None


def test_ordering_across_kinds(box: Mailbox) -> None:
    kinds = ["reply", "message", "report", "reply", "message", "reply"]
    posted = [
        box.post(kind=kind, text=f"#{i}", sender=None if kind == "reply" else CHILD)
        for i, kind in enumerate(kinds)
    ]
    assert [item.seq for item in posted] == [1, 2, 3, 4, 5, 6]
    pending = box.pending()
    assert [item.seq for item in pending] == [1, 2, 3, 4, 5, 6]
    assert [item.kind for item in pending] == kinds
    assert names(box.new_dir) == [f"{seq:012d}.json" for seq in range(1, 7)]
    assert box.counts() == {"replies": 3, "agent": 3}


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"kind": "note", "text": "x"}, "kind must be one of"),
        ({"kind": "reply", "text": b"bytes"}, "text must be a str"),
        ({"kind": "reply", "text": None}, "text must be a str"),
        ({"kind": "message", "text": "x", "sender": "a1b2c3d4"}, "sender"),
        ({"kind": "report", "text": "x", "created": "now"}, "clashes"),
        ({"kind": "report", "text": "x", "result": object()}, "JSON"),
        ({"kind": "reply", "text": "x" * (1 << 20)}, "too large"),
    ],
)
def test_invalid_items_are_refused_and_nothing_is_written(box: Mailbox, kwargs: dict, needle: str) -> None:
    with pytest.raises(InvalidItem, match=needle) as info:
        box.post(**kwargs)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, MailboxError) and isinstance(info.value, RoostError)
    assert names(box.new_dir) == [] and names(box.tmp_dir) == []
    assert box.last_seq() == 0


# -- caps --------------------------------------------------------------------------


def test_reply_cap_boundary(box: Mailbox) -> None:
    for i in range(50):
        box.post(kind="reply", text=f"r{i}")  # the 50th succeeds
    with pytest.raises(MailboxFull) as info:
        box.post(kind="reply", text="one too many")
    error = info.value
    assert (error.cap, error.pending, error.limit) == ("replies", 50, 50)
    assert "50 pending user replies" in str(error) and str(box.path) in str(error)
    assert len(names(box.new_dir)) == 50 and names(box.tmp_dir) == []
    # The agent cap is separate.
    box.post(kind="message", text="still fine", sender=CHILD)


def test_agent_cap_counts_messages_and_reports(box: Mailbox) -> None:
    for i in range(10):
        box.post(kind="message", text=f"m{i}", sender=CHILD)
        box.post(kind="report", text=f"r{i}", sender=CHILD)
    for kind in ("message", "report"):
        with pytest.raises(MailboxFull, match="20 pending agent items") as info:
            box.post(kind=kind, text="over", sender=CHILD)
        assert info.value.cap == "agent"
    box.post(kind="reply", text="user replies are not capped by the agent cap")
    assert box.counts() == {"replies": 1, "agent": 20}


def test_acked_items_free_the_cap(box: Mailbox) -> None:
    for i in range(50):
        box.post(kind="reply", text=f"r{i}")
    with pytest.raises(MailboxFull):
        box.post(kind="reply", text="full")
    assert box.ack(3) == 3
    for i in range(3):
        box.post(kind="reply", text=f"again {i}")
    with pytest.raises(MailboxFull):
        box.post(kind="reply", text="full again")


def test_custom_caps_and_zero(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "m", max_replies=0, max_agent=2)
    with pytest.raises(MailboxFull):
        box.post(kind="reply", text="no replies at all")
    box.post(kind="message", text="1", sender=CHILD)
    box.post(kind="report", text="2", sender=CHILD)
    with pytest.raises(MailboxFull):
        box.post(kind="message", text="3", sender=CHILD)
    with pytest.raises(ValueError):
        Mailbox(tmp_path / "m", max_replies=-1)


def test_caps_hold_under_concurrent_threads(box: Mailbox) -> None:
    results: list[int] = []
    refused: list[MailboxFull] = []
    lock = threading.Lock()

    def poster() -> None:
        for _ in range(30):
            try:
                item = box.post(kind="reply", text="x")
            except MailboxFull as exc:
                with lock:
                    refused.append(exc)
            else:
                with lock:
                    results.append(item.seq)

    threads = [threading.Thread(target=poster) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 50 and len(set(results)) == 50 and len(refused) == 70
    assert len(names(box.new_dir)) == 50


def test_a_box_over_its_cap_from_an_older_config_still_refuses(tmp_path: Path) -> None:
    Mailbox(tmp_path / "m", max_agent=30)
    wide = Mailbox(tmp_path / "m", max_agent=30)
    for i in range(25):
        wide.post(kind="message", text=str(i), sender=CHILD)
    narrow = Mailbox(tmp_path / "m")
    with pytest.raises(MailboxFull) as info:
        narrow.post(kind="message", text="x", sender=CHILD)
    assert info.value.pending == 25


# -- acks --------------------------------------------------------------------------


def test_cumulative_ack_and_its_counts(box: Mailbox) -> None:
    for i in range(5):
        box.post(kind="reply" if i % 2 else "message", text=str(i), sender=None)
    assert box.ack(3) == 3
    assert [item.seq for item in box.pending()] == [4, 5]
    assert [item.seq for item in box.acked()] == [1, 2, 3]
    assert box.ack(3) == 0  # twice
    assert box.ack(2) == 0  # below the watermark
    assert box.ack(0) == 0
    assert box.ack(100) == 2
    assert box.pending() == [] and len(box.acked()) == 5
    assert box.counts() == {"replies": 0, "agent": 0}
    assert names(box.cur_dir) == [f"{seq:012d}.json" for seq in range(1, 6)]


def test_ack_ahead_does_not_swallow_later_posts(box: Mailbox) -> None:
    box.post(kind="reply", text="1")
    assert box.ack(10) == 1
    item = box.post(kind="reply", text="2")
    assert item.seq == 2 and [i.seq for i in box.pending()] == [2]


@pytest.mark.parametrize("bad", [-1, 1.0, "3", None, True])
def test_ack_rejects_bad_seq(box: Mailbox, bad: object) -> None:
    with pytest.raises(ValueError, match="non-negative int"):
        box.ack(bad)  # type: ignore[arg-type]


def test_acked_items_are_byte_identical(box: Mailbox) -> None:
    box.post(kind="message", text="keep me", sender=CHILD)
    before = (box.new_dir / "000000000001.json").read_bytes()
    box.ack(1)
    assert (box.cur_dir / "000000000001.json").read_bytes() == before


# -- robustness --------------------------------------------------------------------


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


BAD_FILES = {
    "garbage.txt": b"hello\n",
    "000000000007.json": b'{"seq": 7, "kind": "reply", "from": null, "te',  # partial
    "000000000008.json": b'{"seq": 9, "kind": "reply", "from": null, "text": "x", '
    b'"created": "2026-11-30T11:20:00.123Z"}\n',  # name/seq mismatch
    "000000000010.json": b'{"seq": 10, "kind": "reply"}\n',  # missing keys
    "000000000011.json": b'{"seq": 11, "kind": "gossip", "from": null, "text": "x", '
    b'"created": "2026-11-30T11:20:00.123Z"}\n',  # unknown kind
    "000000000012.json": b"\xff\xfe\x00garbage",  # not UTF-8
    "000000000013.json": b"[1, 2, 3]\n",  # not an object
    "17.json": b"{}\n",  # wrong name
    ".hidden": b"",
}


def test_bad_files_go_to_bad_with_a_reason_and_the_box_keeps_working(box: Mailbox) -> None:
    for i in range(20):
        box.post(kind="reply", text=str(i))
    box.ack(20)
    good = box.post(kind="reply", text="good one")
    for name, data in BAD_FILES.items():
        _write(box.new_dir / name, data)
    (box.new_dir / "a-directory").mkdir()
    os.symlink("/etc/passwd", box.new_dir / "000000000014.json")
    os.mkfifo(box.new_dir / "000000000015.json")

    pending = box.pending()
    assert [item.text for item in pending] == ["good one"]
    assert names(box.new_dir) == [f"{good.seq:012d}.json"]
    moved = [*BAD_FILES, "a-directory", "000000000014.json", "000000000015.json"]
    for name in moved:
        assert os.path.lexists(box.bad_dir / name), name
        why = (box.bad_dir / f"{name}.why").read_text()
        assert why.endswith("\n") and why.count("\n") == 1 and len(why) > 5, (name, why)
    assert "seq 8" in (box.bad_dir / "000000000008.json.why").read_text()
    assert "missing key" in (box.bad_dir / "000000000010.json.why").read_text()
    assert "file name" in (box.bad_dir / "garbage.txt.why").read_text()
    # Contents are preserved as found.
    assert (box.bad_dir / "000000000007.json").read_bytes() == BAD_FILES["000000000007.json"]

    item = box.post(kind="reply", text="after the mess")
    assert item.seq == good.seq + 1
    assert [i.text for i in box.pending()] == ["good one", "after the mess"]
    assert box.ack(item.seq) == 2
    assert box.counts() == {"replies": 0, "agent": 0}


def test_a_file_above_the_counter_is_never_replaced_and_moves_it_up(box: Mailbox) -> None:
    # Issue 24 section 6: an item above the counter means the counter is behind the disk
    # (rolled back), so the counter moves up; the file is neither replaced nor dropped.
    box.post(kind="reply", text="1")
    squatter = Item(2, "reply", None, "dropped by hand", "2026-11-30T11:20:00.123Z")
    _write(box.new_dir / "000000000002.json", (squatter.to_json() + "\n").encode())
    five = Item(5, "reply", None, "five", "2026-11-30T11:20:00.123Z")
    _write(box.new_dir / "000000000005.json", (five.to_json() + "\n").encode())
    item = box.post(kind="reply", text="real")  # before any scan
    assert item.seq == 6
    assert [i.text for i in box.pending()] == ["1", "dropped by hand", "five", "real"]
    assert not any(box.bad_dir.iterdir())


def test_same_bad_name_twice_keeps_both(box: Mailbox) -> None:
    _write(box.new_dir / "junk", b"1")
    box.pending()
    _write(box.new_dir / "junk", b"2")
    box.pending()
    assert (box.bad_dir / "junk").read_bytes() == b"1"
    assert (box.bad_dir / "junk.1").read_bytes() == b"2"
    assert (box.bad_dir / "junk.1.why").exists()


def test_watch_quarantines_bad_files_too(box: Mailbox) -> None:
    _write(box.new_dir / "000000000001.json", b"{not json")
    box.post(kind="reply", text="fine")
    with box.watch() as watcher:
        item = watcher.next_item(timeout=5)
        assert item is not None and item.text == "fine"
        _write(box.new_dir / "dropped-by-hand", b"x")  # IN_CLOSE_WRITE wakes the watcher
        wait_until(lambda: (box.bad_dir / "dropped-by-hand.why").exists() or watcher.drain())
    assert (box.bad_dir / "000000000001.json.why").exists()
    assert (box.bad_dir / "dropped-by-hand.why").exists()


def test_stale_tmp_files_are_swept_on_open(tmp_path: Path) -> None:
    path = tmp_path / "mailbox"
    Mailbox(path)
    old, fresh = path / "tmp" / "000000000003.json.1.dead", path / "tmp" / "in-progress"
    old.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    Mailbox(path)
    assert not old.exists() and fresh.exists()


def test_restart_sees_the_same_state_and_continues_the_seq(tmp_path: Path) -> None:
    path = tmp_path / "mailbox"
    first = Mailbox(path)
    for i in range(3):
        first.post(kind="reply", text=str(i))
    first.ack(1)
    second = Mailbox(path)
    assert [i.seq for i in second.pending()] == [2, 3]
    assert [i.seq for i in second.acked()] == [1]
    assert second.post(kind="reply", text="next").seq == 4
    assert first.post(kind="reply", text="and the old object too").seq == 5


def test_reboot_jumps_past_the_reservation(box: Mailbox) -> None:
    box.post(kind="reply", text="1")
    box.post(kind="reply", text="2")
    seq_file = box.path / "seq"
    record = seq_file.read_text()
    reserved = int(re.search(r"reserved=(\d+)", record).group(1))  # type: ignore[union-attr]
    assert reserved >= 2
    # Pretend the machine rebooted and the un-fsynced `last` rolled back.
    seq_file.write_text(
        re.sub(r"boot=\S+", "boot=another-boot", record.replace("last=000000000002", "last=000000000001"))
    )
    item = box.post(kind="reply", text="after reboot")
    assert item.seq == reserved + 1


@pytest.mark.parametrize("content", [b"", b"garbage", b"last=zz\n"])
def test_damaged_counter_is_rebuilt_from_the_directories(box: Mailbox, content: bytes) -> None:
    for i in range(3):
        box.post(kind="reply", text=str(i))
    box.ack(2)
    _write(box.bad_dir / "000000000009.json", b"x")
    (box.path / "seq").write_bytes(content)
    assert box.post(kind="reply", text="after").seq == 10


def test_failed_write_leaves_nothing_behind(box: Mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    box.post(kind="reply", text="first")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(MailboxError, match=r"while publishing item 2 to .*new") as info:
        box.post(kind="reply", text="lost")
    assert "Input/output error" in str(info.value)
    assert names(box.tmp_dir) == [] and names(box.new_dir) == ["000000000001.json"]
    monkeypatch.undo()
    later = box.post(kind="reply", text="works again")
    assert later.seq > 1 and len({i.seq for i in box.pending()}) == 2


def test_failed_counter_fsync_writes_no_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    box = Mailbox(tmp_path / "m")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(MailboxError, match="seq counter"):
        box.post(kind="reply", text="x")
    assert names(box.tmp_dir) == [] and names(box.new_dir) == []


def test_failed_rename_removes_the_tmp_file(box: Mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    real_rename = os.rename

    def broken_rename(src: str, dst: str, **dir_fds: int) -> None:
        if "tmp" in str(src) or "src_dir_fd" in dir_fds:  # the publishing rename
            raise OSError(18, "Invalid cross-device link")
        real_rename(src, dst, **dir_fds)

    monkeypatch.setattr(os, "rename", broken_rename)
    with pytest.raises(MailboxError, match="while publishing item 1"):
        box.post(kind="reply", text="x")
    assert names(box.tmp_dir) == [] and names(box.new_dir) == []


def test_failed_write_midway_removes_the_tmp_file(box: Mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_write(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileops.os, "write", broken_write)
    with pytest.raises(MailboxError, match="No space left"):
        box.post(kind="reply", text="x")
    monkeypatch.undo()
    assert names(box.tmp_dir) == [] and names(box.new_dir) == []


def test_concurrent_threads_get_unique_increasing_seqs(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "m", max_replies=10_000, max_agent=10_000)
    seen: list[list[int]] = [[] for _ in range(4)]

    def poster(index: int) -> None:
        for _ in range(40):
            seen[index].append(box.post(kind="message", text="x", sender=CHILD).seq)

    threads = [threading.Thread(target=poster, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    all_seqs = [seq for per in seen for seq in per]
    assert sorted(all_seqs) == list(range(1, 161))
    for per in seen:
        assert per == sorted(per)


# -- watch -------------------------------------------------------------------------


def test_watch_yields_pending_then_new_items_from_another_thread(box: Mailbox) -> None:
    box.post(kind="reply", text="a")
    box.post(kind="message", text="b", sender=CHILD)
    with box.watch() as watcher:
        first = [watcher.next_item(timeout=5), watcher.next_item(timeout=5)]
        assert [item.seq for item in first if item] == [1, 2]
        assert watcher.next_item(timeout=0) is None
        poster = threading.Thread(target=lambda: box.post(kind="report", text="c", sender=CHILD))
        poster.start()
        item = watcher.next_item(timeout=10)
        poster.join()
        assert item is not None and (item.seq, item.text) == (3, "c")


def test_watch_wakes_on_a_post_from_another_process(box: Mailbox) -> None:
    code = (
        "import sys; from roost.mailbox import Mailbox; "
        "Mailbox(sys.argv[1]).post(kind='message', text='from afar', "
        "sender={'id': 'f0000001', 'name': 'fg', 'relation': 'parent'})"
    )
    with box.watch() as watcher:
        assert watcher.next_item(timeout=0) is None
        proc = subprocess.Popen([sys.executable, "-c", code, str(box.path)])
        item = watcher.next_item(timeout=20)
        assert proc.wait(timeout=20) == 0
    assert item is not None and item.text == "from afar" and item.sender["name"] == "fg"


def test_watch_is_iterable_in_seq_order_without_repeats(box: Mailbox) -> None:
    got: list[int] = []
    watcher = box.watch()

    def consume() -> None:
        for item in watcher:
            got.append(item.seq)
            if item.seq % 7 == 0:
                box.ack(item.seq)

    consumer = threading.Thread(target=consume)
    consumer.start()
    for i in range(60):
        box.post(kind="reply" if i % 3 else "message", text=str(i))
        if i % 10 == 0:
            watcher.rescan()  # extra wake-ups must not cause repeats
    wait_until(lambda: len(got) >= 60)
    watcher.close()
    consumer.join(timeout=10)
    assert not consumer.is_alive()
    assert got == list(range(1, 61))


def test_wake_after_an_ack_is_not_delayed(box: Mailbox) -> None:
    # watchdog's Observer holds IN_MOVED_FROM (an ack moving a file out of new/) for
    # 0.5 s and later events wait behind it; the watcher must not go through that.
    delays = []
    with box.watch() as watcher:
        for i in range(5):
            box.post(kind="reply", text=str(i))
            item = watcher.next_item(timeout=5)
            assert item is not None
            box.ack(item.seq)
            started = time.monotonic()
            box.post(kind="reply", text=f"{i} again")
            again = watcher.next_item(timeout=5)
            delays.append(time.monotonic() - started)
            assert again is not None
            box.ack(again.seq)
    assert sorted(delays)[2] < 0.4, delays  # the median: robust to a busy machine


def test_items_acked_by_someone_else_before_the_scan_are_not_yielded(box: Mailbox) -> None:
    for i in range(3):
        box.post(kind="reply", text=str(i))
    Mailbox(box.path).ack(2)
    with box.watch() as watcher:
        assert [item.seq for item in watcher.drain()] == [3]


def test_watch_recovers_from_an_inotify_overflow(box: Mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent, InotifyFD

    with box.watch() as watcher:
        assert watcher.drain() == []
        # Lose every event from here on, as an overflowing kernel queue would.
        monkeypatch.setattr(watch._InotifySource, "on_event", lambda self, event: None)
        box.post(kind="reply", text="unannounced")
        assert watcher.next_item(timeout=0) is None
        # Feed the kernel's overflow event through watchdog's reader.
        reader = watcher.thread
        assert isinstance(reader, InotifyFD)
        reader.handle_event(InotifyEvent(-1, InotifyConstants.IN_Q_OVERFLOW, 0, b""))
        assert watcher.overflows == 1
        item = watcher.next_item(timeout=5)
        assert item is not None and item.text == "unannounced"
        # The public hook does the same.
        box.post(kind="reply", text="also unannounced")
        assert watcher.next_item(timeout=0) is None
        watcher.rescan()
        item = watcher.next_item(timeout=0)
        assert item is not None and item.text == "also unannounced"


def test_on_change_and_drain_from_asyncio(box: Mailbox) -> None:
    box.post(kind="reply", text="waiting already")

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        watcher = box.watch(on_change=lambda: loop.call_soon_threadsafe(wake.set))
        texts: list[str] = []
        try:
            threading.Thread(
                target=lambda: [box.post(kind="message", text=f"m{i}", sender=CHILD) for i in range(3)]
            ).start()
            while len(texts) < 4:
                texts += [item.text for item in watcher.drain()]
                if len(texts) < 4:
                    await asyncio.wait_for(wake.wait(), timeout=10)
                    wake.clear()
        finally:
            watcher.close()
        return texts

    assert asyncio.run(main()) == ["waiting already", "m0", "m1", "m2"]


def test_a_failing_callback_does_not_stop_the_watcher(box: Mailbox) -> None:
    calls: list[int] = []

    def bad() -> None:
        calls.append(1)
        raise RuntimeError("boom")

    with box.watch(on_change=bad) as watcher:
        box.post(kind="reply", text="1")
        assert watcher.next_item(timeout=5) is not None
        box.post(kind="reply", text="2")
        assert watcher.next_item(timeout=5) is not None
    assert calls


def test_close_ends_iteration_and_stops_the_observer(box: Mailbox) -> None:
    watcher = box.watch()
    observer = watcher.thread
    assert observer is not None and observer.is_alive()
    done = threading.Event()

    def consume() -> None:
        for _ in watcher:
            pass
        done.set()

    threading.Thread(target=consume).start()
    watcher.close()
    assert done.wait(10)
    assert not observer.is_alive()
    assert watcher.next_item(timeout=None) is None
    with pytest.raises(StopIteration):
        next(watcher)
    watcher.close()  # twice is fine


def test_watch_ends_when_the_mailbox_is_removed(box: Mailbox) -> None:
    watcher = box.watch()
    try:
        shutil.rmtree(box.path)
        wait_until(lambda: watcher.closed)
        assert watcher.removed
        assert watcher.next_item(timeout=1) is None
    finally:
        watcher.close()


def test_fallback_observer_source_works(box: Mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where inotify is missing the watcher runs watchdog's platform Observer instead.
    monkeypatch.setattr(watch, "HAVE_INOTIFY", False)
    box.post(kind="reply", text="1")
    with box.watch() as watcher:
        assert isinstance(watcher._source, watch._ObserverSource)
        assert watcher.next_item(timeout=5) is not None
        box.post(kind="reply", text="2")
        item = watcher.next_item(timeout=10)
        assert item is not None and item.text == "2"


def test_a_scan_racing_the_removal_ends_the_watch(box: Mailbox) -> None:
    box.post(kind="reply", text="1")
    watcher = box.watch()
    try:
        shutil.rmtree(box.path)
        watcher.rescan()  # a scan before (or without) the removal event
        assert watcher.next_item(timeout=5) is None
        assert watcher.closed and watcher.removed
    finally:
        watcher.close()


def test_many_watchers_and_no_leaked_threads(box: Mailbox) -> None:
    before = threading.active_count()
    for _ in range(5):
        with box.watch() as watcher:
            box.post(kind="reply", text="x")
            assert watcher.next_item(timeout=5) is not None
            box.ack(box.last_seq())
    wait_until(lambda: threading.active_count() <= before)


def test_stale_sweep_constant_is_an_hour() -> None:
    assert box_module.STALE_TMP_SECONDS == 3600


# -- scripts/roost-mailbox -----------------------------------------------------------


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=30, check=False)


def test_inspection_script_lists_pending_and_acked(tmp_path: Path) -> None:
    job = tmp_path / "jobs" / "a1b2c3d4"
    box = Mailbox(job / "mailbox")
    box.post(kind="reply", text="please also update the changelog")
    box.post(kind="message", text="x" * 100 + "\nsecond line", sender=CHILD)
    box.post(
        kind="report",
        text="done:\tall tests pass",
        sender=CHILD,
        result="ok",
        state="done",
        question=None,
        error=None,
    )
    box.ack(1)
    _write(box.new_dir / "000000000099.json", b"{broken")  # not scanned yet

    result = run_script(str(box.path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["STATE", "SEQ", "KIND", "FROM", "CREATED", "TEXT"]
    rows = [line.split(None, 5) for line in lines[1:]]
    by_seq = {row[1]: row for row in rows}
    assert by_seq["1"][:4] == ["acked", "1", "reply", "user"]
    assert by_seq["1"][5] == "please also update the changelog"
    assert by_seq["2"][:4] == ["pending", "2", "message", "Checkout"]
    assert "refactor/a1b2c3d4" in lines[[r[1] for r in rows].index("2") + 1]
    assert by_seq["3"][0] == "pending" and by_seq["3"][2] == "report"
    assert "done: all tests pass" in lines[[r[1] for r in rows].index("3") + 1]
    message_line = lines[[r[1] for r in rows].index("2") + 1]
    assert message_line.endswith("x" * 60) and "x" * 61 not in message_line
    assert CREATED_RE.match(by_seq["1"][4])
    assert any("unreadable" in line for line in lines)

    pending = run_script("--pending", str(job))  # a job dir works too
    assert pending.returncode == 0, pending.stderr
    assert [line.split()[0] for line in pending.stdout.splitlines()[1:]] == ["pending"] * 3
    acked = run_script("--acked", str(job))
    assert [line.split()[:2] for line in acked.stdout.splitlines()[1:]] == [["acked", "1"]]


def test_inspection_script_errors_and_help(tmp_path: Path) -> None:
    missing = run_script(str(tmp_path / "nope"))
    assert missing.returncode != 0 and "no such directory" in missing.stderr
    not_a_box = run_script(str(tmp_path))
    assert not_a_box.returncode != 0 and "not a mailbox" in not_a_box.stderr
    helped = run_script("-h")
    assert helped.returncode == 0 and "usage:" in helped.stdout and "--pending" in helped.stdout
    bad_option = run_script("--bogus", str(tmp_path))
    assert bad_option.returncode != 0 and "unknown option" in bad_option.stderr
    empty = Mailbox(tmp_path / "empty")
    listed = run_script(str(empty.path))
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 1
