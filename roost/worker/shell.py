"""A shell job's worker: runs the command, captures its output, records its exit status.

    python -m roost.worker.shell JOB_ID

The status is written to `exit.json` beside the log before exiting with the same code, so
a roostd that adopted this process (and so cannot wait() for it) still learns the result.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys

from roost.host import paths
from roost.host.fsutil import atomic_write_json, utc_now
from roost.job import env as jobenv
from roost.job.record import load_record
from roost.locks import joblock


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m roost.worker.shell JOB_ID", file=sys.stderr)
        return 2
    joblock.wait_for_go()  # until roostd has recorded this process as the job's worker
    try:
        joblock.acquire(paths.job_dir(argv[0]))
    except joblock.Duplicate as exc:
        print(f"roost worker: job {argv[0]}: {exc}; exiting", file=sys.stderr)
        return joblock.EXIT_DUPLICATE
    record = load_record(paths.job_dir(argv[0]) / "job.json")
    assert record.command
    user_umask = os.umask(0o077)  # the log is the user's only; the command gets it back
    fd = os.open(
        record.dir / "output.log",
        os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    with os.fdopen(fd, "ab") as output:
        # Quoted as a shell needs it (`sh -c 'echo a; b'`): pasted back, it runs the same.
        output.write(f"$ {shlex.join(record.command)}   # {utc_now()}\n".encode())
        output.flush()
        # The environment of the command that created (or last started) the job.
        env = jobenv.compose(jobenv.load(record.dir), {"ROOST_HOME": str(paths.roost_home())})
        child = subprocess.Popen(
            record.command,
            cwd=record.cwd,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            umask=user_umask,
            env=env,
        )

        def forward(signum: int, frame: object) -> None:
            child.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        code = child.wait()
    atomic_write_json(record.dir / "exit.json", {"code": code, "at": utc_now()})
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
