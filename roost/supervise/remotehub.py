"""roostd's remote hub: the TCP listener remote workers reach it through (docs/scale-out.md).

Started by `placement.Placement` when a job first goes to a remote runner. It listens on
loopback, or anywhere under TLS, on a port kept in `$ROOST_HOME/remote-hub.json` so that
the next roostd listens where running remote ends reconnect. Every connection opens with
its job, attempt and the attempt's secret (roost.wire.remote; supervise/attempts.py holds
the current one); anything else is closed unanswered. A `link` connection is then served
by roostd's ordinary connection handler (`linked_job` lets `worker_hello` know it was
proved); a `sync` connection by `SyncSession`: roostd stays the one writer of the job's
files, and carries out the remote worker's acks, session bytes, journal and run note in
the order they arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roost.host import paths
from roost.host.fsutil import atomic_write_json, atomic_write_text
from roost.mailbox.item import name_for
from roost.supervise import attempts, nodegit
from roost.wire import remote as remotewire
from roost.worktrees import checkout as fill
from roost.worktrees import git

if TYPE_CHECKING:
    from roost.job.record import JobRecord
    from roost.mailbox import Mailbox

log = logging.getLogger(__name__)

PUT_NAMES = ("delivery.jsonl", "run.json")
"""The worker's small files the remote end sends whole when they change."""
STREAMS = ("session", "log")
HUB_FILE = "remote-hub.json"

_links: dict[int, str] = {}
"""id(writer) of each proved `link` connection being served -> its job (one roostd a process)."""


