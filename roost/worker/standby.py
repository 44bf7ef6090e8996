"""`python -m roost.worker --standby`: a pi worker started before its job (roostd's spare,
roost.supervise.spare), so that a new job's pi starts without waiting for an interpreter
and the worker's imports.

It imports the worker's modules, says `ready` on the socket roostd gave it
(`ROOST_WORKER_GO_FD`), and blocks reading it: no timer, no polling. roostd sends the job
only once it has saved this process's pid and start time (the `go` of every worker): its
id, its directory and its environment, with the job's worker.log as a passed descriptor
(opened by roostd, as for any worker). From there it is the job's worker, as if started
as `python -m roost.worker JOB_ID`. The socket closed without a job (roostd's shutdown,
or its death): it exits having done nothing.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from roost.locks import joblock

MAX_MESSAGE = 1 << 20
"""The job's message (id, directory, environment): far less than this."""


def wait_for_job() -> str:
    """Block until roostd hands this process a job; its id. Exit 0 when none comes."""
    fd_text = os.environ.pop(joblock.GO_FD_VAR, "")
    if not fd_text.isdigit():
        print("roost worker --standby: only roostd starts a standby worker", file=sys.stderr)
        sys.exit(2)
    sock = socket.socket(fileno=int(fd_text))
    import roost.worker.lifecycle  # noqa: F401 - the heavy imports, before a job needs them
    from roost.worker.launch import death_signal_prefix

    death_signal_prefix()  # found out now, not on the way to the job's pi

    try:
        sock.sendall(b"ready")
        message, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 1)
    except OSError:
        message, fds = b"", []
    sock.close()
    if not message or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        sys.exit(0)
    job = json.loads(message)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fds[0], 1)  # the job's worker.log, as roostd opened it
    os.dup2(fds[0], 2)
    os.close(fds[0])
    os.chdir(job["cwd"])
    os.environ.update(job["env"])
    return str(job["job"])


def show_job(job_id: str) -> bool:
    """Make this process's command line read `python -m roost.worker JOB_ID`, as a worker
    started for the job reads (ps, /proc/PID/cmdline, tools that find a job's worker),
    instead of `... --standby`. Rewritten in place through /proc/self/mem in the space of
    the original arguments; the last byte left non-NUL makes the kernel show the text up to
    its first NUL, spaces between the words (as setproctitle does). False when it could not
    (no /proc, no room); the job runs either way."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            stat = handle.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
        with open("/proc/self/cmdline", "rb") as handle:
            words = handle.read().split(b"\0")
        title = b" ".join([words[0], b"-m", b"roost.worker", job_id.encode()]) + b"\0"
        room = end - start
        if len(title) >= room or b" " in words[0]:
            return False
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(title + b"\0" * (room - len(title) - 1) + b" ")
        return True
    except (OSError, ValueError, IndexError):
        return False
