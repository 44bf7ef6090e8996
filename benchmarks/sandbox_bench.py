#!/usr/bin/env python3
"""What `roost run --sandbox` adds to a bash call: its round trip under bubblewrap over an
unsandboxed one, p50 of `--calls` calls each, in one run (target: at most +25 ms).

    .venv/bin/python benchmarks/sandbox_bench.py [--calls 30] [--rounds 3]

The real pi with roost's extension, driven over RPC, against a FakeLLM in this process
that answers every request with one more bash call (`true`) until a round's calls are
made. Two pis: `plain` (roost's extension, no sandbox) and `sandboxed` (the same plus
roost/extension/sandbox.ts and the worker's `ROOST_SANDBOX` plan, roost.sandbox.plan with
the real bwrap, no network), each started as a job's worker starts it. A
call's round trip is the time between pi's `tool_execution_start` and
`tool_execution_end` events for it, as this process reads them from pi's stdout. The
rounds alternate which pi goes first, so load from elsewhere hits both alike.

Output: one JSON object: per variant the p50, p90 and all samples (ms), `added_ms` =
p50(sandboxed) - p50(plain), `target_ms`, `ok`, the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Mapping
from typing import Any

from kit.lab import Lab
from kit.testpi import PiRpc

from roost import sandbox
from roost.fakellm import predicate, text, tool_call
from roost.fakellm import requests as rq
from roost.host import paths

TARGET_MS = 25.0
TIMEOUT = 120.0


def calls_since_prompt(request: Mapping[str, Any]) -> int:
    messages = rq.messages(request)
    count = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        count += message.get("role") == "tool"
    return count


def script(lab: Lab, token: str, calls: int) -> None:
    """`token`'s round: one bash call per request until `calls` were made, then text."""

    def mine(r: Mapping[str, Any]) -> bool:
        return token in rq.last_user_text(r)

    lab.llm.add(
        predicate(lambda r: mine(r) and calls_since_prompt(r) < calls, token),
        tool_call("bash", {"command": "true"}),
    )
    lab.llm.add(predicate(lambda r: mine(r) and calls_since_prompt(r) >= calls, token), text("done"))


def round_trips(pi: PiRpc, since: int) -> list[float]:
    starts: dict[str, float] = {}
    out: list[float] = []
    for event, when in zip(pi.log[since:], pi.times[since:], strict=False):
        kind = event.get("type")
        if kind == "tool_execution_start" and event.get("toolName") == "bash":
            starts[str(event.get("toolCallId"))] = when
        elif kind == "tool_execution_end" and str(event.get("toolCallId")) in starts:
            if event.get("isError"):
                raise RuntimeError(f"a bash call failed: {json.dumps(event)[:500]}")
            out.append((when - starts.pop(str(event.get("toolCallId")))) * 1000)
    return out


def summary(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p90_ms": round(ordered[int(len(ordered) * 0.9) - 1], 2),
        "samples_ms": [round(s, 2) for s in samples],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="bash calls per variant")
    parser.add_argument("--rounds", type=int, default=3, help="rounds the calls are split in")
    args = parser.parse_args(argv)
    bwrap = sandbox.check()
    per_round = max(1, args.calls // args.rounds)
    samples: dict[str, list[float]] = {"plain": [], "sandboxed": []}
    with Lab(llm=True, prefix="roost-sbxb-") as lab:
        plan = sandbox.plan(
            bwrap,
            str(lab.work),
            [],
            "none",
            home=str(lab.home),
            roost_home=str(lab.roost_home),
            agent_dir=str(lab.agent_dir),
        )
        envs = {"plain": dict(lab.env), "sandboxed": {**lab.env, sandbox.ENV_VAR: plan.to_json()}}
        boxed = paths.extension_path().parent / "sandbox.ts"  # as the worker loads it
        pis = {
            name: PiRpc(
                cwd=lab.work,
                env=env,
                extensions=[*([boxed] if name == "sandboxed" else []), paths.extension_path()],
            )
            for name, env in envs.items()
        }
        try:
            for pi in pis.values():
                pi.send({"type": "get_state"}, timeout=TIMEOUT)
            for r in range(args.rounds):
                order = list(pis) if r % 2 == 0 else list(reversed(pis))
                for name in order:
                    token = f"BENCH-{name}-{r}"
                    script(lab, token, per_round)
                    since = pis[name].mark()
                    pis[name].run_prompt(f"{token} go", timeout=TIMEOUT)
                    samples[name] += round_trips(pis[name], since)
        finally:
            for pi in pis.values():
                pi.close()
    result: dict[str, Any] = {name: summary(values) for name, values in samples.items()}
    added = result["sandboxed"]["p50_ms"] - result["plain"]["p50_ms"]
    result.update(
        added_ms=round(added, 2),
        target_ms=TARGET_MS,
        ok=added <= TARGET_MS,
        calls=len(samples["sandboxed"]),
        bwrap=bwrap,
        load=[round(x, 2) for x in os.getloadavg()],
    )
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
