"""`MailboxWatcher`: pending items, then each newly published one, woken by inotify.

The watcher runs watchdog's inotify reader (`InotifyFD`, the thread inside watchdog's
InotifyObserver) with one watch on new/, registered through watchdog's `WatchCallback`
protocol, asking only for arrivals: IN_MOVED_TO (a publish) and IN_CLOSE_WRITE (a file
written there by hand). It skips the Observer's emitter and dispatcher threads: each of
those is another thread hand-off per wake-up, and the emitter holds every IN_MOVED_FROM
(an ack) for 0.5 s to pair it with a move target, delaying all later events.

An event does not say *what* arrived: it only marks the watcher dirty, and the consumer
rescans new/ (a listdir plus a parse of the names it has not seen). So a lost, merged or
reordered event costs nothing as long as some wake-up follows; the one case where none
would, a kernel queue overflow (IN_Q_OVERFLOW, reported to `on_queue_overflow`), forces
a rescan too. There is no polling loop; an idle watcher sleeps in poll(2).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from roost.mailbox.errors import MailboxError
from roost.mailbox.item import Item

if TYPE_CHECKING:
    from roost.mailbox.box import Mailbox

log = logging.getLogger(__name__)

try:
    from watchdog.observers.inotify_c import (
        CallbackId,
        InotifyConstants,
        InotifyEvent,
        InotifyFD,
        Mask,
        WatchDescriptor,
    )
except (ImportError, OSError):  # not Linux
    HAVE_INOTIFY = False
else:
    HAVE_INOTIFY = True


class _Source(Protocol):
    thread: threading.Thread | None

    def stop(self) -> None: ...


class _InotifySource:
    """watchdog's inotify reader thread, watching new/ for the watcher."""

    def __init__(self, path: str, watcher: MailboxWatcher) -> None:
        self._watcher = watcher
        self._fd = InotifyFD()
        self.thread: threading.Thread | None = self._fd
        self._fd.start()
        mask = Mask(
            InotifyConstants.IN_MOVED_TO
            | InotifyConstants.IN_CLOSE_WRITE
            | InotifyConstants.IN_DELETE_SELF
            | InotifyConstants.IN_ONLYDIR
        )
        try:
            self._fd.add_callback(os.fsencode(path), mask, self, CallbackId(id(self)))
        except BaseException:
            self.stop()
            raise

    # watchdog's WatchCallback protocol; called on the reader thread.
    def on_event(self, event: InotifyEvent) -> None:
        if event.is_delete_self:
            self._watcher._gone()
        else:
            self._watcher._changed()

    def on_watch_deleted(self, wd: WatchDescriptor) -> None:
        self._watcher._gone()

    def on_queue_overflow(self) -> None:
        self._watcher._overflowed()

    def stop(self) -> None:
        self._fd.stop()
        if threading.current_thread() is not self._fd and self._fd.is_alive():
            self._fd.join()


class _ObserverSource:
    """Where inotify is missing: watchdog's platform Observer (FSEvents, kqueue, ...)."""

    def __init__(self, path: str, watcher: MailboxWatcher) -> None:
        from watchdog.events import DirDeletedEvent, FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        from roost.host.contentwatch import CONTENT_CHANGES

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                if isinstance(event, DirDeletedEvent) and event.src_path == path:
                    watcher._gone()
                else:
                    watcher._changed()

        self._observer = Observer()
        self.thread: threading.Thread | None = self._observer
        # Content changes only: the watcher's own listing and reading of new/ would wake it.
        self._observer.schedule(Handler(), path, event_filter=CONTENT_CHANGES)
        self._observer.start()

    def stop(self) -> None:
        self._observer.stop()
        if threading.current_thread() is not self._observer and self._observer.is_alive():
            self._observer.join()


