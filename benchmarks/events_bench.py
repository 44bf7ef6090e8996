#!/usr/bin/env python3
"""What the event log and hooks cost the delivery path: roost_send -> receiver woken.

    .venv/bin/python benchmarks/events_bench.py [--sends 30]

One isolated roost (overhead_bench.bench_lab and agents_bench's Bench: FakeLLM here, probe
roostd whose workers write phase marks). A foreground peer sends to a live idle job, as in
agents_bench's send measurement, in three variants *interleaved* in the same run (each
trial rewrites the user-level roost.json, which roostd re-reads by mtime):

  off     `eventLog: false`, no hooks: nothing appended to events.jsonl
  log     the default: each event is one os.write to events.jsonl (no fsync)
  hooks   the log plus a 5 s hook (`sleep 5`) on every event type: the hooks are busy
          (and their backlog full) for the whole run

For each: send -> the receiver's worker woken by inotify (`inotify`), and send -> the
receiver's next model request (`model_request`), p50/p99 in ms. Output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from agents_bench import SETTINGS, Bench, send_trial, summary99  # noqa: E402
from kit.lab import Lab  # noqa: E402
from overhead_bench import bench_lab, load_average, pi_label  # noqa: E402

from roost.events.writer import EVENT_TYPES  # noqa: E402

VARIANTS = ("off", "log", "hooks")


def configure(lab: Lab, variant: str) -> None:
    path = lab.agent_dir / "roost.json"
    data = json.loads(path.read_text())
    data["eventLog"] = variant != "off"
    data["hooks"] = {k: ["sleep", "5"] for k in EVENT_TYPES} if variant == "hooks" else {}
    before = path.stat().st_mtime_ns
    path.write_text(json.dumps(data))
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sends", type=int, default=30, help="trials per variant")
    args = ap.parse_args(argv)
    started = time.monotonic()
    out: dict[str, Any] = {
        "bench": "events",
        "pi": pi_label(),
        "cpus": os.cpu_count(),
        "loadavg_before": load_average(),
    }
    rows: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    with bench_lab(roost_settings=SETTINGS) as lab:
        b = Bench(lab)
        try:
            receiver = b.spawn("RECEIVER start", "receiver")
            b.settled(receiver)
            for i in range(3):  # warm-up, not counted
                send_trial(b, receiver, 900 + i)
            for i in range(args.sends):
                order = VARIANTS[i % 3 :] + VARIANTS[: i % 3]
                for variant in order:
                    configure(lab, variant)
                    rows[variant].append(send_trial(b, receiver, i * 3 + VARIANTS.index(variant)))
            log_lines = len((lab.roost_home / "events.jsonl").read_bytes().splitlines())
            hooks_logged = (lab.roost_home / "roostd.log").read_text().count("roostd.hooks")
        finally:
            b.close()

    def col(variant: str, key: str) -> list[float]:
        return [r[key] for r in rows[variant] if r.get(key) is not None]

    out.update(
        {
            "elapsed_s": round(time.monotonic() - started, 1),
            "loadavg_after": load_average(),
            "sends_per_variant": args.sends,
            "events_logged": log_lines,
            "hook_log_lines": hooks_logged,
            "send_ms": {v: {k: summary99(col(v, k)) for k in ("inotify", "model_request")} for v in VARIANTS},
        }
    )
    med = {v: {k: out["send_ms"][v][k].get("median") for k in ("inotify", "model_request")} for v in VARIANTS}
    out["differences_ms (medians)"] = {
        "send -> woken: log - off": round(med["log"]["inotify"] - med["off"]["inotify"], 2),
        "send -> model request: log - off": round(
            med["log"]["model_request"] - med["off"]["model_request"], 2
        ),
        "send -> woken: hooks - log": round(med["hooks"]["inotify"] - med["log"]["inotify"], 2),
        "send -> model request: hooks - log": round(
            med["hooks"]["model_request"] - med["log"]["model_request"], 2
        ),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
