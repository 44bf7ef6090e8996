#!/usr/bin/env python3
"""Load: many real-pi jobs and a steady stream of agent messages between them.

    .venv/bin/python benchmarks/load_bench.py [--jobs 32] [--rate 200] [--duration 180]
                                              [--baseline 60] [--idle 30] [--busy 8]

One isolated roost (overhead_bench.bench_lab with the *stock* daemon and workers: no probes, so
the CPU figures are roost's own; a FakeLLM in this process is the only model). This
process is a foreground peer, as in agents_bench: it holds a session writer lock,
registers with `peer_register` and spawns the jobs, then calls the `send` op (what a pi's
`roost_send` tool call becomes in roostd) at a fixed rate to a random job. Each message
carries a tag (`LOAD-000123`); its latency is t0 (just before the `send` request) -> the
FakeLLM's receipt (`Request.t`, the same monotonic clock) of the receiver's first model
request containing the tag.

Phases, in one run:

1. baseline: 1 job (idle between messages), `--rate` messages a minute to it for
   `--baseline` seconds;
2. ramp: the other jobs are spawned (in batches, each settled before the next);
3. load: `--jobs` jobs, of which `--busy` are kept in slow scripted tools (their model
   answers every request with bash `sleep 2` while the phase lasts: a job always in the
   middle of a tool), the rest idle between messages; `--rate` messages a minute to random
   jobs (busy ones included) for `--duration` seconds;
4. idle: the busy jobs are let go (their model answers text), everything settles, then no
   traffic for `--idle` seconds.

CPU (user+sys from /proc via psutil, percent of one core over each phase's window) and RSS
of roostd, the workers (roostd's children) and the pis (the workers' descendants); the
latency p50/p99 of messages to idle receivers in each phase, and separately of messages to
busy receivers (they wait for the running tool: up to 2 s). Targets: p99(load) <= 3 x
p99(baseline), roostd < 5 % of a core under load; idle: CPU of roostd and the workers.

Output: one JSON object on stdout (see benchmarks/README.md); progress on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from agents_bench import SETTINGS, Bench, summary99  # noqa: E402
from overhead_bench import bench_lab, load_average, ms, percentile, pi_label, wait_settled  # noqa: E402

from roost.fakellm import predicate, text, tool_call  # noqa: E402
from roost.fakellm.requests import first_user_text, message_text  # noqa: E402

TAG = re.compile(r"LOAD-\d{6}")
BUSY_MARK = "BUSYJOB"
SLEEP = "sleep 2"


def log(*a: Any) -> None:
    print(f"[load_bench {time.strftime('%H:%M:%S')}]", *a, file=sys.stderr, flush=True)


# ---- processes and CPU -------------------------------------------------------------------------
class Procs:
    """roostd, its workers and their pis, as psutil.Process objects (created once per
    snapshot; a pid is only trusted together with its create time)."""

    def __init__(self, daemon_pid: int) -> None:
        self.daemon = psutil.Process(daemon_pid)

    def groups(self) -> dict[str, list[psutil.Process]]:
        workers = [p for p in self.daemon.children() if "python" in _name(p)]
        pis: list[psutil.Process] = []
        for w in workers:
            with contextlib.suppress(psutil.Error):
                pis.extend(c for c in w.children(recursive=True))
        return {"roostd": [self.daemon], "workers": workers, "pi": pis}

    def all(self) -> list[psutil.Process]:
        return [p for ps in self.groups().values() for p in ps]


def _name(p: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(p.cmdline()[:3])
    return ""


def _cpu_s(p: psutil.Process) -> float | None:
    try:
        t = p.cpu_times()
        return t.user + t.system
    except psutil.Error:
        return None


class CpuWindow:
    """CPU used by each group between start() and stop(), as % of one core; RSS at stop()."""

    def __init__(self, procs: Procs) -> None:
        self.procs = procs

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.before = {
            g: {(p.pid, p.create_time()): (p, _cpu_s(p)) for p in ps} for g, ps in self.procs.groups().items()
        }

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self.t0
        out: dict[str, Any] = {"window_s": round(wall, 1)}
        now = self.procs.groups()
        for g, ps in now.items():
            seen = self.before.get(g, {})
            used, rss, counted, per = 0.0, 0, 0, []
            for p in ps:
                with contextlib.suppress(psutil.Error):
                    key = (p.pid, p.create_time())
                    c1 = _cpu_s(p)
                    # A process born during the window counts from its birth.
                    c0 = seen[key][1] if key in seen else 0.0
                    if c1 is None or c0 is None:
                        continue
                    used += c1 - c0
                    per.append(100.0 * (c1 - c0) / wall)
                    rss += p.memory_info().rss
                    counted += 1
            out[g] = {
                "processes": counted,
                "cpu_pct_of_core": round(100.0 * used / wall, 2),
                "rss_mib": round(rss / 2**20, 1),
            }
            if g != "roostd" and per:
                out[g]["cpu_pct_per_process_max"] = round(max(per), 2)
                out[g]["rss_mib_per_process_mean"] = round(rss / 2**20 / counted, 1)
        return out


def system_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


# ---- traffic -----------------------------------------------------------------------------------
class Sender:
    """Sends `rate` messages a minute, each to a random job of `targets`, for `duration` s."""

    def __init__(self, b: Bench, rng: random.Random, counter: list[int]) -> None:
        self.b, self.rng, self.counter = b, rng, counter

    def run(self, targets: list[str], busy: set[str], rate: float, duration: float) -> list[dict[str, Any]]:
        interval = 60.0 / rate
        sent: list[dict[str, Any]] = []
        t_end = time.monotonic() + duration
        t_next = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= t_end:
                break
            if now < t_next:
                time.sleep(t_next - now)
            to = self.rng.choice(targets)
            self.counter[0] += 1
            tag = f"LOAD-{self.counter[0]:06d}"
            t0 = time.monotonic()
            try:
                res = self.b.fg.request("send", to=to, message=f"{tag} from the load bench")
                status = res.get("status")
            except Exception as exc:  # a refusal is a result, not a crash
                status = f"error: {exc}"
            t1 = time.monotonic()
            sent.append(
                {"tag": tag, "to": to, "busy": to in busy, "t0": t0, "send_ms": ms(t1 - t0), "status": status}
            )
            # A fixed schedule; a late send does not cause a burst to catch up.
            t_next = max(t_next + interval, time.monotonic() - interval)
        return sent


def first_seen(requests: list[Any]) -> dict[str, float]:
    """tag -> the receipt time of the first model request with the tag among its new
    messages (those after the request's last assistant message)."""
    out: dict[str, float] = {}
    for req in requests:
        msgs = req.get("messages") or []
        k = len(msgs)
        while k > 0 and msgs[k - 1].get("role") != "assistant":
            k -= 1
        for m in msgs[k:]:
            for tag in TAG.findall(message_text(m)):
                out.setdefault(tag, req.t)
    return out


def latencies(b: Bench, sent: list[dict[str, Any]], since: int, wait_s: float) -> dict[str, Any]:
    """Match sends to model requests; waits up to `wait_s` for the last deliveries."""
    deadline = time.monotonic() + wait_s
    while True:
        seen = first_seen(b.llm.requests[since:])
        missing = [s for s in sent if s["tag"] not in seen]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for s in sent:
        t = seen.get(s["tag"])
        s["latency_ms"] = ms(t - s["t0"]) if t is not None else None
    idle = [s["latency_ms"] for s in sent if not s["busy"] and s["latency_ms"] is not None]
    busy = [s["latency_ms"] for s in sent if s["busy"] and s["latency_ms"] is not None]
    out = {
        "sent": len(sent),
        "statuses": dict(sorted(_count(str(s["status"]) for s in sent).items())),
        "not_delivered": len(missing),
        "to_idle_receivers_ms": _lat(idle),
        "send_op_ms": _lat([s["send_ms"] for s in sent]),
    }
    if busy:
        out["to_busy_receivers_ms"] = _lat(busy)
    return out


def _count(xs: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def _lat(xs: list[float]) -> dict[str, Any]:
    out = summary99(xs)
    if xs:
        out["p50"] = percentile(xs, 0.5)
    return out


def achieved_rate(sent: list[dict[str, Any]]) -> float | None:
    if len(sent) < 2:
        return None
    return round(60.0 * (len(sent) - 1) / (sent[-1]["t0"] - sent[0]["t0"]), 1)


# ---- the run -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--busy", type=int, default=None, help="jobs kept in slow tools (jobs/4)")
    ap.add_argument("--rate", type=float, default=200.0, help="messages a minute")
    ap.add_argument("--duration", type=float, default=180.0, help="load phase, seconds")
    ap.add_argument("--baseline", type=float, default=60.0, help="1-job phase, seconds")
    ap.add_argument("--idle", type=float, default=30.0, help="idle phase, seconds")
    ap.add_argument("--batch", type=int, default=4, help="jobs spawned at once in the ramp")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args(argv)
    busy_n = args.jobs // 4 if args.busy is None else args.busy
    if not 1 <= args.jobs <= 60 or not 0 <= busy_n < args.jobs:
        ap.error("need 1 <= --jobs <= 60 and 0 <= --busy < --jobs")

    # SIGTERM/SIGHUP unwind like ^C, so the finally blocks below clean up.
    def _stop(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _stop)

    started = time.monotonic()
    out: dict[str, Any] = {
        "bench": "load",
        "pi": pi_label(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "config": {
            "jobs": args.jobs,
            "busy_jobs": busy_n,
            "rate_per_min": args.rate,
            "duration_s": args.duration,
            "baseline_s": args.baseline,
            "idle_s": args.idle,
            "busy_tool": f"bash `{SLEEP}` in a loop",
            "sender": "this process as a foreground peer, `send` op",
        },
        "loadavg_before": load_average(),
    }
    # Every job may run at once (the queue's maxRunning included): this measures messaging
    # under load, not the queue (benchmarks/queue_bench.py does).
    settings = dict(
        SETTINGS,
        agentMaxChildren=args.jobs + 8,
        maxRunning=args.jobs + 8,
        agentMaxTreeSessions=args.jobs + 8,
        agentMaxSpawned=args.jobs + 8,
    )
    rng = random.Random(args.seed)
    counter = [0]
    busy_on = threading.Event()
    spawned: list[psutil.Process] = []
    lab = bench_lab(probe=False, roost_settings=settings, keep=args.keep)
    b: Bench | None = None
    try:
        llm = lab.llm
        # A busy job's model answers every request with another slow tool while busy_on.
        llm.add(
            predicate(
                lambda r: busy_on.is_set() and BUSY_MARK in first_user_text(r), "a busy job while busy"
            ),
            tool_call("bash", {"command": SLEEP}),
        )
        llm.set_default(text("ok"))
        b = Bench(lab)
        procs = Procs(lab.daemon.pid)
        cpu = CpuWindow(procs)
        sender = Sender(b, rng, counter)

        def phase(name: str, targets: list[str], busy: set[str], seconds: float) -> dict[str, Any]:
            log(f"{name}: {len(targets)} jobs, {args.rate}/min for {seconds:.0f} s")
            since = len(llm.requests)
            la0, (s0, tot0) = load_average(), system_cpu()
            cpu.start()
            sent = sender.run(targets, busy, args.rate, seconds)
            res: dict[str, Any] = {"cpu": cpu.stop()}
            s1, tot1 = system_cpu()
            res["machine_busy_pct_of_all_cpus"] = round(100.0 * (s1 - s0) / (tot1 - tot0), 1)
            res["loadavg_start/end"] = [la0, load_average()]
            res["achieved_rate_per_min"] = achieved_rate(sent)
            res.update(latencies(b, sent, since, wait_s=30.0))
            lat = res["to_idle_receivers_ms"]
            log(
                f"{name}: p50 {lat.get('p50')} ms, p99 {lat.get('p99')} ms, "
                f"roostd {res['cpu']['roostd']['cpu_pct_of_core']} %"
            )
            return res

        # 1. baseline: one job
        first = b.spawn("LOADJOB-00 idle start", "load-00")
        wait_settled(b.c, first)
        spawned.extend(procs.all())
        out["baseline_1_job"] = phase("baseline", [first], set(), args.baseline)
        wait_settled(b.c, first)

        # 2. ramp
        jobs, busy = [first], set()
        t_ramp = time.monotonic()
        for start in range(1, args.jobs, args.batch):
            batch = []
            for i in range(start, min(args.jobs, start + args.batch)):
                is_busy = i > args.jobs - 1 - busy_n
                word = BUSY_MARK if is_busy else "idle"
                job = b.spawn(f"LOADJOB-{i:02d} {word} start", f"load-{i:02d}")
                batch.append(job)
                if is_busy:
                    busy.add(job)
            for job in batch:
                wait_settled(b.c, job)
            jobs.extend(batch)
            spawned.extend(p for p in procs.all() if p not in spawned)
            log(f"ramp: {len(jobs)} jobs up")
        out["ramp_s"] = round(time.monotonic() - t_ramp, 1)

        # 3. load: the busy jobs enter their tool loop, then the traffic starts
        busy_on.set()
        for job in sorted(busy):
            b.fg.request("send", to=job, message="KICK: start working")
        time.sleep(3)
        spawned.extend(p for p in procs.all() if p not in spawned)
        out["load_n_jobs"] = phase("load", jobs, busy, args.duration)
        out["load_n_jobs"]["busy_tool_requests"] = sum(
            1 for r in llm.requests if r.rule and "busy job" in r.rule
        )

        # 4. idle: let the busy jobs go, settle everything, then measure nothing happening
        busy_on.clear()
        for job in jobs:
            wait_settled(b.c, job)
        time.sleep(2)
        log(f"idle: {args.idle:.0f} s")
        n_req = len(llm.requests)
        cpu.start()
        time.sleep(args.idle)
        out["idle"] = {
            "cpu": cpu.stop(),
            "model_requests": len(llm.requests) - n_req,
            "loadavg_end": load_average(),
        }
        out["unmatched_errors"] = llm.errors[:3]
    finally:
        log("cleaning up")
        if b is not None:
            with contextlib.suppress(Exception):
                spawned.extend(p for p in Procs(lab.daemon.pid).all() if p not in spawned)
            with contextlib.suppress(Exception):
                b.close()
        lab.shutdown()  # shutdown with jobs=True, then roostd's process group
        leftover = []
        for p in spawned:
            with contextlib.suppress(psutil.Error):
                if p.is_running():  # same pid and create time
                    leftover.append(p.pid)
                    p.kill()
        out["leftover_processes_killed"] = leftover
        lab.close()

    base = out["baseline_1_job"]["to_idle_receivers_ms"].get("p99")
    load = out["load_n_jobs"]["to_idle_receivers_ms"].get("p99")
    roostd_load = out["load_n_jobs"]["cpu"]["roostd"]["cpu_pct_of_core"]
    ratio = round(load / base, 2) if base and load else None
    idle_cpu = out["idle"]["cpu"]
    out["summary"] = {
        "p50_ms 1 job / N jobs": [
            out["baseline_1_job"]["to_idle_receivers_ms"].get("p50"),
            out["load_n_jobs"]["to_idle_receivers_ms"].get("p50"),
        ],
        "p99_ms 1 job / N jobs": [base, load],
        "p99 ratio N/1": ratio,
        "target p99 ratio <= 3": bool(ratio is not None and ratio <= 3.0),
        "roostd cpu % of a core under load": roostd_load,
        "target roostd < 5 %": roostd_load < 5.0,
        "idle cpu % of a core (roostd, workers total, pis total)": [
            idle_cpu["roostd"]["cpu_pct_of_core"],
            idle_cpu["workers"]["cpu_pct_of_core"],
            idle_cpu["pi"]["cpu_pct_of_core"],
        ],
        "idle: roostd and workers below 0.1 % of a core (no polling)": (
            idle_cpu["roostd"]["cpu_pct_of_core"] < 0.1 and idle_cpu["workers"]["cpu_pct_of_core"] < 0.1
        ),
    }
    out["elapsed_s"] = round(time.monotonic() - started, 1)
    out["loadavg_after"] = load_average()
    print(json.dumps(out, indent=2))
    for k, v in out["summary"].items():
        log(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
