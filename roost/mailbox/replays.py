"""What the mailbox knows of its acknowledged items, to tell a replayed copy of one.

Every item `post` writes carries a random `id`; an item copied back into new/ under any
seq carries the id of the item it repeats. `AckedIds` is the id -> seq index of cur/: each
file is read once per Mailbox object (its first bytes, where `post` writes the id), and
cur/ is listed again only when its mtime is not the one the index last accounted for. An
ack by the same object accounts for its own change (it knows what it moved), so the
reader that delivers, the only one that acknowledges, lists cur/ once, not per item. The
rule that uses it is `Mailbox._replays` (docs/reference/mailbox.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from roost.mailbox.item import ID_PREFIX_BYTES, id_of_prefix, seq_of


class AckedIds:
    """id -> seq of the items in one cur/ folder, read lazily and once per file."""

    def __init__(self, cur_dir: Path, full_id: Callable[[str, int], str | None]) -> None:
        self.cur_dir = cur_dir
        self._full_id = full_id  # (name, seq) -> id by a full parse, for other layouts
        self._ids: dict[str, int] = {}
        self._read: set[str] = set()
        self._stamp: int | None = None
        self._lock = threading.Lock()

    def stamp(self) -> int | None:
        """cur/'s mtime now (an ack takes it before it moves anything)."""
        try:
            return os.stat(self.cur_dir).st_mtime_ns
        except OSError:
            return None

    def moved(self, before: int | None, items: list[tuple[str, int, str | None]], complete: bool) -> None:
        """An ack moved these (name, seq, id) into cur/, cur/'s mtime being `before` when it
        began; `complete` when their ids are all known (every one was read or posted here).
        If the index was up to date at `before`, it is up to date now without a listing."""
        with self._lock:
            for name, seq, item_id in items:
                self._read.add(name)
                if item_id is not None:
                    self._ids.setdefault(item_id, seq)
            if complete and before is not None and before == self._stamp:
                self._stamp = self.stamp()

    def get(self, item_id: str) -> int | None:
        """The seq of the acknowledged item with this id, or None."""
        with self._lock:
            self._refresh()
            return self._ids.get(item_id)

    def _refresh(self) -> None:
        try:
            stamp = os.stat(self.cur_dir).st_mtime_ns
            if stamp == self._stamp:
                return
            names = os.listdir(self.cur_dir)
        except OSError:
            return
        for name in names:
            if name in self._read:
                continue
            seq = seq_of(name)
            if seq is None:
                continue
            self._read.add(name)
            item_id = self._id_in(name, seq)
            if item_id is not None:
                self._ids.setdefault(item_id, seq)
        # cur/ changes only by acks, and only the reader that delivers acks (one worker
        # at a time holds the job), so a change in the same clock tick after this listing
        # is that reader's own ack, which `moved` accounts for.
        self._stamp = stamp

    def _id_in(self, name: str, seq: int) -> str | None:
        try:
            fd = os.open(
                f"{self.cur_dir}{os.sep}{name}", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            )
        except OSError:
            return None
        try:
            head = os.pread(fd, ID_PREFIX_BYTES, 0)
        except OSError:
            return None
        finally:
            os.close(fd)
        found = id_of_prefix(head)
        return found if found is not None else self._full_id(name, seq)
