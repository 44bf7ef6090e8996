"""`python -m roost.worker.remote`: a job's worker on another machine (a Ray job's entrypoint).

It is the transport, not a second worker (docs/scale-out.md). It reaches roostd's hub
(roost.wire.remote: host:port, the attempt's secret, roostd's certificate), builds a private
mirror of the job's files in a temporary folder (`job.json`, `env.json`, the delivery
journal, the run note, the session file, the pending mailbox items), and runs the ordinary
worker (`python -m roost.worker JOB`, with ROOST_HOME the mirror's) against it. Then:

- roostd pushes each mailbox item as it arrives: its bytes become the mirror's `new/` file;
- the mirror's `roostd.sock` is relayed to roostd (a `link` connection per connection), so
  the worker's own protocol goes through unchanged;
- whenever the mirror's files change, it sends, in this order, on one connection: the
  journal and the run note (whole), the session's and `worker.log`'s new bytes (by
  offset), and the highest seq the worker moved to `cur/` as an ack. roostd carries them
  out in that order, so an item is acked only once its entry is in roostd's session copy.

A lost connection (roostd restarted) is opened again with a growing delay while the worker
and pi run on; the streams resume at the sizes roostd has. SIGTERM (`ray job stop`) kills
the worker's process group (its pi too) and sends what is left: roostd restarts the job,
unless it asked for the stop itself (then over the link, and the worker stops cleanly).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from roost.host import procid
from roost.mailbox.item import name_for, seq_of
from roost.tasks import first_of
from roost.wire import remote as remotewire
from roost.worker import remotegit

log = logging.getLogger("roost.worker.remote")

RECONNECT_MAX_DELAY = 1.0
FINAL_SYNC_TIMEOUT = 30.0
PUT_NAMES = ("delivery.jsonl", "run.json")
OWNER = "owner.json"
"""In a mirror: the remote end that made it (pid, start time), for `sweep`."""


class Refused(Exception):
    """roostd closed the opening: not the job's current attempt (or its secret)."""


