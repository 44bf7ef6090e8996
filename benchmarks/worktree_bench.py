#!/usr/bin/env python3
"""What a worktree adds to a job's start: `run` -> first model request, with and without
`worktree`, on a repository of ~5,000 files, interleaved in one run.

    .venv/bin/python benchmarks/worktree_bench.py [--trials 9] [--files 5000]

The stock roostd (overhead_bench's bench_lab with `probe=False`), a FakeLLM in this process
(its receipt of the job's first model request is the finish line), one repository of
`--files` small files in 50 directories. Trial i runs each variant once, the order
rotating, so load from elsewhere hits both alike:

  plain     `run` in the repository (t0 = just before the request)
  worktree  `run` with worktree: true (roostd makes $ROOST_HOME/worktrees/<id> on a new
            branch first, then starts the job in it)

Each job is removed (`rm --force`, its branch too) once its request arrived, so the
machine holds one pi at a time. Also timed: `run_response_ms` (roostd's answer to `run`,
which for a worktree includes `git worktree add`) and a bare `git worktree add` of the
same repository, in the same run.

Output: one JSON object: per variant the medians (and all samples) of `start_ms` and
`run_response_ms`, and `added_ms` = median(worktree) - median(plain) of the start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kit.lab import Lab  # noqa: E402
from overhead_bench import bench_lab, load_average, ms  # noqa: E402

from roost.fakellm import last_user_contains  # noqa: E402

TIMEOUT = 120.0


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(path: Path, files: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@example.invalid")
    git(path, "config", "user.name", "roost bench")
    for i in range(files):
        directory = path / f"pkg{i % 50}" / f"mod{i % 7}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"file{i}.py").write_text(f"VALUE_{i} = {i}\n" * 20)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")


def trial(lab: Lab, repo: Path, token: str, worktree: bool) -> dict[str, float]:
    with lab.client() as c:
        since = len(lab.llm.requests)
        args: dict[str, Any] = {"task": f"{token} start", "cwd": str(repo), "name": token}
        if worktree:
            args["worktree"] = True
        t0 = time.monotonic()
        res = c.request("run", timeout=TIMEOUT, **args)
        t_resp = time.monotonic()
        req = lab.llm.wait_for_request(last_user_contains(token), TIMEOUT, since=since)
        out = {"start_ms": ms(req.t - t0), "run_response_ms": ms(t_resp - t0)}
        c.request("wait", job=res["id"], timeout=TIMEOUT)
        c.request("rm", job=res["id"], force=True, deleteBranch=True, timeout=TIMEOUT)
    return out


def bare_worktree_add(repo: Path, scratch: Path, n: int) -> float:
    target = scratch / f"bare-{n}"
    t0 = time.monotonic()
    git(repo, "worktree", "add", "--quiet", "-b", f"bare-{n}", str(target), "HEAD")
    took = ms(time.monotonic() - t0)
    git(repo, "worktree", "remove", "--force", str(target))
    git(repo, "branch", "-D", f"bare-{n}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--files", type=int, default=5000)
    opts = parser.parse_args()
    load_before = load_average()
    with bench_lab(probe=False) as lab:
        repo = lab.work / "repo"
        make_repo(repo, opts.files)
        scratch = Path(tempfile.mkdtemp(prefix="wt-bare-", dir=lab.root))
        # One warm-up of each (pi's first start reads its files from disk).
        trial(lab, repo, "warm-plain", False)
        trial(lab, repo, "warm-wt", True)
        samples: dict[str, list[dict[str, float]]] = {"plain": [], "worktree": []}
        bare: list[float] = []
        for i in range(opts.trials):
            order = ["plain", "worktree"] if i % 2 == 0 else ["worktree", "plain"]
            for variant in order:
                samples[variant].append(trial(lab, repo, f"tok{i}-{variant}", variant == "worktree"))
            bare.append(bare_worktree_add(repo, scratch, i))
    result: dict[str, Any] = {
        "files": opts.files,
        "trials": opts.trials,
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }
    for variant, rows in samples.items():
        result[variant] = {
            key: {
                "median": round(statistics.median(r[key] for r in rows), 1),
                "samples": [r[key] for r in rows],
            }
            for key in ("start_ms", "run_response_ms")
        }
    result["bare_git_worktree_add_ms"] = {"median": round(statistics.median(bare), 1), "samples": bare}
    result["added_ms"] = round(
        result["worktree"]["start_ms"]["median"] - result["plain"]["start_ms"]["median"], 1
    )
    result["paired_added_ms_median"] = round(
        statistics.median(
            w["start_ms"] - p["start_ms"] for w, p in zip(samples["worktree"], samples["plain"], strict=True)
        ),
        1,
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PI_OFFLINE", "1")
    sys.exit(main())
