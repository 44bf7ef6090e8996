"""A worker's first steps, before its heavy imports: start pi as early as possible.

pi needs a second or more to boot; the worker's own imports (asyncio, watchdog,
portalocker, ...) take a few hundred milliseconds. Starting pi first makes them overlap,
so a job's first model request comes about as soon as a bare pi's would. Only the
standard library's lighter modules and roost.host.paths are imported here (no dataclasses, no
typing at run time, no secrets: each costs milliseconds on the way to pi).

The fast path needs the session to be free: no lock file, and no other writer that
roost.locks.writers can see (a pi without roost's extension takes no lock; the scan reads one
small /proc file per process, about 1-2 ms). Then pi, whose roost
extension takes the lock, is the session's only writer. Otherwise the worker first finds
out who holds it (roost.worker.lifecycle.Worker.check_lock) and starts pi itself, or refuses.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from roost.host import paths
from roost.job import env as jobenv
from roost.locks import joblock, writers
from roost.pi.locate import PiInstall, PiNotFound, find_pi
from roost.pi.sessiontail import end_cut_line

if TYPE_CHECKING:
    from typing import Any

PR_SET_PDEATHSIG = 1
USER_UMASK = os.umask(0o077)
"""The umask roostd gave the worker (pi and its tools get it back); read once at import."""
os.umask(USER_UMASK)


class LaunchError(Exception):
    """pi cannot be started for this job (restarting the worker cannot help)."""


# If the worker is killed (even with SIGKILL) pi gets SIGTERM instead of writing on as an
# orphan: the restarted worker must be the only writer of the session file. The kernel's
# parent-death signal is set in the child before pi's exec, by util-linux's `setpriv
# --pdeathsig` (exec'd by the child) where it works, else by a `preexec_fn`. The latter
# makes subprocess fork the worker and run Python in the child: ~5 ms of every job's start
# for a worker with its modules loaded, against about 1 ms for setpriv's exec and a sh's.
# Either way the child then checks that its parent is still the worker: a worker killed
# before the signal was set (setpriv's own start is a window of a millisecond or more) had
# left pi running as an orphan, its signal never sent.
SETPRIV = ("setpriv", "--pdeathsig", "TERM", "--")
PARENT_CHECK = ("/bin/sh", "-c", 'test "$PPID" = "$0" && exec "$@"')
"""After setpriv: run the command only if the parent is still the worker (its pid: $0)."""
_setpriv: list[str] | None = None  # SETPRIV (with its path) and PARENT_CHECK, or [] if unusable


def _die_with_parent(parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the worker died before the signal was set: no pi
        os._exit(1)


def death_signal_prefix() -> list[str]:
    """What pi's command line starts with to die with this worker: setpriv's and the parent
    check, once they have been seen to work (util-linux 2.33+, and a kernel that lets it:
    checked once per worker, by a spare before its job), else nothing (then `preexec_fn`
    does it)."""
    global _setpriv
    if _setpriv is None:
        import shutil

        found = shutil.which(SETPRIV[0])
        base = [found, *SETPRIV[1:], *PARENT_CHECK] if found else []
        try:
            works = (
                bool(base)
                and subprocess.run(
                    [*base, str(os.getpid()), "true"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=10,
                ).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            works = False
        _setpriv = base if works else []
    return [*_setpriv, str(os.getpid())] if _setpriv else []


class Early:
    """What the launcher made: the extension socket (listening), maybe pi."""

    def __init__(self, job: dict[str, Any], ext_socket: socket.socket, ext_path: Path) -> None:
        self.job = job
        self.ext_socket = ext_socket
        self.ext_path = ext_path
        self.pi: subprocess.Popen[bytes] | None = None
        self.install: PiInstall | None = None  # which pi, found once for the worker's life
        self.error: str | None = None  # why pi could not be started (a LaunchError)
        self.ended_cut_line = False  # the session ended in part of a line (roost.pi.sessiontail)


def pi_argv(job: dict[str, Any], install: PiInstall) -> list[str]:
    argv = [*install.argv, "--mode", "rpc", "--session", job["session"]]
    if job.get("sandbox"):  # first: its refusals come before roost.ts's approvals
        argv += ["-e", str(paths.extension_path().parent / "sandbox.ts")]
    argv += ["-e", str(paths.extension_path())]
    if job.get("model"):
        argv += ["--model", job["model"]]
    if job.get("thinking"):
        argv += ["--thinking", job["thinking"]]
    definition = job.get("agentDef") or {}
    if definition.get("tools") is not None:
        argv += ["--tools", ",".join(definition["tools"])]
    if definition.get("prompt"):
        argv += ["--append-system-prompt", str(prompt_file(job, definition["prompt"]))]
    return argv


def prompt_file(job: dict[str, Any], text: str) -> Path:
    """The definition's prompt as a file in the job's directory: pi's
    --append-system-prompt reads an argument that names an existing file as that file, so
    the text itself is never passed (a prompt that happens to be a path would be read)."""
    path = paths.job_dir(job["id"]) / "agent-prompt.md"
    try:
        current = path.read_text(encoding="utf-8")
    except OSError:
        current = None
    if current != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return path


def pi_env(job: dict[str, Any], ext_path: Path) -> dict[str, str]:
    # No secret of roost's goes into pi's environment: its tools could read it from
    # /proc/<pi>/environ (deleting it from process.env does not change that). The worker
    # knows its pi by the kernel's credentials of the extension's connection instead.
    # The job's own environment (its creator's, with the person's API keys) is the base;
    # roost's variables and pi's agent dir (the one roostd reads roost.json from) win.
    env = jobenv.compose(
        jobenv.load(paths.job_dir(job["id"])),
        {
            "ROOST_EXT_SOCK": str(ext_path),
            "ROOST_JOB_ID": job["id"],
            "ROOST_HOME": str(paths.roost_home()),
            "PI_CODING_AGENT_DIR": str(paths.agent_dir()),
        },
    )
    # A new worktree still being written: the extension holds tool calls until it is done.
    env.pop("ROOST_CHECKOUT_PENDING", None)
    if job.get("worktree"):
        from roost.worktrees import CHECKOUT_MARKER

        marker = paths.job_dir(job["id"]) / CHECKOUT_MARKER
        if marker.exists():
            env["ROOST_CHECKOUT_PENDING"] = str(marker)
    # roost_spawn's list of agents (the extension registers its tools at load).
    env.pop("ROOST_AGENT_CATALOG", None)
    if job.get("agentCatalog"):
        env["ROOST_AGENT_CATALOG"] = job["agentCatalog"]
    # roost run --sandbox: the extension runs bash under bwrap (roost.sandbox); never
    # unsandboxed: without a working bwrap the launch fails.
    env.pop("ROOST_SANDBOX", None)
    if job.get("sandbox"):
        env["ROOST_SANDBOX"] = sandbox_plan(job, env)
    return env


def sandbox_plan(job: dict[str, Any], env: dict[str, str]) -> str:
    """The job's sandbox for its extension (bwrap found on the job's own PATH)."""
    from roost import sandbox

    try:
        return sandbox.job_plan(
            job,
            home=env.get("HOME") or os.path.expanduser("~"),
            roost_home=str(paths.roost_home()),
            agent_dir=str(paths.agent_dir()),
            environ=env,
        ).to_json()
    except sandbox.SandboxError as exc:
        raise LaunchError(str(exc)) from None


def locate() -> PiInstall:
    try:
        return find_pi()
    except PiNotFound as exc:
        raise LaunchError(str(exc)) from None


def spawn_pi(job: dict[str, Any], ext_path: Path, install: PiInstall) -> subprocess.Popen[bytes]:
    if not os.path.isdir(job["cwd"]):
        raise LaunchError(f"the job's directory {job['cwd']} does not exist")
    return popen_dying_with_worker(
        pi_argv(job, install),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # the worker copies it to its log and keeps its last lines
        cwd=job["cwd"],
        env=pi_env(job, ext_path),
        umask=USER_UMASK,  # what the agent's tools create is the user's business
    )


def popen_dying_with_worker(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """subprocess.Popen(argv, **kwargs) for a child that gets SIGTERM when this process dies."""
    prefix = death_signal_prefix()
    if prefix:
        return subprocess.Popen(prefix + argv, **kwargs)
    parent = os.getpid()
    return subprocess.Popen(argv, preexec_fn=lambda: _die_with_parent(parent), **kwargs)


def listen(path: Path) -> socket.socket:
    """The extension socket, listening before pi starts (connections wait in the backlog)."""
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old_umask)
    sock.listen(8)
    return sock


def _remember(early: Early, session: str, job_dir: str) -> None:
    if early.pi is not None:  # it ran (and has exited by now): not if the worker refused
        writers.remember(session, job_dir)


def start(job_id: str) -> Early:
    job_dir = paths.job_dir(job_id)
    os.umask(0o077)  # the worker's own files (log, journal, run note) are the user's only
    try:  # before anything of the job is touched (ext.sock above all)
        joblock.acquire(job_dir)
    except joblock.Duplicate as exc:
        print(f"roost worker: job {job_id}: {exc}; exiting", file=sys.stderr, flush=True)
        sys.exit(joblock.EXIT_DUPLICATE)
    with open(job_dir / "job.json", encoding="utf-8") as handle:
        job = json.load(handle)
    ext_path = job_dir / "ext.sock"
    ext_socket = listen(ext_path)
    early = Early(job, ext_socket, ext_path)
    try:
        early.install = locate()
        session = job["session"]
        # What this worker's pi leaves is roost's, not another writer's (roost.locks.writers).
        atexit.register(_remember, early, session, str(job_dir))
        if not paths.session_lock_path(session).exists() and not writers.find_writers(session, str(job_dir)):
            early.ended_cut_line = end_cut_line(session)
            early.pi = spawn_pi(job, ext_path, early.install)
            # The file as pi starts from it (pi writes nothing for a second or more yet):
            # noted after the spawn, off the way to pi.
            writers.remember(session, str(job_dir))
    except LaunchError as exc:
        early.error = str(exc)
    return early
