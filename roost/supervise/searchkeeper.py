"""roostd's search index writer (`SearchKeeper`, built by `Daemon.__init__`): the one writer
of `$ROOST_HOME/search.db` (roost.search.indexdb), on its own thread.

It learns of new session entries from a content watch (roost.host.contentwatch: writes only,
never reads) of each live job's session file, and of everything else from the daemon's
job changes; it never polls. Each source is read from its committed offset to its last
complete line, and the rows and the new offset are committed together, so a SIGKILL at any
point loses or repeats nothing: on start every job's file is caught up from its offset.
A removed job's entries are kept (`roost search --all`); its last unread lines are read
before `roost rm` deletes its folder.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from roost.host import paths
from roost.host.contentwatch import CONTENT_CHANGES
from roost.job.record import JobRecord
from roost.job.states import JobState
from roost.search import entryscan, indexdb
from roost.search.entryscan import Row
from roost.supervise.base import JobTable

log = logging.getLogger(__name__)
CHUNK = 1024 * 1024  # a batch: ~30 ms of work at most
QUIET = frozenset(
    {
        JobState.DONE,
        JobState.FAILED,
        JobState.STOPPED,
        JobState.REAPED,
        JobState.WAITING,
        JobState.NEEDS_INPUT,
    }
)
"""No pi writes its session in these unless something starts it (a job change first) or a
foreground pi holds it (attached: watched too)."""
NICE = 10
"""The writer thread's niceness: jobs' workers and pis, and roostd's loop, go first."""
YIELD = 1.0
"""After a batch, the writer sleeps this many times what the batch took: indexing from
scratch holds the interpreter half the time at most, and roostd's loop (the jobs'
deliveries) waits little for it. A live job's few new lines take a millisecond: their sleep is none."""


class _Dir(FileSystemEventHandler):
    def __init__(self, keeper: SearchKeeper) -> None:
        self.keeper = keeper
        self.files: dict[str, str] = {}  # a session file of this folder -> its job

    def on_any_event(self, event: FileSystemEvent) -> None:
        for path in (str(event.src_path), str(event.dest_path or "")):
            job = self.files.get(path)
            if job is not None:
                self.keeper.enqueue(("file", job, path))


