#!/usr/bin/env python3
"""Schedules' figures (README: Schedules), on a roostd with the fake pi:

    .venv/bin/python benchmarks/schedule_bench.py [--firings 5] [--changes 5] [--idle 60]

1. on time: an `--every 1s` schedule; per firing, its job's `job.created` event against
   the firing's due time (the target: within 1 s).
2. file change: an `--on-change` trigger with `--debounce 0.5s`; per change, the
   `schedule.fired` event against the write, less the debounce (the target: 200 ms).
3. idle: roostd's CPU-seconds over `--idle` seconds with 100 schedules not due, and the
   baseline, in the same run, with none (the target: 0, timers only).

Output: one JSON object. The machine may be shared: say so with the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import psutil  # noqa: E402
from kit.lab import Lab  # noqa: E402
from kit.procs import wait_until  # noqa: E402


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def events(lab: Lab, kind: str) -> list[dict[str, Any]]:
    path = lab.roost_home / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e["type"] == kind]


def figures(values: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(values) * 1000, 1),
        "max_ms": round(max(values) * 1000, 1),
        "n": len(values),
    }


def on_time(lab: Lab, firings: int) -> dict[str, float]:
    lab.roost_ok("schedule", "add", "tick", "--every", "1s", "tick")
    fired = wait_until(
        lambda: (
            (f := [e for e in events(lab, "schedule.fired") if e["outcome"] == "started"])
            and len(f) >= firings
            and f
        ),
        60,
        what=f"{firings} firings",
    )[:firings]
    lab.roost_ok("schedule", "rm", "tick")
    created = {e["job"]["id"]: stamp(e["time"]) for e in events(lab, "job.created")}
    return figures([created[e["job"]["id"]] - stamp(e["due"]) for e in fired])


def file_change(lab: Lab, changes: int, debounce: float = 0.5) -> dict[str, float]:
    watched = lab.work / "watched"
    watched.mkdir()
    lab.roost_ok("schedule", "add", "docs", "--on-change", str(watched), "--debounce", f"{debounce}s", "docs")
    late = []
    for n in range(changes):
        before = len([e for e in events(lab, "schedule.fired") if e["cause"] == "change"])
        written = time.time()
        (watched / f"f{n}").write_text("x")
        event = wait_until(
            lambda b=before: (
                (f := [e for e in events(lab, "schedule.fired") if e["cause"] == "change"])[b:] and f[b]
            ),
            30,
            what="the firing",
        )
        late.append(stamp(event["time"]) - written - debounce)
        if event["job"]:
            lab.wait_settled(event["job"]["id"])
    lab.roost_ok("schedule", "rm", "docs")
    return figures(late)


def idle_cpu(lab: Lab, seconds: float) -> dict[str, float]:
    daemon = psutil.Process(lab.daemon_pid())

    def used() -> float:
        before = daemon.cpu_times()
        deadline = time.time() + seconds
        wait_until(lambda: time.time() > deadline, seconds + 30, what="the idle window")
        after = daemon.cpu_times()
        return max(0.0, round(after.user + after.system - before.user - before.system, 3))

    baseline = used()
    for n in range(100):
        lab.request(
            "schedule_add",
            name=f"s{n}",
            run={"task": "t", "cwd": str(lab.work)},
            **({"every": "1h"} if n % 2 else {"cron": "0 3 * * *"}),
        )
    return {"cpu_seconds_100_schedules": used(), "cpu_seconds_baseline": baseline, "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--firings", type=int, default=5)
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--idle", type=float, default=60.0)
    args = parser.parse_args()
    with Lab(pi="fake") as lab:
        lab.roost_ok("ls")  # a warm roostd
        result = {
            "on_time": on_time(lab, args.firings),
            "file_change_over_debounce": file_change(lab, args.changes),
            "idle": idle_cpu(lab, args.idle),
        }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
