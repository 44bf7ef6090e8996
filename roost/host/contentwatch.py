"""Changes of a file's content, through watchdog (inotify on Linux): no polling.

A reader that wakes on *any* event of the file it reads wakes itself: opening and reading
a file are events too (inotify's IN_OPEN, IN_ACCESS, IN_CLOSE_NOWRITE; watchdog's
`opened`, `closed_no_write`), so every read schedules the next one and an idle reader spins
(a `roost web` job page kept a core busy that way). Every watch of roost's that reads
what it watches asks for `CONTENT_CHANGES` only, which watchdog turns into the inotify
mask itself: the kernel never reports a read to the watcher.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

CONTENT_CHANGES: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileDeletedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    DirDeletedEvent,
]
"""What changes content: a write (modified, and closed after a write), a file made, moved
or deleted. Never an open or a read."""


class FileChanged(FileSystemEventHandler):
    """Calls `changed()` (on the observer's thread) when `path` itself changes; a watch of
    its folder sees its siblings too, which are not `path`'s changes."""

    def __init__(self, path: str, changed: Callable[[], None]) -> None:
        self.path, self.changed = path, changed

    def on_any_event(self, event: FileSystemEvent) -> None:
        if self.path in (str(event.src_path), str(event.dest_path or "")):
            self.changed()


def wait_for_change(path: Path, timeout: float) -> bool:
    """Block until `path`'s content changes, or `timeout` passes; whether it changed."""
    changed = threading.Event()
    path.parent.mkdir(parents=True, exist_ok=True)
    observer = Observer()
    observer.schedule(FileChanged(str(path), changed.set), str(path.parent), event_filter=CONTENT_CHANGES)
    observer.start()
    try:
        return changed.wait(timeout)
    finally:
        observer.stop()
        observer.join()
