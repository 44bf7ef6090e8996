#!/usr/bin/env python3
"""Where the test suite's CPU goes: a command (by default `scripts/test`) in a cgroup of its
own, and each test, from its setup to its teardown, in a cgroup of its own inside it.

    .venv/bin/python benchmarks/suite_cpu.py [--top 25] [-- COMMAND ...]     (as root)

Every process a test starts (roostd, workers, pi, CLI calls, chromium) is born in its
test's cgroup and stays there, whatever session it makes or whoever reaps it, so a test's
CPU counts its own processes and their children to the end, even those that outlive it
(the report reads the figures once the command has ended, and names the cgroups that still
hold a process: something a test left running). The plugin half of this file is loaded
into every pytest the command runs (`PYTEST_ADDOPTS=-p suite_cpu`, this directory on
PYTHONPATH): the main pass, the old line's pass and the Ray pass of `scripts/test` alike;
each test is labelled with its pass (the pi it ran on: `ROOST_PI`, else `default`).

The whole command's CPU against its wall time says whether a run is bound by CPU (both
cores busy: then no schedule finishes before CPU / cores, the `floor_s`) or by waiting.
cgroup v1 (the cpuacct controller) or v2 (cpu.stat). Output: one JSON object (see
benchmarks/README.md); progress on stderr.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENV_ROOT = "SUITE_CPU_CGROUP"  # the command's cgroup (a directory), for the plugin
ENV_OUT = "SUITE_CPU_OUT"  # where the plugin writes one line per test
V1 = Path("/sys/fs/cgroup/cpuacct")
V2 = Path("/sys/fs/cgroup")


def _v1() -> bool:
    return (V1 / "cpuacct.usage").exists()


def cpu_seconds(cgroup: Path) -> float:
    """CPU used by processes while they were in `cgroup` or one of its children."""
    if (cgroup / "cpuacct.usage").exists():
        return int((cgroup / "cpuacct.usage").read_text()) / 1e9
    for line in (cgroup / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise OSError(f"no CPU figure in {cgroup}")


def current_cgroup(pid: int) -> Path:
    """The cgroup (of the hierarchy in use) that holds `pid`."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if _v1() and "cpuacct" in controllers.split(","):
            return V1 / path.lstrip("/")
        if not _v1() and controllers == "":
            return V2 / path.lstrip("/")
    raise OSError("no cpu accounting cgroup for this process")


def enter(cgroup: Path, pid: int) -> None:
    (cgroup / "cgroup.procs").write_text(str(pid))


def processes_in(cgroup: Path) -> list[int]:
    pids: list[int] = []
    for procs in cgroup.rglob("cgroup.procs"):
        pids += [int(p) for p in procs.read_text().split()]
    return pids


# -- the pytest plugin (-p suite_cpu) ---------------------------------------------------------
def pass_label() -> str:
    """The pass a test runs in: the old line's version when ROOST_PI names it, else the pi."""
    pi = os.environ.get("ROOST_PI", "")
    match = re.search(r"pi-(\d+\.\d+\.\d+)", pi)
    return match.group(1) if match else (pi or "default")


try:
    import pytest
except ImportError:  # the runner half needs no pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
        """The test, from its setup to its teardown, in a cgroup of its own under ENV_ROOT."""
        root = os.environ.get(ENV_ROOT)
        if not root:
            yield
            return
        me = os.getpid()
        home = current_cgroup(me)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", item.nodeid)[-180:]
        cgroup = Path(root) / f"{me}-{time.monotonic_ns()}-{name}"
        cgroup.mkdir()
        enter(cgroup, me)
        try:
            yield
        finally:
            enter(home, me)
            out = Path(os.environ[ENV_OUT])
            row = {"test": item.nodeid, "pass": pass_label(), "cgroup": str(cgroup)}
            with open(out / f"{me}.jsonl", "a", encoding="utf-8") as lines:
                lines.write(json.dumps(row) + "\n")


# -- the runner -------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="how many tests and files to list")
    parser.add_argument("command", nargs="*", default=["scripts/test"])
    args = parser.parse_args()
    repo = Path(__file__).resolve().parents[1]
    base = current_cgroup(os.getpid())
    root = base / f"suite-cpu-{os.getpid()}"
    root.mkdir()
    out = Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    env = dict(os.environ)
    env[ENV_ROOT], env[ENV_OUT] = str(root), str(out)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo / "benchmarks"), env.get("PYTHONPATH")) if p)
    env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} -p suite_cpu".strip()
    print(f"suite_cpu: {' '.join(args.command)} (each test in a cgroup under {root})", file=sys.stderr)
    started = time.monotonic()
    # The child enters the cgroup before it runs the command: all it starts is born there.
    proc = subprocess.run(
        ["/bin/sh", "-c", f'echo $$ > {root}/cgroup.procs && exec "$@"', "sh", *args.command],
        cwd=repo,
        env=env,
        check=False,
    )
    wall = time.monotonic() - started
    time.sleep(1.0)  # what a test left behind has a moment to end
    report = summarise(root, out, wall, args.top)
    report["command"], report["exit"] = args.command, proc.returncode
    remove(root, out)
    print(json.dumps(report, indent=1))
    return proc.returncode


def remove(root: Path, out: Path) -> None:
    """The cgroups that hold no process any more, and the plugin's lines."""
    for cgroup in [*sorted(p for p in root.iterdir() if p.is_dir()), root]:
        with contextlib.suppress(OSError):  # still holds a process: reported, left
            cgroup.rmdir()
    shutil.rmtree(out, ignore_errors=True)


def summarise(root: Path, out: Path, wall: float, top: int) -> dict[str, Any]:
    tests = []
    for lines in out.glob("*.jsonl"):
        for line in lines.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            row["cpu_s"] = cpu_seconds(Path(row["cgroup"]))
            row["left_running"] = processes_in(Path(row["cgroup"]))
            tests.append(row)
    total = cpu_seconds(root)
    cores = os.cpu_count() or 1
    passes: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    layers: dict[str, float] = collections.defaultdict(float)
    files: dict[tuple[str, str], float] = collections.defaultdict(float)
    for row in tests:
        passes[row["pass"]][0] += 1
        passes[row["pass"]][1] += row["cpu_s"]
        layers[row["test"].split("/")[1] if row["test"].count("/") > 1 else row["test"]] += row["cpu_s"]
        files[(row["pass"], row["test"].split("::")[0])] += row["cpu_s"]
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(total, 1),
        "cores": cores,
        "busy_cores": round(total / wall, 2),
        "floor_s": round(total / cores, 1),
        "tests_cpu_s": round(sum(r["cpu_s"] for r in tests), 1),
        "passes": {k: {"tests": int(n), "cpu_s": round(c, 1)} for k, (n, c) in sorted(passes.items())},
        "layers": {k: round(v, 1) for k, v in sorted(layers.items(), key=lambda kv: -kv[1])},
        "top_files": [
            {"pass": p, "file": f, "cpu_s": round(c, 1)}
            for (p, f), c in sorted(files.items(), key=lambda kv: -kv[1])[:top]
        ],
        "top_tests": [
            {"pass": r["pass"], "test": r["test"], "cpu_s": round(r["cpu_s"], 1)}
            for r in sorted(tests, key=lambda r: -r["cpu_s"])[:top]
        ],
        "left_running": [{"test": r["test"], "pids": r["left_running"]} for r in tests if r["left_running"]],
    }


if __name__ == "__main__":
    sys.exit(main())
