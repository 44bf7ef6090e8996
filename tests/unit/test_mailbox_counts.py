"""Mailbox.counts() reuses its listing of new/ only while new/ is unchanged and was already
settled (older than COUNTS_SETTLED_NS) when listed; every change is counted."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from roost.mailbox import Mailbox
from roost.mailbox.box import COUNTS_SETTLED_NS


def age(box: Mailbox, seconds: float) -> None:
    """Make new/ look last changed `seconds` ago."""
    stamp = time.time_ns() - int(seconds * 1e9)
    os.utime(box.new_dir, ns=(stamp, stamp))


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Mailbox, list[int]]:
    box = Mailbox(tmp_path / "box")
    calls: list[int] = []
    scan = box.scan_new

    def counted_scan(after: int = 0) -> list:  # type: ignore[type-arg]
        calls.append(after)
        return scan(after)

    monkeypatch.setattr(box, "scan_new", counted_scan)
    return box, calls


def test_a_settled_folder_is_listed_once(listings: tuple[Mailbox, list[int]]) -> None:
    box, calls = listings
    box.post("reply", "one")
    box.post("message", "two", sender={"id": "a1b2c3d4", "name": "peer", "relation": "child"})
    age(box, 10)
    assert box.counts() == {"replies": 1, "agent": 1}
    assert box.counts() == {"replies": 1, "agent": 1}
    assert len(calls) == 1


def test_every_change_is_counted(listings: tuple[Mailbox, list[int]]) -> None:
    box, _calls = listings
    age(box, 10)
    assert box.counts() == {"replies": 0, "agent": 0}
    box.post("reply", "later")  # new/'s mtime moves on
    assert box.counts() == {"replies": 1, "agent": 0}
    item = box.scan_new()[0]
    age(box, 10)
    box.counts()
    box.ack(item.seq)
    assert box.counts() == {"replies": 0, "agent": 0}


def test_a_recent_folder_is_listed_every_time(listings: tuple[Mailbox, list[int]]) -> None:
    box, calls = listings
    box.post("reply", "now")
    assert COUNTS_SETTLED_NS >= 1_000_000_000  # a clock tick is far shorter
    assert box.counts() == {"replies": 1, "agent": 0}
    # A post in the same clock tick would keep new/'s mtime: nothing was kept to reuse.
    stamp = os.stat(box.new_dir).st_mtime_ns
    box.post("reply", "same tick")
    os.utime(box.new_dir, ns=(stamp, stamp))
    assert box.counts() == {"replies": 2, "agent": 0}
    assert len(calls) == 2