class RemoteEnd:
    def __init__(
        self, addr: str, cert: str | None, job: str, attempt: int, secret: str, mirror: Path
    ) -> None:
        self.addr = addr
        self.cert = cert
        self.job = job
        self.attempt = attempt
        self.secret = secret
        self.home = mirror / "home"
        self.job_dir = self.home / "jobs" / job
        self.box_dir = self.job_dir / "mailbox"
        self.session = self.job_dir / "session.jsonl"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._connected = asyncio.Event()
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = 0
        self._wake = asyncio.Event()
        self._sent = {"session": 0, "log": 0}
        self._log_base = 0  # roostd's worker.log size when this attempt began
        self._put: dict[str, bytes | None] = {}
        self._acked = 0
        self._sizes: dict[str, int] = {}
        self.worker: subprocess.Popen[bytes] | None = None
        self.refused: Refused | None = None
        self._early: list[dict[str, Any]] | None = []  # items pushed before the mirror was made
        self._gave_up = asyncio.Event()
        # A worktree made here from the repository's remote (roost.worker.remotegit): the
        # clone, its branch, the mark of its HEAD's log and the HEAD roostd last took.
        self._tree: Path | None = None
        self._branch = ""
        self._mark: tuple[int, int] | None = None
        self._head = ""

    # -- the sync connection -------------------------------------------------------------
    async def _open(self) -> None:
        first = remotewire.opening(remotewire.SYNC, self.job, self.attempt, self.secret)
        reader, writer = await remotewire.connect(self.addr, self.cert, first)
        answer = await asyncio.wait_for(remotewire.read_frame(reader), remotewire.OPEN_TIMEOUT)
        if answer is None or not answer.get("ok"):
            writer.close()
            raise Refused(f"roostd refused job {self.job} attempt {self.attempt}")
        self._sizes = {str(k): int(v) for k, v in (answer.get("sizes") or {}).items()}
        self._reader, self._writer = reader, writer
        self._connected.set()

    async def _read(self) -> None:
        assert self._reader is not None
        try:
            while True:
                frame = await remotewire.read_frame(self._reader)
                if frame is None:
                    return
                if "items" in frame:  # roostd's push (roost.wire.remote's, not its protocol's events)
                    self._store_items(frame["items"] or [])
                    continue
                future = self._pending.pop(frame.get("id"), None)  # type: ignore[arg-type]
                if future is not None and not future.done():
                    future.set_result(frame)
        except (OSError, ValueError, ConnectionError):
            return
        finally:
            self._connected.clear()
            if self._writer is not None:
                self._writer.close()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("roostd went away"))
            self._pending.clear()

    async def _call(self, op: str, **args: Any) -> dict[str, Any]:
        if not self._connected.is_set() or self._writer is None:
            raise ConnectionError("not connected to roostd")
        self._ids += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._ids] = future
        self._writer.write(remotewire.frame({"id": self._ids, "op": op, **args}))
        await self._writer.drain()
        answer = await future
        if not answer.get("ok"):
            raise RuntimeError(f"roostd refused {op}: {answer.get('error')}")
        return answer.get("result") or {}

    async def _keep_connected(self) -> None:
        """Read the connection; open it again (growing delay) whenever it is lost."""
        delay = 0.02
        while True:
            if not self._connected.is_set():
                try:
                    await self._open()
                except Refused as exc:  # a later attempt replaced this one: it must not act
                    self.refused = exc
                    self.kill_worker()
                    self._gave_up.set()
                    return
                except (OSError, TimeoutError, ConnectionError, ValueError) as exc:
                    log.debug("roostd not reachable: %s", exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RECONNECT_MAX_DELAY)
                    continue
                delay = 0.02
                self._resume()
            await self._read()

    def _resume(self) -> None:
        """After a (re)connection: the streams go on from roostd's sizes, the small files
        and the ack are sent again."""
        self._sent["session"] = self._sizes.get("session", 0)
        self._sent["log"] = max(0, self._sizes.get("log", 0) - self._log_base)
        self._put.clear()
        self._acked = 0
        self._wake.set()

    # -- the mirror ------------------------------------------------------------------------
    async def build(self) -> None:
        """The job's files as roostd has them, in the mirror (0700, its files 0600)."""
        kit = await self._call("kit")
        files = kit["files"]
        os.makedirs(self.box_dir, mode=0o700, exist_ok=True)
        for sub in ("tmp", "new", "cur", "bad"):
            os.makedirs(self.box_dir / sub, mode=0o700, exist_ok=True)
        job = json.loads(remotewire.decode(files["job.json"]))
        job["session"] = str(self.session)  # the mirror's copy: roostd keeps the canonical one
        if kit.get("git"):  # its worktree is made here, from the repository's remote
            tree, cwd = await asyncio.to_thread(remotegit.clone, kit["git"], self.home.parent)
            self._tree, self._branch = tree, str(kit["git"]["branch"])
            self._mark = remotegit.mark(tree)
            self._head = await asyncio.to_thread(remotegit.head, tree)
            job["cwd"] = str(cwd)
            job["worktree"] = {**(job.get("worktree") or {}), "path": str(tree)}
        _write(self.job_dir / "job.json", json.dumps(job).encode())
        for name in ("env.json", *PUT_NAMES):
            if files.get(name) is not None:
                data = remotewire.decode(files[name])
                _write(self.job_dir / name, data)
                if name in PUT_NAMES:
                    self._put[name] = data
        with open(self.session, "wb") as out:  # made 0600 by the umask
            offset = 0
            while offset < self._sizes.get("session", 0):
                chunk = remotewire.decode((await self._call("read", name="session", offset=offset))["data"])
                if not chunk:
                    break
                out.write(chunk)
                offset += len(chunk)
        self._sent["session"] = offset
        self._log_base = self._sizes.get("log", 0)
        self._sent["log"] = 0
        early, self._early = self._early or [], None
        self._store_items(early)

    def _store_items(self, items: list[dict[str, Any]]) -> None:
        """Pushed items into the mirror's new/ (one seen before, in new/ or cur/, is skipped)."""
        if self._early is not None:
            self._early.extend(items)
            return
        for entry in items:
            try:
                seq = int(entry["seq"])
                data = remotewire.decode(entry["data"])
            except (KeyError, TypeError, ValueError):
                continue
            name = name_for(seq)
            if (self.box_dir / "new" / name).exists() or (self.box_dir / "cur" / name).exists():
                continue
            tmp = self.box_dir / "tmp" / f"{name}.remote"
            _write(tmp, data, durable=False)  # roostd's copy is the durable one
            os.rename(tmp, self.box_dir / "new" / name)

    # -- sending up --------------------------------------------------------------------------
    async def _sync_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.sync_once()
            except (ConnectionError, OSError, RuntimeError) as exc:
                log.debug("sync paused: %s", exc)
                await self._connected.wait()

    async def sync_once(self) -> None:
        """The journal and run note, then the session's and the log's new bytes, then the
        ack: in that order, each answered before the next is sent."""
        for name in PUT_NAMES:
            try:
                data: bytes | None = (self.job_dir / name).read_bytes()
            except FileNotFoundError:
                data = None
            if data is not None and data != self._put.get(name):
                await self._call("put", name=name, data=remotewire.encode(data))
                self._put[name] = data
        await self._push_commits()
        await self._stream("session", self.session, 0)
        await self._stream("log", self.job_dir / "worker.log", self._log_base)
        acked = max((seq_of(n) or 0 for n in os.listdir(self.box_dir / "cur")), default=0)
        if acked > self._acked:
            await self._call("ack", upto=acked)
            self._acked = acked

    async def _push_commits(self) -> None:
        """The job committed in its worktree here: its branch goes back, roostd takes it."""
        tree = self._tree
        if tree is None or remotegit.mark(tree) == self._mark:
            return
        self._mark = remotegit.mark(tree)
        head = await asyncio.to_thread(remotegit.head, tree)
        if head == self._head:
            return
        try:
            await asyncio.to_thread(remotegit.push, tree, self._branch)
        except remotegit.GitError as exc:  # its branch stays here; the next commit tries again
            log.error("%s", exc)
            return
        try:
            await self._call("pushed", head=head)
        except RuntimeError as exc:  # roostd could not take it: never held up the session's stream
            log.error("%s", exc)
        self._head = head

    async def _stream(self, name: str, path: Path, base: int) -> None:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return
        while self._sent[name] < size:
            with open(path, "rb") as handle:
                handle.seek(self._sent[name])
                chunk = handle.read(remotewire.CHUNK)
            if not chunk:
                return
            offset = base + self._sent[name]
            got = int(
                (await self._call("append", name=name, offset=offset, data=remotewire.encode(chunk)))["size"]
            )
            if got == offset + len(chunk):
                self._sent[name] += len(chunk)
            elif got - base > size:
                raise RuntimeError(f"roostd's {name} is longer than this worker's copy")
            else:
                self._sent[name] = got - base  # roostd had more (a resent chunk): go on from there

    # -- the relay of the worker's own connection -----------------------------------------
    async def _relay(self, local_reader: asyncio.StreamReader, local_writer: asyncio.StreamWriter) -> None:
        first = remotewire.opening(remotewire.LINK, self.job, self.attempt, self.secret)
        try:
            reader, writer = await remotewire.connect(self.addr, self.cert, first)
        except (OSError, TimeoutError, ConnectionError):
            local_writer.close()  # the worker's link tries again, as when roostd is away
            return
        await _pipe_both(local_reader, local_writer, reader, writer)

    # -- the worker ---------------------------------------------------------------------------
    def start_worker(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, "ROOST_HOME": str(self.home)}
        parent = os.getpid()
        with open(self.job_dir / "worker.log", "ab") as log_file:
            # It dies with this process, SIGKILLed as a crashed worker (never a clean stop,
            # which would end its run as stopped by the user): no worker or pi of a lost
            # attempt runs on beside the next one, and the next continues the cut-short run.
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "roost.worker", self.job],
                preexec_fn=lambda: _killed_with(parent),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=str(self.job_dir),
                start_new_session=True,  # its pi in its group: killed together
            )
        return self.worker

    def kill_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.worker.pid, signal.SIGKILL)

    async def run(self) -> int:
        keeper = asyncio.create_task(self._keep_connected())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(first_of(self._connected.wait(), self._gave_up.wait()), 60)
        if not self._connected.is_set():
            keeper.cancel()
            log.error("%s", self.refused or f"roostd's hub at {self.addr} could not be reached")
            return 1
        await self.build()
        server = await asyncio.start_unix_server(self._relay, path=str(self.home / "roostd.sock"))
        os.chmod(self.home / "roostd.sock", 0o600)
        worker = self.start_worker()  # before the watch's thread: preexec_fn runs in a fork
        watch = _watch(self.job_dir, self._wake)
        syncer = asyncio.create_task(self._sync_loop())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.kill_worker)
        code = await asyncio.to_thread(worker.wait)
        syncer.cancel()
        try:
            await asyncio.wait_for(self._final_sync(), FINAL_SYNC_TIMEOUT)
        except (TimeoutError, ConnectionError, OSError, RuntimeError) as exc:
            log.error("could not send the last of the job's files to roostd: %s", exc)
        watch.stop()
        server.close()
        keeper.cancel()
        return code if code >= 0 else 128 - code

    async def _final_sync(self) -> None:
        while True:
            await self._connected.wait()
            try:
                await self.sync_once()
                return
            except (ConnectionError, OSError):
                await asyncio.sleep(0.1)


