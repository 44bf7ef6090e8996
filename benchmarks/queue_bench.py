#!/usr/bin/env python3
"""The queue's figures: submitting many jobs in one command, and what one pi job costs.

    .venv/bin/python benchmarks/queue_bench.py [--jobs 200] [--baseline 20]

1. submit: `roost run --each FILE` with `--jobs` tasks (fake pi, the default maxRunning:
   most of them are queued), wall time of the whole command with a warm roostd; the
   baseline, in the same run, is `--baseline` separate `roost run` commands (per job).
2. rss: one real pi job (the scripted model holding its answer): the RSS of its worker and
   of its pi, the figure behind maxRunning's default (roost.supervise.jobqueue.JOB_MB).

Output: one JSON object. The machine may be shared: say so with the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import psutil  # noqa: E402
from kit.lab import Lab  # noqa: E402
from kit.procs import wait_until  # noqa: E402

from roost.fakellm import first_user_contains, text  # noqa: E402
from roost.supervise.jobqueue import machine_limit  # noqa: E402


def submit(jobs: int, baseline: int) -> dict[str, float]:
    with Lab(pi="fake") as lab:
        lab.roost_ok("ls")  # a warm roostd
        tasks = lab.work / "tasks.txt"
        tasks.write_text("".join(f"task {n}\n" for n in range(jobs)))
        started = time.monotonic()
        ids = lab.roost_ok("run", "--each", str(tasks)).split()
        each = time.monotonic() - started
        assert len(ids) == jobs, len(ids)
        queued = sum(1 for row in lab.ls() if row["state"] == "queued")
        started = time.monotonic()
        for n in range(baseline):
            lab.run_job(f"single {n}")
        single = (time.monotonic() - started) / baseline
        lab.shutdown()
    return {
        "jobs": jobs,
        "eachSeconds": round(each, 3),
        "queuedRightAfter": queued,
        "singleRunSeconds": round(single, 3),
        "singleRunsForAllSeconds": round(single * jobs, 1),
    }


def rss() -> dict[str, float]:
    with Lab(llm=True) as lab:
        hold = threading.Event()
        lab.llm.add(first_user_contains("RSS"), text("done", hold=hold))
        job = lab.run("RSS measure")
        lab.wait_request(first_user_contains("RSS"))
        worker = psutil.Process(wait_until(lambda: lab.show(job)["worker"]["pid"]))
        pi = worker.children()[0]
        time.sleep(1.0)  # let pi finish loading its extensions' lazy parts
        figures = {
            "workerMB": worker.memory_info().rss / 2**20,
            "piMB": sum(p.memory_info().rss for p in [pi, *pi.children(recursive=True)]) / 2**20,
        }
        hold.set()
        lab.wait(job)
        lab.shutdown()
    figures["jobMB"] = figures["workerMB"] + figures["piMB"]
    return {k: round(v, 1) for k, v in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--baseline", type=int, default=20)
    args = parser.parse_args()
    out = {"machineLimit": machine_limit(), "submit": submit(args.jobs, args.baseline), "rss": rss()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
