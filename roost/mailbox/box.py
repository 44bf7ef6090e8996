"""`Mailbox`: post, list, acknowledge and watch the items of one mailbox directory."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roost.host.fsutil import fsync, fsync_dir
from roost.mailbox.counter import SeqCounter
from roost.mailbox.errors import InvalidItem, MailboxError, MailboxFull
from roost.mailbox.fileops import (
    NotAnItemFile,
    ensure_private_dir,
    private_entry,
    quarantine,
    read_small_file,
    sweep_stale,
    write_new_file,
)
from roost.mailbox.item import (
    AGENT_KINDS,
    MAX_ITEM_BYTES,
    Item,
    checked_body,
    name_for,
    new_id,
    now_iso,
    render_line,
    seq_of,
)
from roost.mailbox.replays import AckedIds

if TYPE_CHECKING:
    from roost.mailbox.watch import MailboxWatcher

log = logging.getLogger(__name__)

STALE_TMP_SECONDS = 3600.0
"""tmp/ files older than this are leftovers of crashed writers and are swept on open."""
DEFAULT_MAX_REPLIES = 50
DEFAULT_MAX_AGENT = 20
_CACHE_LIMIT = 1024
"""Items post() remembers between listings (a miss only costs reading the file)."""
COUNTS_SETTLED_NS = 2_000_000_000
"""`counts()` reuses a listing of new/ only when new/ had not changed for this long when
it was listed: a change within the same clock tick as the last keeps the folder's mtime
(Linux stamps with a coarse clock), so a recent mtime proves nothing."""


class Mailbox:
    """One mailbox directory: `tmp/`, `new/` (pending), `cur/` (acknowledged), `bad/`.

    Safe to use from several threads and processes at once; every method opens what it
    needs and closes it again, so an idle Mailbox holds no file descriptor.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        max_replies: int = DEFAULT_MAX_REPLIES,
        max_agent: int = DEFAULT_MAX_AGENT,
    ) -> None:
        for label, cap in (("max_replies", max_replies), ("max_agent", max_agent)):
            if type(cap) is not int or cap < 0:
                raise ValueError(f"{label} must be a non-negative int, got {cap!r}")
        self.path = Path(path).absolute()
        self.max_replies = max_replies
        self.max_agent = max_agent
        self.tmp_dir = self.path / "tmp"
        self.new_dir = self.path / "new"
        self.cur_dir = self.path / "cur"
        self.bad_dir = self.path / "bad"
        try:
            for directory in (self.path, self.tmp_dir, self.new_dir, self.cur_dir, self.bad_dir):
                ensure_private_dir(directory)
            swept = sweep_stale(self.tmp_dir, STALE_TMP_SECONDS)
        except OSError as exc:
            raise MailboxError(f"while opening mailbox {self.path}: {exc}") from exc
        if swept:
            log.info("swept %d stale tmp file(s) from %s", swept, self.tmp_dir)
        self._counter = SeqCounter(self.path)
        # Parsed items of new/ by file name. Published files never change, so an entry
        # stays right until its file leaves new/; every listing prunes the rest.
        self._cache: dict[str, Item] = {}
        self._cache_lock = threading.Lock()
        # String forms for the post path, where pathlib's joins show up in profiles.
        self._tmp_prefix = f"{self.tmp_dir}{os.sep}"
        self._new_prefix = f"{self.new_dir}{os.sep}"
        self._new_str = str(self.new_dir)
        self._tmp_str = str(self.tmp_dir)
        self._bound = 0  # highest seq known to have been handed out (grows lazily)
        self._counted: tuple[int, dict[str, int]] | None = None  # (new/'s mtime, counts)
        self._checked = False  # the counter was checked against the disk by this object
        self._acked_ids = AckedIds(self.cur_dir, self._full_id)  # to tell replays

    def __repr__(self) -> str:
        return f"Mailbox({str(self.path)!r})"

    # -- writing ---------------------------------------------------------------

    def post(
        self,
        kind: str,
        text: str,
        sender: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Item:
        """Publish one item durably and return it.

        Raises MailboxFull (nothing written) when the cap for `kind` is reached,
        InvalidItem for a bad kind/text/sender/extra, MailboxError for I/O failures.
        """
        try:
            body = checked_body(kind, text, sender, extra)
        except InvalidItem as exc:
            raise InvalidItem(f"{exc} (mailbox {self.path})") from None
        is_agent = kind in AGENT_KINDS
        limit = self.max_agent if is_agent else self.max_replies
        item_id = new_id()
        with self._counter.locked() as state:
            if not self._checked or state.last < self._bound:
                # First post, or the counter went below a seq this object saw: never
                # trust it above what is on disk (a rolled-back counter repeats seqs).
                self._counter.catch_up(state)
                self._checked = True
            if state.pending_bound() >= limit:
                # Near a cap: count exactly. Posts hold the lock through publishing, so
                # no other poster can slip an item in between this count and ours.
                replies, agent, lowest = self._count_pending(state.last)
                state.tighten(lowest - 1 if lowest else state.last)
                pending = agent if is_agent else replies
                if pending >= limit:
                    raise MailboxFull("agent" if is_agent else "replies", pending, limit, self.path)
            seq = state.allocate()
            name = name_for(seq)
            if any(os.path.lexists(f"{d}{os.sep}{name}") for d in (self._new_str, self.cur_dir)):
                self._counter.catch_up(state)  # behind the disk: take the next free one
                seq = state.allocate()
            self._bound = max(self._bound, seq)
            created = now_iso()
            self._publish(seq, render_line(seq, body, created, item_id))
        # Copies: the caller may reuse and change its dicts; cached items must not change.
        item = Item(seq, kind, None if sender is None else dict(sender), text, created, extra, item_id)
        with self._cache_lock:
            if len(self._cache) < _CACHE_LIMIT:
                self._cache[name_for(seq)] = item
        return item

    def _publish(self, seq: int, data: bytes) -> None:
        name = name_for(seq)
        final = self._new_prefix + name
        if os.path.lexists(final):
            # Only a file dropped into new/ by hand can be there; keep it rather than
            # let the rename below replace it.
            self._quarantine(name, f"seq {seq} was never handed out when this file appeared")
        tmp = f"{name}.{os.getpid()}.{secrets.token_hex(4)}"
        # tmp/ and new/ are opened without following a symlink, and the file is written and
        # renamed relative to those descriptors: a symlink planted as tmp/ or new/ (even
        # after this Mailbox was opened) fails the post instead of writing elsewhere.
        dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        tmp_fd = new_fd = -1
        try:
            tmp_fd = os.open(self._tmp_str, dir_flags)
            new_fd = os.open(self._new_str, dir_flags)
            write_new_file(tmp, data, dir_fd=tmp_fd)
            try:
                os.rename(tmp, name, src_dir_fd=tmp_fd, dst_dir_fd=new_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=tmp_fd)
                raise
        except OSError as exc:
            for fd in (tmp_fd, new_fd):
                if fd >= 0:
                    os.close(fd)
            raise MailboxError(f"while publishing item {seq} to {self.new_dir}: {exc}") from exc
        os.close(tmp_fd)
        try:
            fsync(new_fd)
        except OSError as exc:
            raise MailboxError(
                f"item {seq} is in {self.new_dir} but may not be durable: "
                f"fsync of the directory failed: {exc}"
            ) from exc
        finally:
            os.close(new_fd)

    def ack(self, seq: int) -> int:
        """Acknowledge every pending item with a seq <= `seq` (move new/ -> cur/).

        Returns how many items this call moved; 0 when there was nothing to move
        (acknowledged twice, or below what was already acknowledged).
        """
        if type(seq) is not int or seq < 0:
            raise InvalidItem(f"ack(seq): seq must be a non-negative int, got {seq!r}")
        try:
            names = os.listdir(self.new_dir)
        except OSError as exc:
            raise MailboxError(f"while acknowledging up to {seq} in {self.new_dir}: {exc}") from exc
        due = sorted((found, name) for name in names if (found := seq_of(name)) is not None and found <= seq)
        moved = 0
        with self._cache_lock:
            known = {name: self._cache.get(name) for _found, name in due}
        before = self._acked_ids.stamp() if due else None
        noted: list[tuple[str, int, str | None]] = []
        raced = False
        try:
            for found, name in due:
                try:
                    os.rename(self.new_dir / name, self.cur_dir / name)
                except FileNotFoundError:
                    raced = True
                    continue  # acknowledged by someone else meanwhile
                except OSError as exc:
                    raise MailboxError(
                        f"while acknowledging item {found}: moving it from {self.new_dir} "
                        f"to {self.cur_dir}: {exc}"
                    ) from exc
                moved += 1
                item = known[name]
                if item is None:
                    # Never read here (read or posted items are 0600 already): it may
                    # have come with another mode. Its id is read with cur/ when needed.
                    private_entry(self.cur_dir / name)
                else:
                    noted.append((name, found, item.id))
        finally:
            self._acked_ids.moved(before, noted, 0 < moved == len(noted) and not raced)
            if moved:
                # Once per call, not per item: this is what keeps the round trip cheap.
                try:
                    fsync_dir(self.cur_dir)
                    fsync_dir(self.new_dir)
                except OSError as exc:
                    raise MailboxError(
                        f"while acknowledging up to {seq}: fsync of {self.cur_dir} failed: {exc}"
                    ) from exc
        if moved:
            with self._cache_lock:
                for _found, name in due:
                    self._cache.pop(name, None)
        return moved

    # -- reading ---------------------------------------------------------------

    def pending(self) -> list[Item]:
        """Items in new/, sorted by seq. Unreadable files found there go to bad/."""
        return self.scan_new()

    def acked(self) -> list[Item]:
        """Items in cur/, sorted by seq (unreadable files there are skipped)."""
        try:
            names = os.listdir(self.cur_dir)
        except OSError as exc:
            raise MailboxError(f"while listing {self.cur_dir}: {exc}") from exc
        items = []
        for name in names:
            seq = seq_of(name)
            if seq is None:
                continue
            try:
                items.append(self._read(self.cur_dir, name, seq))
            except (FileNotFoundError, NotAnItemFile, InvalidItem):
                continue
        items.sort(key=lambda item: item.seq)
        return items

    def counts(self) -> dict[str, int]:
        """Pending counts: {"replies": n, "agent": n} (exact, from a listing of new/). A
        listing is reused while new/'s mtime is the one it had, when that mtime was older
        than COUNTS_SETTLED_NS: a `list` of 1,000 idle jobs stats each folder, not lists it."""
        try:
            stamp = os.stat(self._new_str).st_mtime_ns
        except OSError:
            stamp = None  # scan_new says what is wrong
        if stamp is not None and self._counted is not None and self._counted[0] == stamp:
            return dict(self._counted[1])
        replies = agent = 0
        for item in self.scan_new():
            if item.is_agent:
                agent += 1
            else:
                replies += 1
        counts = {"replies": replies, "agent": agent}
        if stamp is not None and time.time_ns() - stamp > COUNTS_SETTLED_NS:
            self._counted = (stamp, dict(counts))  # settled: reused while new/ keeps it
        else:
            self._counted = None
        return counts

    def last_seq(self) -> int:
        """The last seq handed out (0 for a new mailbox)."""
        return self._counter.peek_last()

    def watch(self, on_change: Callable[[], None] | None = None) -> MailboxWatcher:
        """A started MailboxWatcher: an iterator of pending then newly published items
        and a context manager; `on_change` is registered as with `on_change()`."""
        from roost.mailbox.watch import MailboxWatcher

        watcher = MailboxWatcher(self)
        if on_change is not None:
            watcher.on_change(on_change)
        watcher.start()
        return watcher

    def scan_new(self, after: int = 0) -> list[Item]:
        """List new/ and return the valid items with seq > `after`, sorted by seq.

        Files that cannot be items, and replays (an item already acknowledged, or one
        that repeats the id of another kept item: docs/reference/mailbox.md), are moved to bad/ with
        a `.why`. Names with a seq <= `after` that were never parsed are left alone (the
        watcher has moved past them).
        """
        try:
            names = os.listdir(self.new_dir)
        except OSError as exc:
            raise MailboxError(f"while scanning {self.new_dir}: {exc}") from exc
        with self._cache_lock:
            known = dict(self._cache)
        items: list[Item] = []
        present: dict[str, Item] = {}
        unread: list[tuple[int, str]] = []
        for name in names:
            seq = seq_of(name)
            if seq is None:
                self._quarantine(name, "file name is not a 12-digit seq followed by .json")
                continue
            item = known.get(name)
            if item is None:
                if seq > after:
                    unread.append((seq, name))
                continue
            present[name] = item
            if seq > after:
                items.append(item)
        # Items read before keep their ids; new ones are read in seq order, so of two
        # copies read together the lower seq is kept.
        pending_ids = {item.id: item.seq for item in present.values() if item.id is not None}
        for seq, name in sorted(unread):
            if seq > self._bound:
                self._bound = self._counter.published_bound()
                if seq > self._bound:
                    # Above the counter: the counter is behind the disk (rolled
                    # back), never the item: lift it so no later post repeats it.
                    self._bound = self._counter.caught_up_bound()
            try:
                item = self._read(self.new_dir, name, seq)
            except FileNotFoundError:
                continue  # acknowledged meanwhile
            except (NotAnItemFile, InvalidItem) as exc:
                self._quarantine(name, str(exc))
                continue
            replayed = self._replays(name, item, pending_ids)
            if replayed is not None:
                self._quarantine(name, replayed)
                continue
            if item.id is not None:
                pending_ids[item.id] = seq
            present[name] = item
            items.append(item)
        with self._cache_lock:
            self._cache = {name: item for name, item in self._cache.items() if name in present}
            self._cache.update(present)
        items.sort(key=lambda item: item.seq)
        return items

    def _replays(self, name: str, item: Item, pending_ids: dict[str, int]) -> str | None:
        """Why the item just read from new/`name` is a replay of an item this mailbox
        already holds (the `.why` of its quarantine), or None (docs/reference/mailbox.md)."""
        if os.path.lexists(f"{self.cur_dir}{os.sep}{name}"):
            # An ack moves an item by rename, and a post never takes a name cur/ has:
            # an item can be in new/ and cur/ at once only as a copy.
            return f"replay: item {item.seq} was already acknowledged (cur/{name} exists)"
        if item.id is None:
            return None
        twin = pending_ids.get(item.id)
        if twin is not None and twin != item.seq:
            return f"replay: it repeats pending item {twin} (same id {item.id})"
        twin = self._acked_ids.get(item.id)
        if twin is not None:
            return f"replay: it repeats acknowledged item {twin} (same id {item.id})"
        return None

    # -- internals ---------------------------------------------------------------

    def _count_pending(self, last: int) -> tuple[int, int, int]:
        """(pending replies, pending agent items, lowest pending seq or 0), exact.

        Called under the lock; unreadable files are skipped here and quarantined by
        the next scan.
        """
        try:
            names = os.listdir(self.new_dir)
        except OSError as exc:
            raise MailboxError(f"while counting pending items in {self.new_dir}: {exc}") from exc
        with self._cache_lock:
            listed = set(names)
            known = {n: i for n, i in self._cache.items() if n in listed}
            self._cache = dict(known)
        replies = agent = lowest = 0
        for name in names:
            seq = seq_of(name)
            if seq is None:
                continue
            item = known.get(name)
            if item is None:
                try:
                    item = self._read(self.new_dir, name, seq)
                except (FileNotFoundError, NotAnItemFile, InvalidItem):
                    continue
                with self._cache_lock:
                    self._cache[name] = item
            if item.is_agent:
                agent += 1
            else:
                replies += 1
            if seq <= last and (lowest == 0 or seq < lowest):
                lowest = seq
        return replies, agent, lowest

    def _full_id(self, name: str, seq: int) -> str | None:
        try:
            return self._read(self.cur_dir, name, seq).id
        except (OSError, NotAnItemFile, InvalidItem):
            return None

    def _read(self, directory: Path, name: str, seq: int) -> Item:
        data = read_small_file(f"{directory}{os.sep}{name}", MAX_ITEM_BYTES)
        return Item.from_json(data, expect_seq=seq)

    def _quarantine(self, name: str, reason: str) -> None:
        try:
            moved = quarantine(self.new_dir, self.bad_dir, name, reason)
        except OSError as exc:
            log.warning("could not move %s to %s: %s", self.new_dir / name, self.bad_dir, exc)
            return
        if moved:
            log.warning("moved unreadable %s to %s: %s", self.new_dir / name, self.bad_dir, reason)
        with self._cache_lock:
            self._cache.pop(name, None)
