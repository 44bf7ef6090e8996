#!/usr/bin/env python3
"""The CLI's own cost: wall time of whole `roost` processes against a warm roostd.

    .venv/bin/python benchmarks/cli_bench.py [--runs 15] [--no-bytecode-cache] [--keep]

An isolated temp ROOST_HOME / HOME / pi agent dir; jobs run the fake pi
(tests/fakepi/fakepi.py, no model, no network). roostd is started once and warmed up,
one job is created and settled, then every command below runs `--runs` times as a
fresh process, interleaved with the baseline (`python -c pass`) in a rotating order, so
load from elsewhere hits them alike:

    help      roost --help
    version   roost --version
    ls        roost ls                 (the table; in a pipe, as a benchmark reads it)
    ls_json   roost ls --json
    reply     roost reply JOB TEXT     (the job's run is waited for afterwards, untimed)
    run       roost run TASK           (the new job is settled and removed afterwards, untimed)
    wait      roost wait JOB --timeout 60   (the job has settled: answered at once)

each through the installed console script (`.venv/bin/roost`: roost.cli.entry, whose plain
forms of ls, ls --json, reply, run and wait skip click) and as `python -m roost.cli.main` (`click`:
always through the click group, the way every command went before the entry), and
(`request`) the same request to roostd from this process, which is roostd's share of the
wall time. `targets` prints each start-up target (README: Start-up) with its figure, the
click path's and bare Python's from the same run. Also, from -X importtime (median of `--runs`
processes): `import roost.cli.main`, click alone, and what roost.wire.client adds after
roost.cli.main; and which heavy modules each command loads (one run per command).

Output: one JSON object (see benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_DIR))

from kit.lab import Lab  # noqa: E402

from roost.job.env import caller_env  # noqa: E402

SCRIPT = Path(sys.executable).parent / "roost"  # the console script of this venv
TARGETS_MS = {"ls": 80.0, "ls_json": 60.0, "reply": 60.0, "run": 60.0, "wait": 60.0}
"""Each command's target as a whole process with a warm roostd (the console script)."""
LABELS = {
    "ls": "roost ls (the table)",
    "ls_json": "roost ls --json",
    "reply": "roost reply JOB TEXT",
    "run": "roost run TASK",
    "wait": "roost wait JOB --timeout 60 (a settled job)",
}
HEAVY = (
    "click",
    "rich",
    "textual",
    "watchdog",
    "portalocker",
    "psutil",
    "asyncio",
    "roost.mailbox",
    "roost.supervise",
    "roost.pi.transcript",
)
"""Modules the fast path must not load (a package counts with its submodules)."""
TIMEOUT = 60.0


