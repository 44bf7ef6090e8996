"""A shell job's worker: runs the command, captures its output, records its exit status.

    python -m roost.worker.shell JOB_ID

The status is written to `exit.json` beside the log before exiting with the same code, so
a roostd that adopted this process (and so cannot wait() for it) still learns the result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from roost import paths
from roost.fsutil import atomic_write_json, utc_now
from roost.supervise.jobs import load_record


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m roost.worker.shell JOB_ID", file=sys.stderr)
        return 2
    record = load_record(paths.job_dir(argv[0]) / "job.json")
    assert record.command
    with open(record.dir / "output.log", "ab") as output:
        output.write(f"$ {' '.join(record.command)}   # {utc_now()}\n".encode())
        output.flush()
        child = subprocess.Popen(record.command, cwd=record.cwd, stdin=subprocess.DEVNULL,
                                 stdout=output, stderr=subprocess.STDOUT)

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
