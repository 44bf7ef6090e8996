"""A pi worker started before its job: `LocalRunner`'s spare, so that `roost run` takes a
worker whose interpreter is up and whose modules are imported, and its pi starts at once.

The spare is `python -m roost.worker --standby` (roost.worker.standby), started like any
worker (its own process session, roostd's environment) with one end of a socket pair.
It says `ready` once its imports are done and then blocks on the socket; roostd watches the
socket (readable: `ready`, or its end) instead of polling. Taking it for a job follows the
`Launched` contract: roostd saves its pid and start time, then `go()` sends the job (id,
directory, environment) with the job's worker.log as a passed descriptor (opened by roostd
as for any worker: never through a symlink). A spare serves one job; the next one starts
once the pi workers started since are up (their jobs left `starting`: `worker_up`), or
REFILL_SECONDS after the last worker's start (or roostd's own) at the latest: not while
their pis boot on the same cores, and not seconds after a pi that boots in a third of one.
roostd's shutdown (or death) closes the socket and the spare exits having done nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable

from roost.host import procid
from roost.locks import joblock

log = logging.getLogger(__name__)

REFILL_SECONDS = 2.0
"""A spare starts this long after roostd's start and after the last worker's start at the
latest (a pi boots in 0.3-1.5 s): not while a job's worker and pi start on the same cores."""
UP_GRACE_SECONDS = 0.25
"""...or this long after the last pi worker started since is up: its first model request
(pi's own CPU burst right after its run starts) is out of the way by then. pi 1.x boots in
0.3-0.6 s: waiting out REFILL_SECONDS made a `roost run` within ~2.5 s of the last one
start a worker cold (~200 ms more to its first model request, README: Start-up)."""


def standby_command() -> list[str]:
    return [sys.executable, "-m", "roost.worker", "--standby"]


class SpareLaunch:
    """A spare taken for one job (runner.Launched): it acts on `go`."""

    def __init__(
        self, popen: subprocess.Popen[bytes], sock: socket.socket, log_fd: int, job: dict[str, object]
    ) -> None:
        self._popen = popen
        self._sock: socket.socket | None = sock
        self._log_fd: int | None = log_fd
        self._job = job
        self.pid = popen.pid
        self.start_time, self.start_ticks, self.boot_id = procid.identity(popen.pid)

    def go(self) -> None:
        try:
            if self._sock is not None and self._log_fd is not None:
                socket.send_fds(self._sock, [json.dumps(self._job).encode()], [self._log_fd])
        finally:
            self.cancel()  # closed either way: the spare has its job, or sees the end and exits

    def cancel(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None

    def wait(self) -> int | None:
        return self._popen.wait()


class Spare:
    """At most one spare worker, kept while `enabled()` (the `spareWorker` setting)."""

    def __init__(self, enabled: Callable[[], bool]) -> None:
        self._enabled = enabled
        self._popen: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self.ready = False
        self._refill: asyncio.TimerHandle | None = None
        self._booting: set[str] = set()  # jobs whose pi worker started and is not up yet
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def start_later(self, booting: str | None = None) -> None:
        """Start one REFILL_SECONDS from now, from now again at every worker start: not
        while workers and their pis start on the same cores (roostd's own start too).
        `booting`: the job whose pi worker starts now; `worker_up` says when it is up."""
        if self._closed:
            return
        if booting is not None:
            self._booting.add(booting)
        if self._refill is not None:
            self._refill.cancel()
        self._refill = asyncio.get_running_loop().call_later(REFILL_SECONDS, self.start)

    def worker_up(self, job: str) -> None:
        """The job's pi worker is up (its job left `starting`, or it will not come up): when
        no other started since is still booting, the spare starts UP_GRACE_SECONDS from
        now rather than at the end of REFILL_SECONDS."""
        if job not in self._booting:
            return
        self._booting.discard(job)
        if self._booting or self._closed or self._refill is None:
            return
        self._refill.cancel()
        self._refill = asyncio.get_running_loop().call_later(UP_GRACE_SECONDS, self.start)

    def start(self) -> None:
        """Start a spare unless one is there (or they are turned off, or roostd stops)."""
        self._refill = None
        self._booting.clear()  # up by now, or never: a removed job's worker says nothing
        if self._popen is not None or self._closed or not self._enabled():
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._popen = subprocess.Popen(
                standby_command(),
                env={**os.environ, joblock.GO_FD_VAR: str(theirs.fileno())},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # until it has a job: then the job's worker.log
                cwd="/",
                start_new_session=True,
                close_fds=True,
                pass_fds=(theirs.fileno(),),
            )
        except OSError as exc:
            log.warning("could not start a spare worker: %s", exc)
            ours.close()
            return
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self.ready = False
        asyncio.get_running_loop().add_reader(ours.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        assert self._sock is not None
        try:
            data = self._sock.recv(16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.ready = True
            return
        log.warning("the spare worker (pid %s) ended before it was used", self.pid)
        self._drop()

    def _drop(self) -> None:
        """Forget the spare: its socket closed (so it exits), its exit status collected."""
        if self._sock is not None:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        if self._popen is not None:
            if self._popen.poll() is None:  # no job yet: it holds nothing, it may just go
                self._popen.terminate()
            self._popen.wait()
            self._popen = None
        self.ready = False

    def take(self, job: dict[str, object], log_fd: int) -> SpareLaunch | None:
        """The ready spare, for this job (the next one starts later); None when none is."""
        popen, sock = self._popen, self._sock
        if not self.ready or popen is None or sock is None or popen.poll() is not None:
            return None
        if not self._enabled():  # turned off since it started: it goes, unused
            self._drop()
            return None
        asyncio.get_running_loop().remove_reader(sock.fileno())
        sock.setblocking(True)
        self._popen, self._sock, self.ready = None, None, False
        return SpareLaunch(popen, sock, log_fd, job)

    def close(self) -> None:
        """roostd stops: no more spares, and the one there exits."""
        self._closed = True
        if self._refill is not None:
            self._refill.cancel()
            self._refill = None
        self._drop()
