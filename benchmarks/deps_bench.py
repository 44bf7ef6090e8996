#!/usr/bin/env python3
"""A dependency done -> the dependent job's first model request, against the same job
started by `roost run` (README: Dependencies; the target: at most the baseline + 50 ms).

    .venv/bin/python benchmarks/deps_bench.py [--trials 5] [--keep]

The real pi against the lab's FakeLLM, roostd (stock) already running. Each trial runs,
in a rotating order:
  run    t0 = just before the `run` request (roost.wire.client); the finish line is the
         FakeLLM's receipt of the job's first model request (nothing else runs).
  run_at_done  the same `run`, made the moment a dependency like `after`'s is done (this
         process follows the event log through roostd and sends `run` on its job.state ->
         done): the baseline under the same load, since the dependency's pi and worker
         are still busy ending their run while the new job's pi boots.
  after  a dependency whose answer the FakeLLM holds, and a job made with `--after` it
         (`waiting`); the hold is released, the dependency's run ends, roostd marks it
         `done` and lets the dependent go. t0 = the dependency's `job.state -> done` in
         the event log (roostd's own clock, ms resolution); the finish line is the
         dependent's first model request. Both jobs' pis are booted by then only for the
         dependency: the dependent's worker and pi start after t0, as a `roost run` does.

The event log's times are wall-clock (UTC, ms): they are turned into this process's
monotonic clock with one offset read at the start (the FakeLLM stamps `time.monotonic()`).
Output: one JSON object: each variant's samples and median (ms), the medians' difference,
and whether it is within the target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kit.lab import Lab  # noqa: E402
from kit.procs import wait_until  # noqa: E402
from overhead_bench import bench_lab  # noqa: E402

from roost.fakellm import first_user_contains, text  # noqa: E402

TIMEOUT = 120.0
TARGET_MS = 50.0
# time.time() - time.monotonic(): the event log's wall clock in this process's monotonic one.
OFFSET = time.time() - time.monotonic()


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def done_at(lab: Lab, job: str) -> float:
    """The monotonic time roostd marked `job` done (its job.state event)."""

    def find() -> float | None:
        for line in (lab.roost_home / "events.jsonl").read_text().splitlines():
            event = json.loads(line)
            if (
                event["type"] == "job.state"
                and event["to"] == "done"
                and (event.get("job") or {}).get("id") == job
            ):
                wall = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
                return wall - OFFSET
        return None

    return float(wait_until(find, TIMEOUT, what=f"job {job} to be done"))


def run_trial(lab: Lab, token: str) -> float:
    with lab.client() as client:
        since = len(lab.llm.requests)
        t0 = time.monotonic()
        client.request("run", task=f"{token} start", cwd=str(lab.work), name=token)
    req = lab.llm.wait_for_request(first_user_contains(token), TIMEOUT, since=since)
    return ms(req.t - t0)


def after_trial(lab: Lab, token: str) -> float:
    with lab.client() as client:
        dep = held_dependency(lab, client, token)
        client.request("run", task=f"{token} start", cwd=str(lab.work), name=token, after=[dep])
    since = len(lab.llm.requests)
    HOLDS.pop(dep).set()
    req = lab.llm.wait_for_request(first_user_contains(f"{token} start"), TIMEOUT, since=since)
    return ms(req.t - done_at(lab, dep))


def held_dependency(lab: Lab, client: Any, token: str) -> str:
    """A job whose model answer is held; its id once its first request arrived."""
    hold = threading.Event()
    lab.llm.add(first_user_contains(f"{token}-dep"), text("dependency answer", hold=hold), times=1)
    dep = client.request("run", task=f"{token}-dep work", cwd=str(lab.work), name=f"{token}-dep")["id"]
    lab.llm.wait_for_request(first_user_contains(f"{token}-dep"), TIMEOUT)
    HOLDS[dep] = hold
    return str(dep)


HOLDS: dict[str, threading.Event] = {}


def run_at_done_trial(lab: Lab, token: str) -> float:
    with lab.client() as client, lab.client(TIMEOUT) as watcher:
        dep = held_dependency(lab, client, token)
        entries = watcher.follow({"since": last_seq(lab), "types": ["job.state"], "job": dep})
        HOLDS.pop(dep).set()
        next(e for e in entries if e.get("to") == "done")
        since = len(lab.llm.requests)
        t0 = time.monotonic()
        client.request("run", task=f"{token} start", cwd=str(lab.work), name=token)
    req = lab.llm.wait_for_request(first_user_contains(f"{token} start"), TIMEOUT, since=since)
    return ms(req.t - t0)


def last_seq(lab: Lab) -> int:
    lines = (lab.roost_home / "events.jsonl").read_text().splitlines()
    return int(json.loads(lines[-1])["seq"]) if lines else 0


def summary(samples: list[float]) -> dict[str, Any]:
    return {"median_ms": round(statistics.median(samples), 1), "samples_ms": samples}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    lab = bench_lab(probe=False, keep=args.keep)
    try:
        run_trial(lab, "warm-up")  # roostd's first job pays for imports the others do not
        trials = {"run": run_trial, "run_at_done": run_at_done_trial, "after": after_trial}
        out: dict[str, list[float]] = {name: [] for name in trials}
        for i in range(args.trials):
            names = list(trials)
            for variant in names[i % 3 :] + names[: i % 3]:  # a rotating order
                out[variant].append(trials[variant](lab, f"T{i}{variant}"))
    finally:
        lab.shutdown()
        lab.close()
    rows = {name: summary(samples) for name, samples in out.items()}
    delta = round(rows["after"]["median_ms"] - rows["run"]["median_ms"], 1)
    at_done = round(rows["after"]["median_ms"] - rows["run_at_done"]["median_ms"], 1)
    print(
        json.dumps(
            {
                "bench": "deps",
                "trials": args.trials,
                "loadavg": [round(x, 2) for x in os.getloadavg()],
                **rows,
                "after_minus_run_ms": delta,
                "after_minus_run_at_done_ms": at_done,
                "target": f"after <= run + {TARGET_MS:g} ms",
                "within_target": delta <= TARGET_MS,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
