#!/usr/bin/env python3
"""How fast a run that cannot start says why: `roost run` -> visible failure (no API key),
against `roost run` -> the first model request with a model configured.

    .venv/bin/python benchmarks/failure_bench.py [--trials 5]

Two isolated roosts (kit.lab.Lab, the real pi, bytecode cached like an installed
package), each with its roostd started and warmed by one job first:

  no_key      a fresh pi agent dir: no models.json, no settings, no API key. Measured from
              the start of the `roost run "hello"` process to `roost wait JOB` (started
              right after `roost run` returns) exiting with `failed` — the moment a person
              sees the failure and its reason (`roost ls --json` shows it then too).
  configured  the FakeLLM as the only model. Measured from the start of `roost run` to the
              FakeLLM receiving the job's first model request (its `Request.t`).

The trials interleave the two (trial i runs both, alternating which goes first), so load from
elsewhere hits them alike; read the medians. Times are ms of `time.monotonic()`, which the
FakeLLM in this process shares. Output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from kit.lab import Lab  # noqa: E402
from kit.testpi import require_pi  # noqa: E402
from overhead_bench import load_average, pi_label, summary  # noqa: E402

from roost.fakellm import first_user_contains, text  # noqa: E402

SETTINGS = {"reapAfterSeconds": 3600}


def roost(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roost.cli.main", *args],
        env=lab.env,
        cwd=lab.work,
        capture_output=True,
        text=True,
        timeout=120,
    )


def no_key_trial(lab: Lab, i: int) -> dict[str, Any]:
    t0 = time.monotonic()
    run = roost(lab, "run", f"hello {i}")
    t_run = time.monotonic()
    job = run.stdout.strip()
    wait = roost(lab, "wait", job, "--timeout", "60")
    t_seen = time.monotonic()
    row = next(r for r in json.loads(roost(lab, "ls", "--json").stdout) if r["id"] == job)
    assert wait.stdout.strip() == "failed" and row["state"] == "failed", (wait, row)
    assert "No API key found" in row["summary"] and "fix:" in row["summary"], row
    return {"run_ms": (t_run - t0) * 1000, "failure_visible_ms": (t_seen - t0) * 1000}


def configured_trial(lab: Lab, i: int) -> dict[str, Any]:
    marker = f"BENCH-CFG-{i}"
    lab.llm.add(first_user_contains(marker), text("hi"))
    t0 = time.monotonic()
    run = roost(lab, "run", f"{marker} hello")
    t_run = time.monotonic()
    request = lab.llm.wait_for_request(first_user_contains(marker), timeout=60)
    roost(lab, "wait", run.stdout.strip(), "--timeout", "60")
    return {"run_ms": (t_run - t0) * 1000, "first_request_ms": (request.t - t0) * 1000}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args(argv)
    require_pi()
    started = time.monotonic()
    out: dict[str, Any] = {
        "bench": "failure",
        "pi": pi_label(),
        "cpus": os.cpu_count(),
        "loadavg_before": load_average(),
    }
    rows: dict[str, list[dict[str, Any]]] = {"no_key": [], "configured": []}
    with (
        Lab(settings=SETTINGS, prefix="roost-bench-") as bare,
        Lab(llm=True, settings=SETTINGS, prefix="roost-bench-") as modelled,
    ):
        for lab in (bare, modelled):
            lab.env.pop("PYTHONUNBUFFERED", None)
            lab.use_bytecode_cache()
        try:
            first = {
                "no_key_cold": no_key_trial(bare, 999),  # starts roostd too
                "configured_cold": configured_trial(modelled, 999),
            }
            for i in range(args.trials):
                order = ("no_key", "configured") if i % 2 == 0 else ("configured", "no_key")
                for name in order:
                    rows[name].append(
                        no_key_trial(bare, i) if name == "no_key" else configured_trial(modelled, i)
                    )
        finally:
            for lab in (bare, modelled):
                lab.shutdown()

    def col(name: str, key: str) -> list[float]:
        return [r[key] for r in rows[name]]

    out.update(
        {
            "elapsed_s": round(time.monotonic() - started, 1),
            "loadavg_after": load_average(),
            "trials": args.trials,
            "cold_first_trial_ms (roostd started by it)": {
                "no_key run -> failure visible": round(first["no_key_cold"]["failure_visible_ms"], 1),
                "configured run -> first model request": round(
                    first["configured_cold"]["first_request_ms"], 1
                ),
            },
            "no_key: run -> failure visible (roost wait returns failed)": summary(
                col("no_key", "failure_visible_ms")
            ),
            "no_key: the roost run command": summary(col("no_key", "run_ms")),
            "configured: run -> first model request": summary(col("configured", "first_request_ms")),
            "configured: the roost run command": summary(col("configured", "run_ms")),
        }
    )
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
