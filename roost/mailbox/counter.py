"""The mailbox's seq counter: one small file, `<mailbox>/seq`, that is also the lock.

The file holds one line::

    last=000000000017 reserved=000000000080 acked=000000000012 boot=<kernel boot id>

- `last` is the last seq handed out. Every process reads and writes it under an
  exclusive lock (portalocker: flock) on this same file, held for the whole post, so seqs are unique and
  published in increasing order.
- `reserved` is the durable bound: a seq is only published after a record with
  `reserved >= seq` was fsynced. Seqs are reserved in blocks, so only one post in
  `RESERVE_BLOCK` pays for an fsync of this file; the others update `last` in the page
  cache, which every process of this boot shares and which survives any process
  crash (kill -9). After a reboot (the kernel boot id changed) `last` may have been
  lost, so the counter jumps to `reserved`: a gap, never a duplicate.
- `acked` is a hint, not a fact: no pending item has a seq <= `acked` (as far as posts
  through this API go), so `last - acked` bounds how many items are pending and lets
  `post()` skip listing new/ while far from a cap. It is tightened whenever new/ is
  listed under the lock, and reset to 0 (forcing a listing) after a reboot.

A missing, empty or unreadable file is rebuilt from the highest seq found in new/,
cur/ and bad/. A well-formed file is not trusted either: a counter rolled back to a lower
value would hand out seqs again (a second item under a seq the worker already delivered,
an acknowledged item in cur/ replaced). `catch_up` lifts it to the highest seq on disk; the
Mailbox calls it on its first post and whenever the counter looks behind (below a seq it
saw, or a name it would take already exists).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from roost.host import fsutil
from roost.mailbox.errors import MailboxError
from roost.mailbox.fileops import FILE_MODE
from roost.mailbox.item import MAX_SEQ, seq_of

log = logging.getLogger(__name__)

RESERVE_BLOCK = 64
"""Seqs reserved per fsync of the counter file."""

_BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
_boot_id_cache: list[str | None] = []


def boot_id() -> str | None:
    """The kernel's boot id, or None where there is none (then every post fsyncs)."""
    if not _boot_id_cache:
        try:
            with open(_BOOT_ID_PATH, encoding="ascii") as handle:
                value = handle.read().strip()
            _boot_id_cache.append(value if value and " " not in value else None)
        except OSError:
            _boot_id_cache.append(None)
    return _boot_id_cache[0]


@dataclass
class CounterState:
    """The counter as read under the lock; `allocate` and `flush` write it back."""

    fd: int
    path: Path
    last: int
    reserved: int
    acked: int
    boot: str | None
    size: int
    dirty: bool = False

    def pending_bound(self) -> int:
        """An upper bound of how many items are pending in new/ (see module docstring)."""
        return max(0, self.last - self.acked)

    def tighten(self, acked: int) -> None:
        """Record that no pending item has a seq <= `acked` (from a listing under the lock)."""
        acked = min(acked, self.last)
        if acked != self.acked:
            self.acked = acked
            self.dirty = True

    def allocate(self) -> int:
        """Hand out the next seq; it is durable in this file before this returns."""
        seq = self.last + 1
        if seq > MAX_SEQ:
            raise MailboxError(f"seq counter exhausted in {self.path}")
        self.last = seq
        durable = seq <= self.reserved
        if not durable:
            block = RESERVE_BLOCK if self.boot is not None else 1
            self.reserved = min(MAX_SEQ, seq + block - 1)
        self._write(fsync=not durable)
        return seq

    def flush(self) -> None:
        """Write back a changed hint (no fsync: a lost hint only costs one listing)."""
        if self.dirty:
            self._write(fsync=False)

    def _write(self, *, fsync: bool) -> None:
        record = (
            f"last={self.last:012d} reserved={self.reserved:012d} "
            f"acked={self.acked:012d} boot={self.boot or '-'}\n"
        ).encode("ascii")
        try:
            os.pwrite(self.fd, record, 0)
            if len(record) < self.size:
                os.ftruncate(self.fd, len(record))
            self.size = len(record)
            if fsync:
                fsutil.fsync(self.fd)
        except OSError as exc:
            raise MailboxError(f"while updating the seq counter {self.path}: {exc}") from exc
        self.dirty = False


