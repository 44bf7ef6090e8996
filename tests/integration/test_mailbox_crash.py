"""Writers killed with SIGKILL at random moments never leave a partial or doubled item."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kit.wait import wait_until

from roost.mailbox import Item, Mailbox

# Posts forever, acks now and then, and records each returned seq durably (write +
# fsync) only after post() returned: a logged seq is a promise the mailbox must keep.
WRITER = r"""
import os, sys
from roost.mailbox import Mailbox
path, log = sys.argv[1], sys.argv[2]
box = Mailbox(path, max_replies=1_000_000, max_agent=1_000_000)
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
sender = {"id": "%08x" % os.getpid(), "name": "crashy", "relation": "child"}
i = 0
while True:
    kind = ("reply", "message", "report")[i % 3]
    item = box.post(kind=kind, text="%d #%d %s" % (os.getpid(), i, "x" * (i % 200)),
                    sender=None if kind == "reply" else sender, result="r" * (i % 50))
    os.write(fd, b"%d\n" % item.seq)
    os.fsync(fd)
    if i % 11 == 5:
        box.ack(item.seq - 3)
    i += 1
"""

ROUNDS = 6
WRITERS = 3


def logged(log: Path) -> list[int]:
    if not log.exists():
        return []
    # The last line may be cut by the kill; only whole lines were promised.
    return [int(line) for line in log.read_text().split("\n")[:-1] if line]


def check_invariants(path: Path, promised: set[int]) -> None:
    seen: dict[int, str] = {}
    for sub in ("new", "cur"):
        for name in os.listdir(path / sub):
            raw = (path / sub / name).read_bytes()
            # Never partial: every published file is a whole, valid, one-line item.
            assert raw.endswith(b"\n") and raw.count(b"\n") == 1, (sub, name, raw[-80:])
            item = Item.from_json(raw, expect_seq=int(name[:12]))
            assert item.seq not in seen, f"seq {item.seq} in {seen[item.seq]}/ and {sub}/"
            seen[item.seq] = sub
    missing = promised - set(seen)
    assert not missing, f"posts that returned but are gone: {sorted(missing)[:10]}"
    assert os.listdir(path / "bad") == []


def test_sigkilled_writers_lose_nothing_and_double_nothing(tmp_path: Path) -> None:
    rng = random.Random(os.getpid() ^ int(time.time()))
    path = tmp_path / "mailbox"
    # A watcher reads every arrival while the writers die: a partial file would be
    # quarantined to bad/ by its scans, which check_invariants() rejects.
    watcher = Mailbox(path).watch()
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.extend(item.seq for item in watcher))
    reader.start()
    try:
        promised = _rounds(path, rng)
    finally:
        watcher.close()
        reader.join(timeout=10)
    assert seen == sorted(set(seen))  # in order, never twice
    assert os.listdir(path / "bad") == []
    # What the watcher missed was acknowledged (by a writer) before its scan got there.
    acked = {int(name[:12]) for name in os.listdir(path / "cur")}
    assert promised - set(seen) <= acked | {s for s in promised if s > max(seen, default=0)}


def _rounds(path: Path, rng: random.Random) -> set[int]:
    tmp_path = path.parent
    promised: set[int] = set()
    for round_no in range(ROUNDS):
        logs = [tmp_path / f"r{round_no}w{i}.log" for i in range(WRITERS)]
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(log)]) for log in logs]
        try:
            for proc, log in zip(procs, logs, strict=True):
                target = rng.randint(1, 40)
                wait_until(lambda log=log, target=target: len(logged(log)) >= target)
                # Randomise where inside post() (or ack) the kill lands.
                time.sleep(rng.uniform(0, 0.004))
                proc.send_signal(signal.SIGKILL)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait(timeout=30)
        for log in logs:
            seqs = logged(log)
            assert seqs == sorted(seqs)
            promised.update(seqs)
        check_invariants(path, promised)
        # A fresh Mailbox continues after the highest seq that exists anywhere.
        box = Mailbox(path)
        pending = box.pending()
        assert os.listdir(path / "bad") == []
        newest = box.post(kind="reply", text=f"after round {round_no}")
        promised.add(newest.seq)
        assert newest.seq > max(promised - {newest.seq})
        if pending and round_no % 2:
            box.ack(pending[len(pending) // 2].seq)
    check_invariants(path, promised)
    return promised
