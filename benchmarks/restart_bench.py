#!/usr/bin/env python3
"""What an idle job's restart costs: reply -> next model request, warm against cold, by
session size; and what a live idle job holds (its worker and pi, RSS).

    .venv/bin/python benchmarks/restart_bench.py [--trials 5] [--sizes 10,500,2000]

The real pi (the pinned one, or ROOST_PI / ROOST_NODE) against the scripted model in this
process, in an isolated Lab with the stock roostd and `warmSeconds` short (--warm, 4 s).
One job per size: its first run makes the session, then (reaped, so no pi holds it) short
turns are appended to its file until it has that many entries (a user message and the
model's answer each, as pi writes them), and one unmeasured reply loads it once.

Each trial, for each size (in a rotating order): once the window has stopped the job's
worker and pi (`reaped`), a reply that starts them again (`cold`: a worker and a pi boot
and pi reads the session), then a reply right after that run settled (`warm`: the job is
done and its worker and pi are alive). t0 is just before the `reply` request (roost.wire.client); the finish
line is the model request carrying the reply (FakeLLM's receipt time). One clock
(time.monotonic). Read medians; the machine may be shared (the load average is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kit.lab import Lab  # noqa: E402
from kit.procs import wait_until  # noqa: E402

from roost.fakellm.matchers import last_user_contains  # noqa: E402
from roost.host import paths  # noqa: E402

TIMEOUT = 120.0


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def show(client: Any, job: str) -> dict[str, Any]:
    return client.call("show", {"job": job})["job"]


def settle(client: Any, job: str) -> str:
    result = client.call("wait", {"job": job, "timeout": TIMEOUT}, TIMEOUT + 30)
    assert result["settled"], result
    return str(result["row"]["state"])


def grow_session(session: Path, entries: int) -> int:
    """Append short turns (a user message, then an answer shaped like the model's last one)
    until the file holds `entries` entries (header aside); how many it holds."""
    lines = session.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    answer = next(
        r for r in reversed(records) if r.get("type") == "message" and r["message"].get("role") == "assistant"
    )
    parent = records[-1]["id"]
    count = len(records) - 1
    out = []
    turn = 0
    now = time.time()
    while count < entries:  # (one over when the first run left an odd count)
        turn += 1
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now))
        user_id, answer_id = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
        out.append(
            {
                "type": "message",
                "id": user_id,
                "parentId": parent,
                "timestamp": stamp,
                "message": {"role": "user", "content": f"short turn {turn}", "timestamp": int(now * 1000)},
            }
        )
        message = dict(
            answer["message"], content=[{"type": "text", "text": f"ok {turn}"}], timestamp=int(now * 1000)
        )
        out.append(
            {"type": "message", "id": answer_id, "parentId": user_id, "timestamp": stamp, "message": message}
        )
        parent = answer_id
        count += 2
    with session.open("a") as handle:
        handle.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in out)
    return count


def live_rss(worker_pid: int) -> float:
    """RSS (MB) of a worker and everything under it (its pi, node)."""
    proc = psutil.Process(worker_pid)
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        total += child.memory_info().rss
    return round(total / 2**20, 1)


def timed_reply(lab: Lab, client: Any, job: str, text: str) -> float:
    since = len(lab.llm.requests)
    t0 = time.monotonic()
    client.call("reply", {"job": job, "text": text})
    request = lab.llm.wait_for_request(last_user_contains(text), TIMEOUT, since=since)
    elapsed = request.t - t0
    settle(client, job)
    return elapsed


def wait_state(client: Any, job: str, state: str) -> dict[str, Any]:
    row: dict[str, Any] = wait_until(
        lambda: (r := show(client, job))["state"] == state and r, TIMEOUT, what=f"job {job} {state}"
    )
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--sizes", default="10,500,2000")
    ap.add_argument("--warm", type=float, default=4.0, help="warmSeconds for the run")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    lab = Lab(
        llm=True,
        settings={"warmSeconds": args.warm, "maxLivePi": 100},
        keep=args.keep,
        prefix="roost-bench-",
        hold_timeout=300.0,
    )
    out: dict[str, Any] = {
        "bench": "restart",
        "trials": args.trials,
        "warmSeconds": args.warm,
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        lab.env.pop("PYTHONUNBUFFERED", None)
        lab.use_bytecode_cache()
        lab.activate()
        paths.ensure_dir(lab.roost_home)
        lab.start_daemon()
        client = lab.client(TIMEOUT)
        jobs: dict[int, str] = {}
        entries: dict[int, int] = {}
        rss: dict[int, list[float]] = {n: [] for n in sizes}
        for n in sizes:
            jobs[n] = lab.run(f"RB{n} first")
            settle(client, jobs[n])
        for n in sizes:
            row = wait_state(client, jobs[n], "reaped")
            entries[n] = grow_session(Path(row["session"]), n)
        for n in sizes:  # one unmeasured cold start reads each grown session once
            timed_reply(lab, client, jobs[n], f"RB{n} load")
        results: dict[int, dict[str, list[float]]] = {n: {"warm": [], "cold": []} for n in sizes}
        for trial in range(args.trials):
            order = sizes[trial % len(sizes) :] + sizes[: trial % len(sizes)]
            for n in order:
                wait_state(client, jobs[n], "reaped")
                results[n]["cold"].append(timed_reply(lab, client, jobs[n], f"RB{n} c{trial}"))
                row = show(client, jobs[n])  # the run just settled: warm for its window
                assert row["state"] == "done" and row["worker"]["pid"], row
                rss[n].append(live_rss(row["worker"]["pid"]))
                results[n]["warm"].append(timed_reply(lab, client, jobs[n], f"RB{n} w{trial}"))
        out["sizes"] = {}
        for n in sizes:
            warm, cold = results[n]["warm"], results[n]["cold"]
            out["sizes"][str(n)] = {
                "entries": entries[n],
                "entries_after": len(Path(show(client, jobs[n])["session"]).read_text().splitlines()) - 1,
                "session_kb": round(Path(show(client, jobs[n])["session"]).stat().st_size / 1024),
                "warm_ms_median": ms(statistics.median(warm)),
                "cold_ms_median": ms(statistics.median(cold)),
                "cold_minus_warm_ms": ms(statistics.median(cold) - statistics.median(warm)),
                "warm_ms": [ms(x) for x in warm],
                "cold_ms": [ms(x) for x in cold],
                "live_idle_rss_mb_median": statistics.median(rss[n]),
            }
        out["load_after"] = [round(x, 2) for x in os.getloadavg()]
        out["cpus"] = os.cpu_count()
        out["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
        print(json.dumps(out, indent=2))
        return 0
    finally:
        lab.close()


if __name__ == "__main__":
    sys.exit(main())