class SearchKeeper:
    def __init__(self, core: JobTable) -> None:
        self.core = core
        self.path = indexdb.db_path(paths.roost_home())
        self._tasks: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
        self._pending: set[tuple[Any, ...]] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._observer: Any = None
        self._dirs: dict[str, tuple[Any, _Dir]] = {}
        self._known: dict[str, tuple[Any, ...]] = {}  # job id -> what the index has of it
        self._offsets: dict[str, int] = {}  # a file's committed offset (for rm's last read)

    # -- on the loop ------------------------------------------------------------------------
    def start(self) -> None:
        conn = indexdb.connect(self.path)
        conn.close()
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.start()
        self._thread = threading.Thread(target=self._work, name="search-index", daemon=True)
        self._thread.start()
        for record in list(self.core.jobs.values()):
            self.changed(record)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._observer.stop()
        self._tasks.put(None)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def enqueue(self, task: tuple[Any, ...]) -> None:
        with self._lock:
            if task in self._pending:
                return
            self._pending.add(task)
        self._tasks.put(task)

    def changed(self, record: JobRecord) -> None:
        """A job changed: what the index keeps of it, its watch, its file and result."""
        if self._thread is None or record.id not in self.core.jobs:
            return
        meta = (record.name, record.cwd, record.session, record.links.parent_peer)
        result = None if record.result is None else json.dumps(record.result, sort_keys=True)
        if self._known.get(record.id) != (*meta, result):
            self._known[record.id] = (*meta, result)
            self.enqueue(("job", record.id, *meta, 0))
            if result is not None:
                self._tasks.put(("result", record.id, result))
        if record.session:
            self._watch(record.id, record.session, record.state not in QUIET or record.attached)
            self.enqueue(("file", record.id, record.session))

    def removed(self, record: JobRecord) -> None:
        """`roost rm`, before the job's folder goes: its unread lines read now, its entries
        kept, the job marked removed."""
        if self._thread is None:
            return
        if record.session:
            self._watch(record.id, record.session, False)
            start = self._offsets.get(record.session, 0)
            with contextlib.suppress(OSError), open(record.session, "rb") as handle:
                handle.seek(start)
                self._tasks.put(("tail", record.id, record.session, start, handle.read()))
        self._known.pop(record.id, None)
        meta = (record.name, record.cwd, record.session, record.links.parent_peer)
        self._tasks.put(("job", record.id, *meta, 1))

    async def reindex(self) -> dict[str, Any]:
        done: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self._tasks.put(("reindex", done))
        return await asyncio.wrap_future(done)

    def _watch(self, job: str, session: str, live: bool) -> None:
        folder = os.path.dirname(session)
        watched = self._dirs.get(folder)
        if live and watched is None and os.path.isdir(folder):
            handler = _Dir(self)
            try:
                watch = self._observer.schedule(handler, folder, event_filter=CONTENT_CHANGES)
            except OSError as exc:
                log.warning("search: cannot watch %s: %s", folder, exc)
                return
            watched = self._dirs[folder] = (watch, handler)
        if watched is None:
            return
        if live:
            watched[1].files[session] = job
        else:
            watched[1].files.pop(session, None)
            if not watched[1].files:
                del self._dirs[folder]
                with contextlib.suppress(Exception):
                    self._observer.unschedule(watched[0])

    # -- on the writer's thread -------------------------------------------------------------
    def _work(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # Linux: a thread has its own nice
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        conn = indexdb.connect(self.path)
        try:
            while (task := self._tasks.get()) is not None:
                with self._lock:
                    self._pending.discard(task)
                try:
                    self._do(conn, task)
                except Exception:
                    log.exception("search: indexing %s failed", task[:3])
        finally:
            conn.close()

    def _do(self, conn: Any, task: tuple[Any, ...]) -> None:
        kind = task[0]
        if kind == "file":
            self._index_file(conn, task[1], task[2])
        elif kind == "tail":
            _, job, path, start, data = task
            offset, inode, asked = indexdb.source_state(conn, path)
            if offset >= start:
                data, start = data[offset - start :], offset
                found = entryscan.scan(data, start, asked)
                indexdb.commit_batch(conn, path, job, found.rows, found.end, inode or 0, found.asked)
        elif kind == "job":
            _, job, name, cwd, session, parent, removed = task
            indexdb.note_job(
                conn,
                {
                    "id": job,
                    "name": name,
                    "cwd": cwd,
                    "session": session,
                    "parent": parent,
                    "removed": removed,
                },
            )
        elif kind == "result":
            _, job, text = task
            row = Row("result", text[: entryscan.TEXT_MAX], time.time(), "", 0)
            indexdb.commit_batch(conn, f"result:{job}", job, [row], 0, None, False, replace=True)
        elif kind == "reindex":
            self._reindex(conn, task[1])

    def _index_file(self, conn: Any, job: str, path: str) -> int:
        """Read `path` from its committed offset; the rows committed."""
        offset, inode, asked = indexdb.source_state(conn, path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return 0
        count = 0
        with open(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            replace = inode is not None and (st.st_ino != inode or st.st_size < offset)
            if replace:
                offset, asked = 0, False
            while st.st_size > offset or replace:
                read_at = time.monotonic()
                handle.seek(offset)
                data, size = handle.read(CHUNK), CHUNK
                while data and b"\n" not in data and len(data) == size:  # one huge line
                    handle.seek(offset)
                    size *= 2
                    data = handle.read(size)
                found = entryscan.scan(data, offset, asked)
                if found.end == offset and not replace:
                    break  # a line still being written
                if not indexdb.commit_batch(
                    conn,
                    path,
                    job,
                    found.rows,
                    found.end,
                    st.st_ino,
                    found.asked,
                    replace=replace,
                    start=offset,
                ):
                    break
                count += len(found.rows)
                time.sleep((time.monotonic() - read_at) * YIELD)
                offset, asked, replace = found.end, found.asked, False
                self._offsets[path] = offset
                if len(data) < CHUNK:
                    break
        return count

    def _reindex(self, conn: Any, done: concurrent.futures.Future[dict[str, Any]]) -> None:
        began = time.monotonic()
        try:
            jobs = indexdb.job_table(conn)
            removed = {job["id"] for job in jobs if job["removed"]}
            indexdb.forget_existing(conn, removed)
            self._offsets.clear()
            count = 0
            for job in jobs:
                if not job["removed"] and job["session"]:
                    count += self._index_file(conn, job["id"], job["session"])
            for record in list(self.core.jobs.values()):
                if record.result is not None:
                    self._do(conn, ("result", record.id, json.dumps(record.result, sort_keys=True)))
                    count += 1
            done.set_result(
                {
                    "entries": count,
                    "jobs": len(jobs) - len(removed),
                    "removedKept": len(removed),
                    "seconds": round(time.monotonic() - began, 3),
                }
            )
        except Exception as exc:
            done.set_exception(exc)


def search(path: Path, **query: Any) -> list[dict[str, Any]]:
    """A query on its own read connection (WAL: never blocked by the writer)."""
    conn = indexdb.connect(path, readonly=True)
    try:
        return indexdb.search(conn, **query)
    finally:
        conn.close()


def job_table(path: Path) -> list[dict[str, Any]]:
    conn = indexdb.connect(path, readonly=True)
    try:
        return indexdb.job_table(conn)
    finally:
        conn.close()
