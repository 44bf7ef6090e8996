"""Starting a job's pi safely: one writer per session, why pi did not come up, the session
file made private once pi has written it, and what pi's own setup files say when pi refuses
a prompt. Used by roost.worker.lifecycle."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable

from roost.host import paths
from roost.job.record import JobRecord
from roost.job.states import EXIT_FATAL
from roost.pi import problems
from roost.worker import launch
from roost.worker.launch import Early
from roost.worker.pi_process import PiError, PiProcess

log = logging.getLogger("roost.worker")

OLD_PI_GRACE = 10.0  # seconds a previous pi of this job gets to exit before SIGKILL
HOLDER_GRACE = 5.0  # seconds a foreign holder of the session gets to let go at start-up


class Fatal(Exception):
    """Restarting the worker cannot help (session locked elsewhere, pi missing, ...)."""


def check_lock(record: JobRecord) -> None:
    """Refuse to start a second writer of the session (docs/locks.md, "Other writers"):
    the writer lock's holder, or another writer that roost.locks.writers finds."""
    from roost.locks.holding import other_writer, own_pis

    session, job_id = record.session, record.id
    assert session is not None
    for pid in own_pis(session, job_id):
        stop_old_pi(pid)
    # A foreground pi that just handed its session off exits a moment after letting go;
    # give a holder a short while before refusing.
    deadline = time.monotonic() + HOLDER_GRACE
    held = other_writer(session, job_id)
    while held is not None and time.monotonic() < deadline:
        time.sleep(0.05)  # start-up only: the worker has nothing else to do yet
        held = other_writer(session, job_id)
    if held is None:
        from roost.locks import writers
        from roost.pi.sessiontail import end_cut_line

        if end_cut_line(session):
            log_cut_line(session)
        writers.remember(session, str(record.dir))  # what our pi starts from
        return
    log.error("session %s: pid %d %s", session, held.pid, held.how)
    # Fatal: the item that woke the job stays in the mailbox (nothing was delivered);
    # `roost start` delivers it once the other writer has quit.
    raise Fatal(held.message(job_id))


def log_cut_line(session: str) -> None:
    log.warning(
        "session %s ended in part of a line (a pi killed while writing it): ended that line, "
        "so pi's next entry starts a line of its own",
        session,
    )


def stop_old_pi(pid: int) -> None:
    """Our own previous pi outlived its worker: it must go before a new one writes."""
    import psutil  # only on this path: it costs a worker's start-up ~8 ms of imports

    log.warning("stopping pid %d, a previous pi of this job", pid)
    # Wait until it is gone: while it lives it holds the lock, and our pi would
    # refuse the session (exit 3), which fails the job for good.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            old_pi = psutil.Process(pid)
            old_pi.send_signal(sig)
            old_pi.wait(timeout=OLD_PI_GRACE)
            return
        except psutil.NoSuchProcess:
            return
        except psutil.TimeoutExpired:
            log.warning("pid %d ignored SIG%s", pid, sig.name[3:])


def start_pi(early: Early, check_lock: Callable[[], None]) -> subprocess.Popen[bytes]:
    """The job's pi: started by the launcher, or now once `check_lock` found the session's
    lock free."""
    if early.error is not None:
        raise Fatal(early.error)
    if early.pi is None:  # the session's lock file exists: see who holds it first
        check_lock()
        assert early.install is not None  # found, or early.error says why not
        try:
            early.pi = launch.spawn_pi(early.job, early.ext_path, early.install)
        except launch.LaunchError as exc:
            raise Fatal(str(exc)) from None
    return early.pi


async def finish_checkout(record: JobRecord) -> None:
    """Write a new worktree's files (roost.worktrees.checkout), while pi boots."""
    worktree = record.worktree
    if not worktree:
        return
    from roost.worktrees import checkout

    if await asyncio.to_thread(checkout.finish_pending, record.dir, str(worktree["path"])):
        log.info("wrote the files of worktree %s", worktree["path"])


def why_not_up(pi: PiProcess, record: JobRecord, exc: Exception) -> Exception:
    """Why pi did not come up: Fatal when restarting it cannot help, else PiError."""
    if pi.exited.is_set() and pi.returncode == EXIT_FATAL:
        return Fatal(f"pi refused the session (see {record.dir}/worker.log)")
    if pi.exited.is_set():
        problem = problems.from_startup(
            list(pi.stderr_tail), record.id, roost_extension=str(paths.extension_path())
        )
        if problem is not None:  # restarting it would fail the same way
            return Fatal(problem.text())
    return PiError(f"pi did not come up: {exc}")


def privatise_session(record: JobRecord) -> bool:
    """Make a roost-made session file 0600 once pi has created it; False: not yet written.

    pi creates the file itself with the umask it was given (the user's: its tools need
    it), so often 0644; pre-creating it empty confuses pi 0.73 (its next open forks the
    session), so the worker closes it down right after pi's first write instead.
    """
    session = record.session
    if not session or os.path.dirname(session) != str(record.dir):
        return True  # a session roost did not create stays as it is
    try:
        fd = os.open(session, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return False  # not written yet (pi 0.73 writes at the first assistant message)
    except OSError as exc:
        log.warning("could not make %s private: %s", session, exc)
    return True
