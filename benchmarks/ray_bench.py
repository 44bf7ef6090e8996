#!/usr/bin/env python3
"""What running a job on Ray costs against running it here, in one run, as ratios:

- `roost run` -> the job's first model request (`start`), a Ray job against a local one;
- a reply to a live idle job -> the model request carrying it (`message`), the same.

    .venv-ray/bin/python benchmarks/ray_bench.py [--trials 3]

Needs an interpreter with roost[ray]. It starts its own Ray head on 127.0.0.1 (one node,
this machine: so the ratio is the runner's own cost, the Jobs API, the remote end's
mirror and its TCP hops, never a network's), a Lab with the real pi against the scripted
model in this process, and stops both. roost.json's runner is Ray's (so roostd imports Ray
as it starts, as it would for a user), and each `run` request names its runner; the local
runner keeps its spare worker (its default). t0 is just before the `run` or `reply`
request (roost.wire.client); the finish line is the model request (FakeLLM's receipt time); one
clock (time.monotonic). Trials alternate local and ray. Read medians; the machine may be
shared (the load average is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kit.lab import Lab  # noqa: E402
from kit.rayhead import RayHead  # noqa: E402
from restart_bench import settle, timed_reply  # noqa: E402  (the same measures as a local restart's)

from roost.fakellm.matchers import first_user_contains  # noqa: E402
from roost.host import paths  # noqa: E402

TIMEOUT = 180.0


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def timed_start(lab: Lab, client: Any, runner: str, marker: str) -> tuple[str, float]:
    since = len(lab.llm.requests)
    t0 = time.monotonic()
    request = {"task": f"{marker} go", "cwd": str(lab.work), "runner": runner, "env": dict(lab.env)}
    job = client.call("run", request)["id"]
    first = lab.llm.wait_for_request(first_user_contains(marker), TIMEOUT, since=since)
    elapsed = first.t - t0
    settle(client, job)
    return job, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--replies", type=int, default=5, help="replies per job per trial")
    args = parser.parse_args()
    head = RayHead(sys.executable, num_cpus=4)
    head.start()
    lab = Lab(llm=True)
    results: dict[str, dict[str, list[float]]] = {
        kind: {"start": [], "message": []} for kind in ("local", "ray")
    }
    try:
        node_env = {k: v for k, v in lab.env.items() if k != "ROOST_HOME"}
        runner = {  # roost.json sends jobs to Ray (Ray imported at roostd's start); each run says
            "kind": "ray",
            "address": head.address,
            "python": sys.executable,
            "numCpus": 0.5,
            "env": node_env,
        }
        lab.configure(runner=runner, warmSeconds=600)
        lab.activate()
        paths.ensure_dir(lab.roost_home)
        lab.start_daemon()
        client = lab.client(TIMEOUT)
        for trial in range(args.trials):
            order = ("local", "ray") if trial % 2 == 0 else ("ray", "local")
            for kind in order:
                marker = f"RAYB-{kind}-{trial}"
                job, started = timed_start(lab, client, kind, marker)
                results[kind]["start"].append(started)
                for n in range(args.replies):
                    results[kind]["message"].append(timed_reply(lab, client, job, f"{marker} r{n}"))
                client.call("stop", {"job": job})
        report = {
            "load_avg": os.getloadavg(),
            "ray_head_start_s": round(head.started, 1),
            "trials": args.trials,
            "replies_per_job": args.replies,
        }
        for measure in ("start", "message"):
            local = statistics.median(results["local"][measure])
            ray = statistics.median(results["ray"][measure])
            report[measure] = {
                "local_median_ms": ms(local),
                "ray_median_ms": ms(ray),
                "ray_over_local": round(ray / local, 2),
                "local_ms": [ms(x) for x in results["local"][measure]],
                "ray_ms": [ms(x) for x in results["ray"][measure]],
            }
        print(json.dumps(report, indent=2))
    finally:
        try:
            lab.close()
        finally:
            head.stop()


if __name__ == "__main__":
    main()