def linked_job(writer: asyncio.StreamWriter) -> str | None:
    """The job a `link` connection proved itself for with its attempt's secret (None: the
    connection is no proved link: a unix one, whose worker proves itself by pid)."""
    return _links.get(id(writer))


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RemoteHub:
    def __init__(
        self,
        find: Callable[[str], JobRecord | None],
        mailbox: Callable[[JobRecord], Mailbox],
        serve_link: Handler,
        acked: Callable[[JobRecord], None] = lambda record: None,
        git_remote: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._find = find
        self._mailbox = mailbox
        self._serve_link = serve_link
        self._acked = acked  # items moved to cur/: the job changed (its row's counts, `wait`)
        self._git_remote = git_remote  # a worktree job's worktree is made on its node (nodegit)
        self._server: asyncio.AbstractServer | None = None
        self._sock: socket.socket | None = None
        self._server_task: asyncio.Task[None] | None = None
        self._sessions: set[SyncSession] = set()
        self.address = ""  # host:port, as a node reaches it
        self.cert_pem: str | None = None

    @property
    def started(self) -> bool:
        return self._sock is not None

    def start(self, listen: str, advertise: str | None, tls: dict[str, str] | None) -> None:
        """Listen (at once: connections wait in the backlog until the server runs)."""
        host, port = remotewire.split_addr(listen)
        if tls is None and not remotewire.is_loopback(host):
            raise OSError(f"the remote hub listens on {listen} only with TLS (runner.tls)")
        context = None
        if tls is not None:
            context = remotewire.server_context(tls["cert"], tls["key"])
            self.cert_pem = Path(tls["cert"]).read_text(encoding="ascii")
        sock = _bind(host, port or _kept_port())
        bound = sock.getsockname()[1]
        atomic_write_json(paths.roost_home() / HUB_FILE, {"port": bound})
        self.address = advertise or f"{host}:{bound}"
        self._sock = sock
        self._server_task = asyncio.get_running_loop().create_task(self._start_server(sock, context))
        log.info("remote hub listening on %s:%d (%s)", host, bound, "TLS" if context else "loopback")

    async def _start_server(self, sock: socket.socket, context: Any) -> None:
        self._server = await asyncio.start_server(
            self._serve, sock=sock, ssl=context, limit=remotewire.FRAME_LIMIT
        )

    def close(self) -> None:
        if self._server_task is not None:
            self._server_task.cancel()
        if self._server is not None:
            self._server.close()
        elif self._sock is not None:
            self._sock.close()
        for session in list(self._sessions):
            session.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            first = await asyncio.wait_for(remotewire.read_frame(reader), remotewire.OPEN_TIMEOUT)
        except (OSError, ValueError, TimeoutError, ConnectionError):
            writer.close()
            return
        record = self._proved(first)
        if record is None or first is None:
            writer.close()
            return
        if first.get("remote") == remotewire.LINK:
            _links[id(writer)] = record.id
            try:
                await self._serve_link(reader, writer)
            finally:
                _links.pop(id(writer), None)
            return
        session = SyncSession(record, self._mailbox(record), reader, writer, self._acked, self._git_remote())
        self._sessions.add(session)
        try:
            await session.run()
        finally:
            self._sessions.discard(session)

    def _proved(self, first: dict[str, Any] | None) -> JobRecord | None:
        if first is None or first.get("remote") not in (remotewire.SYNC, remotewire.LINK):
            return None
        record = self._find(str(first.get("job")))
        if record is None:
            return None
        current = attempts.load(record.dir)
        if current is None or not current.proves(first.get("attempt"), first.get("secret")):
            log.warning("job %s: refused a remote connection (not its current attempt's secret)", record.id)
            return None
        return record


def _kept_port() -> int:
    try:
        return int(json.loads((paths.roost_home() / HUB_FILE).read_text())["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for candidate in (port, 0) if port else (0,):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError:
            sock.close()
            if candidate == 0:
                raise
            continue
        sock.listen(64)
        sock.setblocking(False)
        return sock
    raise OSError("unreachable")


class SyncSession:
    """One remote end's files and mailbox, over its `sync` connection."""

    def __init__(
        self,
        record: JobRecord,
        box: Mailbox,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        acked: Callable[[JobRecord], None] = lambda record: None,
        git_remote: str | None = None,
    ) -> None:
        self.record = record
        self.box = box
        self._acked = acked
        self._git_remote = git_remote
        self.reader = reader
        self.writer = writer
        self._pushed: set[int] = set()
        self._wake = asyncio.Event()
        self._dirty_session = False
        self._lock = asyncio.Lock()

    def close(self) -> None:
        self.writer.close()

    def _path(self, name: str) -> Path:
        if name == "session":
            if not self.record.session:
                raise ValueError(f"job {self.record.id} has no session file")
            return Path(self.record.session)
        if name == "log":
            return self.record.dir / "worker.log"
        if name in PUT_NAMES:
            return self.record.dir / name
        raise ValueError(f"no such file: {name!r}")

    async def _send(self, obj: dict[str, Any]) -> None:
        async with self._lock:
            self.writer.write(remotewire.frame(obj))
            await self.writer.drain()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        watcher = self.box.watch(lambda: _wake_from_thread(loop, self._wake))
        pusher = loop.create_task(self._push_loop())
        self._wake.set()  # every pending item, on every connection (the remote end skips what it has)
        try:
            await self._send({"ok": True, "sizes": {name: _size(self._path(name)) for name in STREAMS}})
            while True:
                request = await remotewire.read_frame(self.reader)
                if request is None:
                    return
                try:
                    if request.get("op") in ("kit", "pushed"):  # git may run: in a thread
                        result = await asyncio.to_thread(self._handle, request)
                    else:
                        result = self._handle(request)
                    await self._send({"id": request.get("id"), "ok": True, "result": result})
                except (OSError, ValueError, KeyError, TypeError, git.GitError) as exc:
                    await self._send({"id": request.get("id"), "ok": False, "error": str(exc)})
        except (OSError, ValueError, ConnectionError):
            return
        finally:
            pusher.cancel()
            watcher.close()
            self.writer.close()

    async def _push_loop(self) -> None:
        """Every pending item's bytes, as it arrives (all of them again on a new connection)."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            items = []
            for item in self.box.pending():
                if item.seq in self._pushed:
                    continue
                try:
                    data = (self.box.new_dir / name_for(item.seq)).read_bytes()
                except FileNotFoundError:
                    continue  # acknowledged meanwhile
                items.append({"seq": item.seq, "data": remotewire.encode(data)})
                self._pushed.add(item.seq)
            if items:
                await self._send({"items": items})

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "kit":
            if self.record.worktree:  # its files, here: the node's worker never sees the marker
                fill.finish_pending(self.record.dir, str(self.record.worktree["path"]))
            kit = self._kit()
            if self._git_remote and self.record.worktree:
                kit["git"] = nodegit.offer(self.record, self._git_remote)
            return kit
        if op == "pushed":  # the node pushed the job's branch (its worktree is its own)
            if not self._git_remote:
                raise ValueError("this job's worktree is not made on its node")
            return {"head": nodegit.take(self.record, self._git_remote, str(request["head"]))}
        if op == "read":
            path = self._path(str(request["name"]))
            with open(path, "rb") as handle:
                handle.seek(int(request["offset"]))
                return {"data": remotewire.encode(handle.read(remotewire.CHUNK))}
        if op == "put":
            name = str(request["name"])
            if name not in PUT_NAMES:
                raise ValueError(f"no such file: {name!r}")
            atomic_write_text(self._path(name), remotewire.decode(request["data"]).decode("utf-8"))
            return {}
        if op == "append":
            return {"size": self._append(str(request["name"]), int(request["offset"]), request["data"])}
        if op == "ack":
            if self._dirty_session:  # the entries the ack stands on are durable before it is
                _fsync(self._path("session"))
                self._dirty_session = False
            moved = self.box.ack(int(request["upto"]))
            if moved:
                # The link's `done` may have come first: a waiter (`roost wait`) weighs the job
                # again now that its items are acked, as after a local worker's ack and update.
                self._acked(self.record)
            return {"moved": moved}
        raise ValueError(f"unknown op {op!r}")

    def _kit(self) -> dict[str, Any]:
        files: dict[str, str | None] = {}
        for name in ("job.json", "env.json", *PUT_NAMES):
            try:
                files[name] = remotewire.encode((self.record.dir / name).read_bytes())
            except FileNotFoundError:
                files[name] = None
        return {"dir": str(self.record.dir), "files": files}

    def _append(self, name: str, offset: int, data: Any) -> int:
        if name not in STREAMS:
            raise ValueError(f"no such stream: {name!r}")
        path = self._path(name)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size != offset:
                return size  # not where the remote end thinks: it goes on from here
            chunk = remotewire.decode(data)
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
            if name == "session":
                self._dirty_session = True
            return size + len(chunk)
        finally:
            os.close(fd)


def _wake_from_thread(loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
    loop.call_soon_threadsafe(event.set)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _fsync(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
