"""Where a worker process is started: the `Runner` seam, and `LocalRunner`, this machine.

roostd asks a runner to launch a job's worker (`WorkerSpec`: the command, its environment,
its directory, its log) and gets back a `Launched`: the process's identity (pid and start
time) and its release. The worker waits on the release before it takes the job's lock or
reads anything, so roostd saves that identity first and only then calls `go()`; when the
save fails it calls `cancel()` and the worker exits without acting. Everything else (the
job's states, its mailbox, the agent rules) stays in roostd and never asks where the
worker runs. A runner for other machines implements these two classes (docs/scale-out.md).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeGuard

from roost.host import procid
from roost.locks import joblock
from roost.supervise.spare import Spare


@dataclass(frozen=True)
class WorkerSpec:
    """What to start for one job."""

    job_id: str
    command: list[str]
    cwd: str
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)  # on top of roostd's own environment
    spare: bool = False
    """A pi worker (`python -m roost.worker JOB`): a worker started ahead may take it."""


class Launched(Protocol):
    """A started worker, held before it may act."""

    pid: int
    start_time: float | None
    start_ticks: int | None
    """Its start in clock ticks since boot, and that boot's id (None where unknown): its
    identity when the wall clock is stepped (roost.host.procid.matches)."""
    boot_id: str | None

    def go(self) -> None:
        """Let it act: its identity is saved (OSError when it cannot be told)."""

    def cancel(self) -> None:
        """Never let it act: it exits on its own."""

    def wait(self) -> int | None:
        """Its exit status once it has exited (None when the runner cannot know it)."""


class Runner(Protocol):
    def launch(self, spec: WorkerSpec) -> Launched: ...


class RemoteLaunch(Launched, Protocol):
    """A worker started on another machine (supervise/rayrunner.py): no local process
    (`pid` 0), so its runner watches it and says when it ends."""

    def on_exit(self, callback: Callable[[int | None], None]) -> None:
        """Call `callback(exit status)` on roostd's loop once it has ended."""

    def kill(self) -> None:
        """Stop it (it did not stop when asked): its end comes through `on_exit`."""

    def forget(self) -> None:
        """Stop watching it (roostd's shutdown): it runs on for the next roostd."""


def is_remote(launched: Launched) -> TypeGuard[RemoteLaunch]:
    """A worker on another machine: no pid here, its runner says when it ends."""
    return launched.pid == 0 and hasattr(launched, "on_exit")


class LocalLaunch:
    """A worker started here: a child process that waits on a pipe (`ROOST_WORKER_GO_FD`)."""

    def __init__(self, popen: subprocess.Popen[bytes], go_write: int) -> None:
        self._popen = popen
        self._go_write: int | None = go_write
        self.pid = popen.pid
        self.start_time, self.start_ticks, self.boot_id = procid.identity(popen.pid)

    def go(self) -> None:
        try:
            if self._go_write is not None:
                os.write(self._go_write, b"go")
        finally:
            self.cancel()  # closed either way: a worker reads "go", or EOF and exits

    def cancel(self) -> None:
        if self._go_write is not None:
            os.close(self._go_write)
            self._go_write = None

    def wait(self) -> int | None:
        return self._popen.wait()


class LocalRunner:
    """Workers as children of roostd, each in its own process session (so a roostd killed
    with SIGKILL takes no worker, and no pi, with it). With `spare` (the spareWorker
    setting) it keeps one pi worker started ahead of its job (roost.supervise.spare):
    `prepare()` starts it, `close()` ends it."""

    def __init__(self, spare: Callable[[], bool] | None = None) -> None:
        self.spare = Spare(spare) if spare is not None else None

    def prepare(self) -> None:
        if self.spare is not None:
            self.spare.start_later()

    def close(self) -> None:
        if self.spare is not None:
            self.spare.close()

    def worker_up(self, job_id: str) -> None:
        """The job's worker is up (its job left `starting`): the next spare need not wait
        for its pi's boot any more."""
        if self.spare is not None:
            self.spare.worker_up(job_id)

    def launch(self, spec: WorkerSpec) -> Launched:
        # 0600 and never through a symlink planted in the job's directory.
        fd = os.open(
            spec.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            os.fchmod(fd, 0o600)
            if self.spare is not None:
                # The next spare: once the workers started lately are up (or stop starting).
                self.spare.start_later(spec.job_id if spec.spare else None)
                if spec.spare:
                    taken = self.spare.take({"job": spec.job_id, "cwd": spec.cwd, "env": spec.env}, fd)
                    if taken is not None:
                        return taken  # it owns fd now
            return self._start(spec, fd)
        except BaseException:
            os.close(fd)
            raise

    @staticmethod
    def _start(spec: WorkerSpec, fd: int) -> LocalLaunch:
        go_read, go_write = os.pipe()
        try:
            with os.fdopen(os.dup(fd), "ab") as log_file:
                popen = subprocess.Popen(
                    spec.command,
                    env={**os.environ, **spec.env, joblock.GO_FD_VAR: str(go_read)},
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    cwd=spec.cwd,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(go_read,),
                )
        except BaseException:
            os.close(go_write)
            raise
        finally:
            os.close(go_read)
        os.close(fd)
        return LocalLaunch(popen, go_write)
