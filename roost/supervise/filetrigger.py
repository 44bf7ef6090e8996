"""`FileTriggers`: the watches of `roost schedule add --on-change` (README: Schedules).

One watchdog observer for all of them (started with the first trigger), one recursive
watch per path. Its thread hands each change to the loop (`call_soon_threadsafe`); what a
change means (debounce, firing) is the scheduler's. Only writes count: a file opened or
read is not a change, and is not even reported (the watches ask for `CONTENT_CHANGES`: an
agent reading the watched tree costs roostd nothing). Never a change: anything under a
`.git` folder, and the folders
`ignored(name)` gives (ROOST_HOME, the worktrees of the schedule's own jobs), so a job does
not fire its own trigger by writing where roost keeps it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from watchdog.events import (
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import ObservedWatch

from roost.host.contentwatch import CONTENT_CHANGES

WRITES = (EVENT_TYPE_CREATED, EVENT_TYPE_DELETED, EVENT_TYPE_MODIFIED, EVENT_TYPE_MOVED, EVENT_TYPE_CLOSED)


def counts(path: str, ignored: list[str]) -> bool:
    """Is a change of `path` one a trigger fires on?"""
    if ".git" in path.split(os.sep):
        return False
    return not any(path == top or path.startswith(top.rstrip(os.sep) + os.sep) for top in ignored)


class _Handler(FileSystemEventHandler):
    def __init__(self, triggers: FileTriggers, name: str) -> None:
        self._triggers = triggers
        self._name = name

    def on_any_event(self, event: FileSystemEvent) -> None:  # the observer's thread
        if event.event_type not in WRITES:
            return
        if event.is_directory and event.event_type == EVENT_TYPE_MODIFIED:
            return  # a folder's own entry changed: its child's event says which
        found = [os.fsdecode(p) for p in (event.src_path, event.dest_path) if p]
        self._triggers.loop.call_soon_threadsafe(self._triggers.seen, self._name, found)


class FileTriggers:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        changed: Callable[[str, list[str]], None],
        ignored: Callable[[str], list[str]],
    ) -> None:
        self.loop = loop
        self._changed = changed
        self._ignored = ignored
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.start()
        self._watches: dict[str, list[ObservedWatch]] = {}

    def watch(self, name: str, paths: list[str]) -> None:
        """Watch each of `paths` (recursively) for the trigger `name`; OSError if one
        cannot be watched (then none is)."""
        self.unwatch(name)
        handler = _Handler(self, name)
        made: list[ObservedWatch] = []
        try:
            for path in paths:
                made.append(
                    self._observer.schedule(handler, path, recursive=True, event_filter=CONTENT_CHANGES)
                )
        except BaseException:
            for watch in made:
                self._observer.unschedule(watch)
            raise
        self._watches[name] = made

    def unwatch(self, name: str) -> None:
        for watch in self._watches.pop(name, []):
            self._observer.unschedule(watch)

    def seen(self, name: str, found: list[str]) -> None:
        """On the loop: keep the changes that count and pass them on."""
        if name not in self._watches:
            return
        ignored = self._ignored(name)
        kept = [p for p in found if counts(p, ignored)]
        if kept:
            self._changed(name, kept)

    def close(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=5)
