#!/usr/bin/env python3
"""`roost search` at scale: 1,000 jobs of 200 entries each (200,000 entries, ~110 MB of
session files, written directly by kit.sessionfiles while roostd is down), the
figures printed beside their targets and their baselines from the same run:

1. indexing from scratch: roostd started on the jobs with no index -> every entry indexed
   (the index polled read-only), target <= 60 s;
2. `roost search` as a whole command (spawn to exit, through a pipe), p50 of 5 queries x 5,
   target <= 120 ms, beside `roost ls --json`'s p50 from the same run;
3. roostd's RSS growth: its RSS with the index caught up and nothing to do (a restart) ->
   its peak while indexing everything from scratch (`roost search --reindex`), target
   <= 50 MB;
4. 10 fake-pi jobs streaming (`[[stream 40 10]]`: 40 deltas 10 ms apart) at once, each
   one's `roost reply` -> done: their median with the index idle (only the streams' own
   entries indexed) and during a `--reindex` of the 200,000 entries (the most indexing
   there is), 3 rounds of each alternated, medians compared, target <= +10 %.

    .venv/bin/python benchmarks/search_bench.py [--jobs 1000] [--entries 200]

One run; output: one JSON object, `targets` first. The machine may be shared: `loadavg`.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402
from kit.lab import Lab  # noqa: E402
from kit.procs import wait_until  # noqa: E402
from kit.sessionfiles import write_jobs  # noqa: E402

SCRIPT = Path(sys.executable).parent / "roost"  # the installed command, as a user runs it
ROUNDS = 3
QUERIES = ("payment retry", '"invoice cache"', "migr*", "banner NOT deploy", "kalomi OR rutavo")


def entry_argv() -> list[str]:
    return [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "roost.cli"]


def command_ms(lab: Lab, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [*entry_argv(), *args], env=lab.env, cwd=lab.work, check=True, capture_output=True, timeout=60
    )
    return (time.perf_counter() - started) * 1000.0


def indexed(lab: Lab) -> int:
    try:
        with sqlite3.connect(f"file:{lab.roost_home / 'search.db'}?mode=ro", uri=True, timeout=10) as db:
            return int(db.execute("SELECT count(*) FROM entries").fetchone()[0])
    except sqlite3.Error:
        return 0


class PeakRss(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc, self.peak, self.done = psutil.Process(pid), 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak = max(self.peak, self.proc.memory_info().rss)


def stream_ms(lab: Lab, jobs: list[str]) -> float:
    """10 replies at once, each streaming its answer: the median of reply -> done."""
    times: list[float] = []

    def one(job: str) -> None:
        started = time.perf_counter()
        lab.reply(job, "[[stream 40 10]]")
        lab.wait(job)
        times.append((time.perf_counter() - started) * 1000.0)

    threads = [threading.Thread(target=one, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=200)
    opts = parser.parse_args()
    total = opts.jobs * opts.entries
    out: dict[str, Any] = {}
    with Lab(pi="fake") as lab:
        write_jobs(lab.roost_home, lab.work, opts.jobs, opts.entries)
        size = sum(p.stat().st_size for p in (lab.roost_home / "jobs").glob("*/session.jsonl"))
        started = time.monotonic()
        lab.start_daemon()
        wait_until(lambda: indexed(lab) >= total, 600, interval=0.2, what="indexed")
        index_s = time.monotonic() - started
        search = [command_ms(lab, "search", query) for _ in range(5) for query in QUERIES]
        ls_json = [command_ms(lab, "ls", "--json") for _ in range(10)]
        lab.roost_ok("daemon", "stop")
        lab.start_daemon()  # the index caught up: nothing to do
        wait_until(lambda: lab.daemon_pid(), 30, what="the pid file")
        time.sleep(3.0)  # settle after start-up (a measurement, not a wait for a state)
        rss_idle = psutil.Process(lab.daemon_pid() or 0).memory_info().rss
        streams = [lab.run("[[stream 2 1]]", name=f"stream-{n}") for n in range(10)]
        for job in streams:
            lab.wait(job)
        peak = PeakRss(lab.daemon_pid() or 0)
        peak.start()
        idle_runs: list[float] = []
        busy_runs: list[float] = []
        reindex: dict[str, Any] = {}
        for _ in range(ROUNDS):  # alternated: the machine's load drifts between rounds
            idle_runs.append(stream_ms(lab, streams))
            worker = threading.Thread(
                target=lambda: reindex.update(lab.cli_json("search", "--reindex", "--json", timeout=600))
            )
            worker.start()
            wait_until(lambda: indexed(lab) < total, 30, interval=0.02, what="the reindex begun")
            busy_runs.append(stream_ms(lab, streams))
            worker.join()
        peak.done.set()
        peak.join()
        idle_stream, busy_stream = statistics.median(idle_runs), statistics.median(busy_runs)
    p50 = statistics.median(search)
    growth = (peak.peak - rss_idle) / 2**20
    out["targets"] = {
        "index_from_scratch_s": {"value": round(index_s, 1), "target": 60, "met": index_s <= 60},
        "search_p50_ms": {
            "value": round(p50, 1),
            "target": 120,
            "met": p50 <= 120,
            "ls_json_p50_ms": round(statistics.median(ls_json), 1),
        },
        "rss_growth_mb": {"value": round(growth, 1), "target": 50, "met": growth <= 50},
        "stream_latency_ratio": {
            "value": round(busy_stream / idle_stream, 3),
            "target": 1.10,
            "met": busy_stream <= 1.10 * idle_stream,
            "idle_ms": round(idle_stream, 1),
            "indexing_ms": round(busy_stream, 1),
            "rounds": {"idle": [round(v) for v in idle_runs], "indexing": [round(v) for v in busy_runs]},
        },
    }
    out.update(
        {
            "jobs": opts.jobs,
            "entries": total,
            "session_mb": round(size / 1e6, 1),
            "reindex": reindex,
            "rss_idle_mb": round(rss_idle / 2**20, 1),
            "search_ms": sorted(round(v, 1) for v in search),
            "loadavg": os.getloadavg(),
        }
    )
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