# ---- numbers --------------------------------------------------------------------------------
def summary(values: Iterable[float]) -> dict[str, Any]:
    """median, p90 (nearest rank), min, max and n of a list of milliseconds."""
    xs = sorted(values)
    if not xs:
        return {"n": 0}
    p90 = xs[min(len(xs) - 1, max(0, round(0.9 * len(xs) + 0.5) - 1))]
    return {
        "median": round(statistics.median(xs), 2),
        "p90": round(p90, 2),
        "min": round(xs[0], 2),
        "max": round(xs[-1], 2),
        "n": len(xs),
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ---- an isolated roost ----------------------------------------------------------------------
def make_lab(*, bytecode_cache: bool, keep: bool) -> Lab:
    """A Lab whose jobs run the fake pi; roostd is started by the caller (`start_daemon`)."""
    # No reaping while the benchmark runs: a reaped job's reply would start a worker.
    lab = Lab(pi="fake", settings={"reapAfterSeconds": 3600}, keep=keep, prefix="roost-clib-")
    lab.env.pop("PYTHONUNBUFFERED", None)  # the CLI as a person runs it
    if bytecode_cache:
        lab.use_bytecode_cache()
    return lab


# ---- one timed process ------------------------------------------------------------------------
ENTRIES = {
    "script": [str(SCRIPT)],
    "click": [sys.executable, "-m", "roost.cli.main"],
}


def timed(lab: Lab, argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall time (ms) of one process from spawn to exit, and its outcome (exit 0 or raise)."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=lab.env, cwd=lab.work, capture_output=True, text=True, timeout=TIMEOUT)
    elapsed = (time.perf_counter() - t0) * 1000.0
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.strip()}")
    return elapsed, proc


def command_args(name: str, job: str, trial: int) -> list[str]:
    return {
        "help": ["--help"],
        "version": ["--version"],
        "ls": ["ls"],
        "ls_json": ["ls", "--json"],
        "reply": ["reply", job, f"bench reply {trial}"],
        "run": ["run", f"bench task {trial}"],
        "wait": ["wait", job, "--timeout", "60"],
    }[name]


def after(lab: Lab, name: str, job: str, output: str) -> None:
    """Untimed clean-up after a command, so its effects do not load the next measurement."""
    if name == "reply":
        lab.wait_settled(job, TIMEOUT)
    elif name == "run":
        new_job = output.strip()
        lab.wait_settled(new_job, TIMEOUT)
        lab.request("rm", timeout=TIMEOUT, job=new_job)


def timed_request(lab: Lab, name: str, job: str, trial: int) -> tuple[float, str]:
    """What the command asks roostd, from this process: connect, greeting, one request
    (ms), and the output the command would print first (the new job's id for `run`)."""
    t0 = time.perf_counter()
    with lab.client() as client:
        if name in ("ls", "ls_json"):
            result = client.request("list")
        elif name == "reply":
            result = client.request("reply", job=job, text=f"bench reply {trial}")
        elif name == "wait":
            result = client.call("wait", {"job": job, "timeout": 60.0}, 90.0)["row"]
        else:
            result = client.request(
                "run",
                name=None,
                cwd=str(lab.work),
                task=f"bench task {trial}",
                model=None,
                thinking=None,
                env=caller_env(lab.env),
            )  # as `roost run` sends it
    return (time.perf_counter() - t0) * 1000.0, str(result.get("id", ""))


def import_ms(lab: Lab, module: str, after: str | None = None) -> float:
    """Cumulative -X importtime of `module` (its own line) in a fresh process, in ms;
    with `after`, what it adds once that module is imported."""
    code = f"import {after}; import {module}" if after else f"import {module}"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        env=lab.env,
        cwd=lab.work,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    for line in proc.stderr.splitlines():
        fields = [part.strip() for part in line.split("|")]
        if len(fields) == 3 and fields[2] == module:
            return int(fields[1]) / 1000.0
    raise RuntimeError(f"no importtime line for {module}")


def heavy_imports(lab: Lab, args: list[str]) -> list[str]:
    """The heavy modules (HEAVY) that `roost ARGS` loads, from one -X importtime run."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "roost.cli", *args],
        env=lab.env,
        cwd=lab.work,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    loaded = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[-1].strip()
            for heavy in HEAVY:
                if name == heavy or name.startswith(heavy + "."):
                    loaded.add(heavy)
    return sorted(loaded)


# ---- main --------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15, help="processes per command and entry point")
    ap.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE from the environment (roost compiled "
        "from source by every process, as in this sandbox)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args()
    names = ("help", "version", "ls", "ls_json", "reply", "run", "wait")
    started = time.monotonic()
    load_before = load_average()
    with make_lab(bytecode_cache=not args.no_bytecode_cache, keep=args.keep) as lab:
        lab.start_daemon()
        job = timed(lab, ENTRIES["script"] + ["run", "--name", "bench", "bench job"])[1].stdout.strip()
        lab.wait_settled(job, TIMEOUT)
        # Warm-up (untimed): disk caches, bytecode, roostd's first requests.
        for entry in ENTRIES.values():
            for name in names:
                elapsed, proc = timed(lab, entry + command_args(name, job, -1))
                after(lab, name, job, proc.stdout)
        timed(lab, [sys.executable, "-c", "pass"])

        requests = ("ls", "ls_json", "reply", "run", "wait")
        variants = (
            [("baseline", "python_pass")]
            + [(entry, name) for entry in ENTRIES for name in names]
            + [("request", name) for name in requests]
        )
        samples: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
        for trial in range(args.runs):
            shift = trial % len(variants)
            for entry, name in variants[shift:] + variants[:shift]:
                if entry == "baseline":
                    elapsed, output = timed(lab, [sys.executable, "-c", "pass"])[0], ""
                elif entry == "request":
                    elapsed, output = timed_request(lab, name, job, trial)
                else:
                    elapsed, proc = timed(lab, ENTRIES[entry] + command_args(name, job, trial))
                    output = proc.stdout
                samples[(entry, name)].append(elapsed)
                after(lab, name, job, output)

        imports = {
            "roost.cli.main": summary(import_ms(lab, "roost.cli.main") for _ in range(args.runs)),
            "click": summary(import_ms(lab, "click") for _ in range(args.runs)),
            "roost.wire.client after roost.cli.main": summary(
                import_ms(lab, "roost.wire.client", after="roost.cli.main") for _ in range(args.runs)
            ),
        }
        heavy = {name: heavy_imports(lab, command_args(name, job, 99)) for name in names}

    baseline = summary(samples[("baseline", "python_pass")])
    commands = {entry: {name: summary(samples[(entry, name)]) for name in names} for entry in ENTRIES}
    request_ms = {name: summary(samples[("request", name)]) for name in requests}
    over = {
        entry: {name: round(commands[entry][name]["median"] - baseline["median"], 2) for name in names}
        for entry in ENTRIES
    }
    # What the CLI itself adds: the process minus bare Python minus roostd's answer.
    cli_own = {
        entry: {name: round(over[entry][name] - request_ms[name]["median"], 2) for name in requests}
        for entry in ENTRIES
    }
    targets = [
        {
            "what": LABELS[name],
            "figure_ms": commands["script"][name]["median"],
            "target_ms": TARGETS_MS[name],
            "met": commands["script"][name]["median"] <= TARGETS_MS[name],
            "same run: through click (python -m roost.cli.main) ms": commands["click"][name]["median"],
            "same run: baseline python -c pass ms": baseline["median"],
        }
        for name in TARGETS_MS
    ]
    print(
        json.dumps(
            {
                "targets": targets,
                "baseline_ms": baseline,
                "commands_ms": commands,
                "over_baseline_ms": over,
                "request_ms": request_ms,
                "cli_own_ms": cli_own,
                "import_ms": imports,
                "heavy_imports": heavy,
                "runs": args.runs,
                "bytecode_cache": not args.no_bytecode_cache,
                "cpus": os.cpu_count(),
                "loadavg_before": load_before,
                "loadavg_after": load_average(),
                "elapsed_s": round(time.monotonic() - started, 1),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
