#!/usr/bin/env python3
"""What usage accounting and budgets add to the model path (issue 12), in one run.

    .venv/bin/python benchmarks/usage_bench.py [--trials 6] [--steps 4]

Two variants run interleaved against one roostd and one FakeLLM (priced in models.json):
  on   the stock worker: every assistant message counted, reported, checked against the
       job's budget (each job gets `--budget 1000`, so the check runs and never trips);
  off  the same worker with roost.usage's hooks replaced by no-ops (no session-file sum,
       no per-message count, no usage in the worker's reports, no settle-time
       get_session_stats): the baseline.
roostd runs through a thin probe (this file, `--daemon-probe`) that starts each pi worker
as `python -c "import usage_bench" --worker-probe JOB`; the probe turns the hooks off for
jobs whose name starts with `off-`, then runs the stock `roost/worker/__main__.py`.

Measured (ms, from `time.monotonic()`; the finish line is the FakeLLM's receipt of a
model request, `Request.t`):
  spawn_ms  just before the `run` request -> the job's first model request;
  step_ms   one model reply (a tool call of `true`) -> the next model request, within a
            run: the path every assistant message's accounting sits on (median per job);
  reply_ms  just before a `reply` request to the idle job -> its next model request.
  micro     the added code alone, in this process (µs a call): per assistant message
            (count, snapshot, budget check), roostd's share of a worker update, and the
            session-file sum at a worker's start (empty, and 500 assistant messages).
Output: one JSON object with per-variant medians, `diff_ms` (on - off) and `micro`.
"""

from __future__ import annotations

import sys
import time

if len(sys.argv) > 1 and sys.argv[1] == "--worker-probe":
    import json
    import os
    import runpy

    job_id = sys.argv[2]
    home = os.environ["ROOST_HOME"]
    with open(os.path.join(home, "jobs", job_id, "job.json"), encoding="utf-8") as handle:
        name = json.load(handle).get("name", "")
    if name.startswith("off-"):
        from roost.usage import meter
        from roost.worker.budget import BudgetGuard

        def _load(self, entries):  # type: ignore[no-untyped-def]
            self.loaded = False

        meter.Meter.load = _load  # type: ignore[method-assign]
        BudgetGuard.add_to_snapshot = lambda self, snap: None  # type: ignore[method-assign]
        BudgetGuard.on_message = lambda self, message: None  # type: ignore[method-assign]
        BudgetGuard.on_settled = lambda self, run: None  # type: ignore[method-assign]
    sys.argv = ["roost.worker", job_id]
    runpy.run_module("roost.worker", run_name="__main__", alter_sys=True)
    sys.exit(0)

if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--daemon-probe":
    import os

    from roost.supervise import workers
    from roost.supervise.daemon import main as daemon_main

    here = os.path.dirname(os.path.abspath(__file__))
    boot = f"import sys; sys.path.insert(0, {here!r}); import usage_bench"
    orig = workers.WorkerProcess.command

    def command(self):  # type: ignore[no-untyped-def]
        if self.record.kind != "pi":
            return orig(self)
        return [sys.executable, "-c", boot, "--worker-probe", self.record.id]

    workers.WorkerProcess.command = command  # type: ignore[assignment, method-assign]
    sys.exit(daemon_main())

# ---- the benchmark proper --------------------------------------------------------------------
import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
from typing import Any  # noqa: E402

from kit.lab import Lab  # noqa: E402
from kit.testpi import require_pi  # noqa: E402

from roost.fakellm import first_user_contains, text, tool_call  # noqa: E402
from roost.fakellm.requests import tool_results  # noqa: E402
from roost.host import paths  # noqa: E402
from roost.wire.client import connect  # noqa: E402

