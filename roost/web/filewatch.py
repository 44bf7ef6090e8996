"""Waking a live job page when its session file grows (inotify through watchdog: no polling).

A job's row changes when its state or status does; a transcript grows between those (each
model answer, each tool result), so the job page also wakes when pi appends to the file.
One observer serves the process; each open page adds a watch of its file's directory for
as long as it is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer


class _Waker(FileSystemEventHandler):
    def __init__(self, path: str, loop: asyncio.AbstractEventLoop, flag: asyncio.Event) -> None:
        self.path, self.loop, self.flag = path, loop, flag

    def on_any_event(self, event: Any) -> None:
        if self.path in (str(event.src_path), str(getattr(event, "dest_path", ""))):
            with contextlib.suppress(RuntimeError):  # the loop closed: the page is gone
                self.loop.call_soon_threadsafe(self.flag.set)


class Watcher:
    """The process's one observer, started with the first watch."""

    def __init__(self) -> None:
        self._observer: Any = None
        self._lock = threading.Lock()

    def _started(self) -> Any:
        with self._lock:
            if self._observer is None:
                self._observer = Observer()
                self._observer.daemon = True
                self._observer.start()
            return self._observer

    @contextlib.contextmanager
    def watch(self, path: str) -> Iterator[asyncio.Event]:
        """An event set whenever `path` changes, while the block runs (clear it to wait again)."""
        flag = asyncio.Event()
        directory = Path(path).parent
        if not directory.is_dir():
            yield flag
            return
        observer = self._started()
        handle = observer.schedule(_Waker(path, asyncio.get_running_loop(), flag), str(directory))
        try:
            yield flag
        finally:
            with contextlib.suppress(KeyError, ValueError):
                observer.unschedule(handle)

    def stop(self) -> None:
        with self._lock:
            if self._observer is not None:
                self._observer.stop()
                self._observer = None
