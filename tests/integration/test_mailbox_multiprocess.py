"""Several writer processes and a concurrent consumer share one mailbox."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from roost.mailbox import Item, Mailbox

WRITER = r"""
import os, sys
from roost.mailbox import Mailbox, MailboxFull
path, log, count, cap = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
box = Mailbox(path, max_replies=cap, max_agent=cap)
kinds = ("reply", "message", "report")
sender = {"id": "%08x" % os.getpid(), "name": "writer", "relation": "sibling"}
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
sys.stdin.read(1)  # start together: the parent writes once every writer is up
for i in range(count):
    kind = kinds[i % 3] if cap > 1000 else "reply"
    try:
        item = box.post(kind=kind, text="%d #%d" % (os.getpid(), i),
                        sender=None if kind == "reply" else sender)
    except MailboxFull:
        os.write(fd, b"full\n")
        continue
    os.write(fd, b"%d\n" % item.seq)
os.close(fd)
"""


def start_writers(box_path: Path, logs: list[Path], count: int, cap: int) -> list[subprocess.Popen]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(box_path), str(log), str(count), str(cap)],
            stdin=subprocess.PIPE,
        )
        for log in logs
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"g")
        proc.stdin.close()
    return procs


def read_log(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def files_of(directory: Path) -> dict[int, Item]:
    found = {}
    for name in os.listdir(directory):
        item = Item.from_json((directory / name).read_bytes(), expect_seq=int(name[:12]))
        found[item.seq] = item
    return found


@pytest.mark.slow
def test_four_writers_and_a_concurrent_consumer(tmp_path: Path) -> None:
    path = tmp_path / "mailbox"
    box = Mailbox(path, max_replies=100_000, max_agent=100_000)
    logs = [tmp_path / f"writer{i}.log" for i in range(4)]
    yielded: list[int] = []
    acked_total = 0
    stop = threading.Event()
    watcher = box.watch()

    def consume() -> None:
        nonlocal acked_total
        while not stop.is_set() or yielded[-1:] != [box.last_seq()]:
            first = watcher.next_item(timeout=0.5)
            if first is None:
                continue
            batch = [first, *watcher.drain()]  # ack what has piled up in one call
            yielded.extend(item.seq for item in batch)
            acked_total += box.ack(batch[-1].seq)

    consumer = threading.Thread(target=consume, daemon=True)  # a failure must not hang pytest
    consumer.start()
    try:
        procs = start_writers(path, logs, 500, 100_000)
        for proc in procs:
            assert proc.wait(timeout=120) == 0
        stop.set()
        consumer.join(timeout=60)
        assert not consumer.is_alive()
    finally:
        stop.set()
        watcher.close()

    returned = [int(seq) for log in logs for seq in read_log(log)]
    assert len(returned) == 2000 and len(set(returned)) == 2000
    per_writer = [[int(seq) for seq in read_log(log)] for log in logs]
    for seqs in per_writer:
        assert seqs == sorted(seqs)
    pending, acked = files_of(path / "new"), files_of(path / "cur")
    assert not set(pending) & set(acked)
    on_disk = set(pending) | set(acked)
    assert on_disk == set(returned)
    assert sorted(yielded) == yielded and set(yielded) == set(returned)
    assert acked_total + len(pending) == 2000
    assert os.listdir(path / "bad") == [] and os.listdir(path / "tmp") == []


def test_cap_holds_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "mailbox"
    Mailbox(path)
    logs = [tmp_path / f"writer{i}.log" for i in range(4)]
    procs = start_writers(path, logs, 30, 50)
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    entries = [entry for log in logs for entry in read_log(log)]
    accepted = [int(entry) for entry in entries if entry != "full"]
    assert len(accepted) == 50 and entries.count("full") == 70
    assert len(os.listdir(path / "new")) == 50
    assert Mailbox(path).counts() == {"replies": 50, "agent": 0}