PRICES = {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


class UsageBench:
    """The scripted jobs of the benchmark, in a Lab (tests/kit) whose roostd is the probe."""

    aa = False

    def __init__(self, steps: int) -> None:
        require_pi()
        self.lab = Lab(llm=True, settings={"reapAfterSeconds": 3600}, prices=PRICES, prefix="roost-ubench-")
        self.llm, self.work, self.steps = self.lab.llm, self.lab.work, steps
        self.lab.env["ROOST_LOG_LEVEL"] = "WARNING"
        self.lab.use_bytecode_cache()  # installed-like bytecode
        self.lab.activate()
        paths.ensure_dir(self.lab.roost_home)
        self.lab.start_daemon([sys.executable, os.path.abspath(__file__), "--daemon-probe"])

        def reply(request: Any) -> Any:
            if "AGAIN" in json.dumps(request["messages"][-1]):
                return text("again")
            if len(tool_results(request)) < steps:
                return tool_call("bash", {"command": "true"}, usage=(2000, 100, 500))
            return text("done", usage=(2000, 100, 500))

        self.llm.add(first_user_contains("[ub-"), reply)

    def trial(self, variant: str, index: int) -> dict[str, Any]:
        marker = f"[ub-{variant}-{index}]"
        with connect(autostart=False) as client:
            since = len(self.llm.requests)
            t0 = time.monotonic()
            name = f"{'aa' if self.aa else variant}-{variant}-{index}"
            job = client.request("run", task=f"{marker} work", name=name, cwd=str(self.work), budget=1000.0)[
                "id"
            ]
            first = self.llm.wait_for_request(first_user_contains(marker), timeout=60, since=since)
            spawn_ms = (first.t - t0) * 1000
            client.call("wait", {"job": job, "timeout": 60}, 90)
            mine = [r for r in self.llm.requests_matching(first_user_contains(marker))]
            steps = [(b.t - a.t) * 1000 for a, b in zip(mine, mine[1:], strict=False)]
            since = len(self.llm.requests)
            t0 = time.monotonic()
            client.request("reply", job=job, text="AGAIN please")
            nxt = self.llm.wait_for_request(first_user_contains(marker), timeout=60, since=since)
            reply_ms = (nxt.t - t0) * 1000
            client.call("wait", {"job": job, "timeout": 60}, 90)
            if variant == "on" or self.aa:  # the accounting ran: every request counted
                deadline = time.monotonic() + 10
                while True:
                    usage = client.request("show", job=job)["job"].get("usage") or {}
                    if usage.get("requests") == self.steps + 2:
                        break
                    assert time.monotonic() < deadline, usage
                    time.sleep(0.05)
        return {"spawn_ms": spawn_ms, "step_ms": statistics.median(steps), "reply_ms": reply_ms}

    def close(self) -> None:
        self.lab.close()


def micro() -> dict[str, float]:
    """The added code itself, in this process (µs per call, best of 5 repeats): end-to-end
    medians move by tens of ms with pi's start-up on a shared machine; these do not."""
    import timeit

    from roost.usage.account import Usage
    from roost.usage.budget import Limits
    from roost.usage.meter import Meter

    def assistant(i: int) -> dict[str, Any]:
        return {
            "type": "message",
            "timestamp": "2026-12-01T00:00:00Z",
            "message": {
                "role": "assistant",
                "provider": "fake",
                "model": "fake-model",
                "stopReason": "toolUse",
                "content": [{"type": "text", "text": "x" * 200}],
                "usage": {
                    "input": 2000 + i,
                    "output": 100,
                    "cacheRead": 500,
                    "cacheWrite": 0,
                    "totalTokens": 2600,
                    "cost": {"total": 0.0075},
                },
            },
        }

    session = [assistant(i) for i in range(500)]  # a long session read at a worker start
    message = assistant(0)["message"]
    meter = Meter(Limits(budget=1000.0, max_turns=10_000))
    meter.load([])

    def per_message() -> None:  # BudgetGuard.on_message + the usage part of the snapshot
        meter.on_message(message)
        meter.snapshot()
        meter.blocked  # noqa: B018 - the pump's check

    def roostd_side() -> None:  # worker_update's usage + the row's figures (one job)
        Usage.from_json(meter.snapshot()).to_json()

    def best(fn: Any, number: int) -> float:
        return round(min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6, 2)

    return {
        "per_message_us": best(per_message, 20_000),
        "roostd_update_us": best(roostd_side, 20_000),
        "load_empty_us": best(lambda: Meter(Limits()).load([]), 20_000),
        "load_500_entries_us": best(lambda: Meter(Limits()).load(session), 200),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument(
        "--aa", action="store_true", help="A/A check: both variants run the stock worker (diff = noise)"
    )
    args = parser.parse_args()
    lab = UsageBench(args.steps)
    lab.aa = args.aa
    results: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    try:
        lab.trial("on", -1)  # warm-up (bytecode cache, pi's first start)
        lab.trial("off", -1)
        for i in range(args.trials):
            for variant in ("on", "off") if i % 2 == 0 else ("off", "on"):
                results[variant].append(lab.trial(variant, i))
    finally:
        lab.close()
    out: dict[str, Any] = {
        "trials": args.trials,
        "steps": args.steps,
        "aa": args.aa,
        "spawn_raw": {v: [round(r["spawn_ms"]) for r in rows] for v, rows in results.items()},
    }
    for variant, rows in results.items():
        out[variant] = {key: median([r[key] for r in rows]) for key in ("spawn_ms", "step_ms", "reply_ms")}
    out["diff_ms"] = {
        key: round(out["on"][key] - out["off"][key], 2) for key in ("spawn_ms", "step_ms", "reply_ms")
    }
    out["micro"] = micro()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