class SeqCounter:
    """Opens, locks and parses `<mailbox>/seq` for one operation at a time.

    The file is opened anew for every operation: no descriptor outlives a call, so a
    Mailbox object survives fork() and costs nothing while idle, and two threads of one
    process exclude each other through flock like two processes do.
    """

    def __init__(self, box_dir: Path) -> None:
        self.box_dir = box_dir
        self.path = box_dir / "seq"

    @contextlib.contextmanager
    def locked(self) -> Iterator[CounterState]:
        """Hold the mailbox lock and yield the counter; a changed hint is written back."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE)
        except OSError as exc:
            raise MailboxError(f"while opening the seq counter {self.path}: {exc}") from exc
        # Imported on the first post, not with the mailbox: portalocker's import reads
        # package metadata (~10 ms), and a worker, which only reads and acks, never posts.
        import portalocker

        try:
            with contextlib.suppress(OSError):  # a file roost keeps is 0600 (docs/reference/mailbox.md)
                if stat.S_IMODE(os.fstat(fd).st_mode) != FILE_MODE:
                    os.fchmod(fd, FILE_MODE)
            try:
                # portalocker's exclusive lock is flock(2) on POSIX: it works across
                # processes and dies with its holder. (~40 us, against a post's fsyncs.)
                portalocker.lock(fd, portalocker.LockFlags.EXCLUSIVE)
            except (OSError, portalocker.LockException) as exc:
                raise MailboxError(f"while locking {self.path}: {exc}") from exc
            state = self._read(fd)
            try:
                yield state
            finally:
                state.flush()
        finally:
            os.close(fd)  # closing the only descriptor releases the flock

    def catch_up(self, state: CounterState) -> int:
        """Under the lock: lift the counter to the highest seq in new/, cur/ and bad/ when
        it is below it (rolled back); the highest seq on disk."""
        highest = self._highest_on_disk()
        if highest > state.last:
            log.warning(
                "seq counter %s was at %d below seq %d on disk: moved up", self.path, state.last, highest
            )
            state.last = highest
            state.reserved = max(state.reserved, highest)
            state.acked = min(state.acked, highest)
            state._write(fsync=True)
        return highest

    def caught_up_bound(self) -> int:
        """`published_bound` after `catch_up` under the lock (a seq on disk above the
        counter means the counter, not the file, is wrong)."""
        with self.locked() as state:
            self.catch_up(state)
            return state.last

    def peek_last(self) -> int:
        """The last seq handed out, read under the lock (for inspection and tests)."""
        with self.locked() as state:
            return state.last

    def published_bound(self) -> int:
        """The highest seq that can have been published, read without the lock.

        A reader that listed new/ before calling this sees every seq it listed covered
        (posts write the counter before they rename the item into new/).
        """
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            try:
                fields = _parse(os.pread(fd, 256, 0))
            finally:
                os.close(fd)
        except FileNotFoundError:
            return self._highest_on_disk()
        except OSError as exc:
            raise MailboxError(f"while reading the seq counter {self.path}: {exc}") from exc
        if fields is None:
            return self._highest_on_disk()
        last, reserved, _acked, boot = fields
        return last if boot == boot_id() else max(last, reserved)

    def _read(self, fd: int) -> CounterState:
        try:
            raw = os.pread(fd, 256, 0)
        except OSError as exc:
            raise MailboxError(f"while reading the seq counter {self.path}: {exc}") from exc
        current_boot = boot_id()
        fields = _parse(raw)
        if fields is None:
            # Missing or damaged: never go below a seq that exists on disk.
            last = self._highest_on_disk()
            state = CounterState(fd, self.path, last, last, 0, current_boot, len(raw), dirty=True)
            return state
        last, reserved, acked, boot = fields
        state = CounterState(fd, self.path, last, max(reserved, last), acked, boot, len(raw))
        if boot != current_boot:
            # Rebooted since the last write: `last` may have rolled back to the last
            # fsynced record, but no published seq exceeds `reserved`.
            state.last = state.reserved
            state.acked = 0
            state.boot = current_boot
            state.dirty = True
        return state

    def _highest_on_disk(self) -> int:
        highest = 0
        for sub in ("new", "cur", "bad"):
            try:
                names = os.listdir(self.box_dir / sub)
            except FileNotFoundError:
                continue
            for name in names:
                seq = seq_of(name[:17])
                if seq is not None and seq > highest:
                    highest = seq
        return highest


def _parse(raw: bytes) -> tuple[int, int, int, str | None] | None:
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    if not text.endswith("\n"):
        return None
    values = dict(part.partition("=")[::2] for part in text.split())
    try:
        last = int(values["last"])
        reserved = int(values["reserved"])
        acked = int(values["acked"])
        boot = values["boot"]
    except (KeyError, ValueError):
        return None
    if not (0 <= last <= MAX_SEQ and 0 <= reserved <= MAX_SEQ and acked >= 0):
        return None
    return last, reserved, acked, (None if boot == "-" else boot)
