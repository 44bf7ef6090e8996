"""Waking a live job page when its session file grows (inotify through watchdog: no polling).

A job's row changes when its state or status does; a transcript grows between those (each
model answer, each tool result), so the job page also wakes when pi appends to the file.
One observer serves the process; each open page adds a watch of its file's directory for
as long as it is open, of content changes only: the page's own read of the file must not
wake it again (roost.host.contentwatch).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from watchdog.observers import Observer

from roost.host.contentwatch import CONTENT_CHANGES, FileChanged


def _waker(loop: asyncio.AbstractEventLoop, flag: asyncio.Event) -> Callable[[], None]:
    def wake() -> None:  # the observer's thread
        with contextlib.suppress(RuntimeError):  # the loop closed: the page is gone
            loop.call_soon_threadsafe(flag.set)

    return wake


class Watcher:
    """The process's one observer, started with the first watch.

    Pages of one folder (two tabs of one job, jobs whose sessions share a folder) share
    one watchdog watch, each with a handler of its own: a closing page removes its handler,
    and the watch goes only with the last one (unscheduling it would leave the other pages
    unwoken)."""

    def __init__(self) -> None:
        self._observer: Any = None
        self._lock = threading.Lock()
        self._users: dict[Any, int] = {}  # a watch -> the open pages using it

    def _started(self) -> Any:
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
        if not path or not directory.is_dir():  # a shell job has no session file
            yield flag
            return
        handler = FileChanged(path, _waker(asyncio.get_running_loop(), flag))
        with self._lock:
            observer = self._started()
            handle = observer.schedule(handler, str(directory), event_filter=CONTENT_CHANGES)
            self._users[handle] = self._users.get(handle, 0) + 1
        try:
            yield flag
        finally:
            with self._lock:
                users = self._users.get(handle, 0) - 1  # none left once stop() ran
                with contextlib.suppress(KeyError, ValueError):
                    if users > 0:
                        self._users[handle] = users
                        observer.remove_handler_for_watch(handler, handle)
                    elif self._users.pop(handle, None) is not None:
                        observer.unschedule(handle)

    def stop(self) -> None:
        with self._lock:
            if self._observer is not None:
                self._observer.stop()
                self._observer = None
                self._users.clear()