class MailboxWatcher:
    """Yields every pending item, then each newly published one, in seq order, never
    the same seq twice. Iterate (blocking), call `next_item(timeout)`, or register
    `on_change(callback)` and call `drain()` from an event loop. Close it (or use it as a
    context manager) to stop the observer.
    """

    def __init__(self, box: Mailbox) -> None:
        self.box = box
        self._cond = threading.Condition()
        self._dirty = True  # the first next_item() scans what is already pending
        self._closed = False
        self._gone_dir = False
        self._consume_lock = threading.Lock()
        self._buffer: collections.deque[Item] = collections.deque()
        self._horizon = 0  # highest seq taken into the buffer
        self._callbacks: list[Callable[[], None]] = []
        self._source: _Source | None = None
        self.overflows = 0
        """How many inotify queue overflows this watcher has recovered from."""

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> MailboxWatcher:
        """Start watching (before the first scan, so nothing slips between them)."""
        if self._source is not None or self._closed:
            return self
        source_class = _InotifySource if HAVE_INOTIFY else _ObserverSource
        try:
            self._source = source_class(str(self.box.new_dir), self)
        except OSError as exc:
            raise MailboxError(f"while starting to watch {self.box.new_dir}: {exc}") from exc
        return self

    def close(self) -> None:
        """Stop watching (and its thread); a blocked `next_item` returns None and
        iteration ends."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        source, self._source = self._source, None
        if source is not None:
            source.stop()

    @property
    def thread(self) -> threading.Thread | None:
        """The thread that reads inotify events (None once closed)."""
        return self._source.thread if self._source is not None else None

    @property
    def closed(self) -> bool:
        """True once closed, or once new/ was removed (the job was removed)."""
        return self._closed

    @property
    def removed(self) -> bool:
        """True when the watcher stopped because new/ was removed."""
        return self._gone_dir

    def __enter__(self) -> MailboxWatcher:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- consuming -------------------------------------------------------------

    def __iter__(self) -> MailboxWatcher:
        return self

    def __next__(self) -> Item:
        item = self.next_item(None)
        if item is None:
            raise StopIteration
        return item

    def next_item(self, timeout: float | None = None) -> Item | None:
        """The next item; blocks up to `timeout` seconds (None: until one arrives or the
        watcher is closed). Returns None on timeout or when closed; timeout=0 never waits.
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._consume_lock:
            while True:
                if self._buffer:
                    return self._buffer.popleft()
                with self._cond:
                    while not self._dirty and not self._closed:
                        if deadline is None:
                            self._cond.wait()
                            continue
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            return None
                        self._cond.wait(remaining)
                    if self._closed:
                        return None
                    # Cleared before the scan: an event during the scan sets it again.
                    self._dirty = False
                try:
                    fresh = self.box.scan_new(after=self._horizon)
                except MailboxError:
                    if not self.box.new_dir.is_dir():
                        self._gone()  # removed; the inotify event may still be on its way
                        return None
                    with self._cond:
                        self._dirty = True  # scan again on the next call
                    raise
                if fresh:
                    self._horizon = fresh[-1].seq
                    self._buffer.extend(fresh)

    def drain(self) -> list[Item]:
        """Every item available right now, without waiting (for event-loop callers)."""
        items = []
        while (item := self.next_item(0)) is not None:
            items.append(item)
        return items

    # -- notification ------------------------------------------------------------

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call `callback()` from the watcher's thread on every change in new/ (and after
        an overflow). It must be quick and thread-safe, e.g.
        `lambda: loop.call_soon_threadsafe(event.set)`."""
        self._callbacks.append(callback)

    def rescan(self) -> None:
        """Force a full rescan at the next `next_item` (what an overflow triggers)."""
        self._changed()

    def _overflowed(self) -> None:
        self.overflows += 1
        log.warning("inotify queue overflowed while watching %s; rescanning", self.box.new_dir)
        self._changed()

    def _gone(self) -> None:
        with self._cond:
            if self._closed:
                return  # our own close() removing the watch
            log.info("%s was removed; the watcher stops", self.box.new_dir)
            self._gone_dir = True
            self._closed = True
            self._cond.notify_all()
        self._notify()

    def _changed(self) -> None:
        with self._cond:
            self._dirty = True
            self._cond.notify_all()
        self._notify()

    def _notify(self) -> None:
        for callback in list(self._callbacks):
            try:
                callback()
            except Exception:
                log.exception("mailbox on_change callback %r failed", callback)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<MailboxWatcher {self.box.new_dir} {state} after seq {self._horizon}>"