async def _pipe_both(
    a_reader: asyncio.StreamReader,
    a_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
) -> None:
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            writer.close()

    await asyncio.gather(pipe(a_reader, b_writer), pipe(b_reader, a_writer))


def _killed_with(parent: int) -> None:
    """In the worker's child before its exec: SIGKILL when this process dies."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # this process died before the signal was set
        os._exit(1)


def _write(path: Path, data: bytes, durable: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())


class _Watch:
    def __init__(self, observer: Any) -> None:
        self._observer = observer

    def stop(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=5)


def _watch(folder: Path, wake: asyncio.Event) -> _Watch:
    """Wake the sync loop on every change under the mirror's job folder (inotify)."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    loop = asyncio.get_running_loop()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if event.event_type not in ("opened", "closed_no_write"):
                loop.call_soon_threadsafe(wake.set)

    observer = Observer()
    observer.schedule(Handler(), str(folder), recursive=True)
    observer.start()
    return _Watch(observer)


def sweep(base: Path) -> None:
    """Remove the mirrors this user's remote ends left when they were SIGKILLed (the one
    exit that cannot clean up): each names its maker (pid, start time, pid namespace), and a
    mirror whose maker is gone is; one made in another pid namespace (another container
    sharing the folder) is left alone, its maker's pid meaning nothing here."""
    for entry in base.glob("rr*"):
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            owner = json.loads((entry / OWNER).read_text())
        except (OSError, ValueError):
            continue  # not a mirror, or one being made
        if not isinstance(owner, dict) or owner.get("pidns") != _pid_namespace():
            continue  # made where its maker's pid means another process (or none): not ours to say
        if not procid.same_process(owner.get("pid"), owner.get("start")):
            shutil.rmtree(entry, ignore_errors=True)
            log.info("removed %s (its remote end is gone)", entry)


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def main() -> int:
    logging.basicConfig(
        level=os.environ.get("ROOST_LOG_LEVEL", "INFO"),
        format="%(asctime)s remote[%(process)d] %(levelname)s %(message)s",
    )
    os.umask(0o077)
    secret = os.environ.pop(remotewire.SECRET_VAR, "")
    cert = os.environ.pop(remotewire.CERT_VAR, None)
    addr = os.environ.pop(remotewire.ADDR_VAR, "")
    job = os.environ.pop(remotewire.JOB_VAR, "")
    attempt = os.environ.pop(remotewire.ATTEMPT_VAR, "0")
    base = os.environ.pop(remotewire.DIR_VAR, None) or tempfile.gettempdir()
    if not (secret and addr and job and attempt.isdigit()):
        log.error("started without its job (the %s variables)", remotewire.ADDR_VAR)
        return 2
    sweep(Path(base))
    mirror = Path(tempfile.mkdtemp(prefix="rr", dir=base))  # short: ext.sock lives under it
    owner = {"pid": os.getpid(), "start": procid.start_time(os.getpid()), "pidns": _pid_namespace()}
    _write(mirror / OWNER, json.dumps(owner).encode(), durable=False)
    end = RemoteEnd(addr, cert, job, int(attempt), secret, mirror)
    try:
        return asyncio.run(end.run())
    except Refused as exc:
        log.error("%s", exc)
        return 1
    finally:
        end.kill_worker()
        shutil.rmtree(mirror, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
