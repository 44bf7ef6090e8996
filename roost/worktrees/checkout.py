"""Filling a new worktree while its pi boots.

Checking out a 5,000-file tree takes ~0.2 s on a quiet disk (seconds on a busy one), and
pi takes ~0.3 s (1.x) to ~1.1 s (0.73) to boot: done one after the other, the checkout
would be on the way to the job's first model request in full. So roostd makes the
worktree without a checkout, fills its index and writes only what pi reads at start-up
(`boot_pathspecs`: the files directly in each directory from the checkout's top level down
to the job's directory, AGENTS.md and CLAUDE.md among them, and every `.pi/`, `.agents/`,
`.claude/` tree there), and leaves a marker, `jobs/<id>/checkout.pending`. The worker then
writes the rest (`finish`) while pi boots and the model answers the first prompt; the
roost extension holds every tool call until the marker is gone (pi's `tool_call` event),
and the worker holds the run's end (its report, `done`) until then too. So the agent never
sees a half-filled tree, and the checkout is off the way to the first model request. A
worker killed meanwhile leaves the marker (its pi dies with it: no tool ran), and the next
one writes the files again; nothing of the agent's is there yet, so overwriting is safe.

This module runs in the worker: it imports `roost.worktrees.git` and nothing of roostd.
"""

from __future__ import annotations

import os
import posixpath
import subprocess
from pathlib import Path

from roost.worktrees import CHECKOUT_MARKER as MARKER
from roost.worktrees import git

BOOT_TREES = (".pi", ".agents", ".claude")


def boot_pathspecs(rel_cwd: str) -> list[str]:
    """Pathspecs of what pi reads at start-up in a job whose directory is `rel_cwd`
    (relative to the checkout's top level, "" for the top): pure."""
    parts = [p for p in rel_cwd.split("/") if p and p != "."]
    specs = []
    for depth in range(len(parts) + 1):
        here = "/".join(parts[:depth])
        prefix = f"{here}/" if here else ""
        specs.append(f":(glob){prefix}*")
        specs += [f":(glob){prefix}{tree}/**" for tree in BOOT_TREES]
    return specs


def start(path: str, rel_cwd: str) -> None:
    """Index filled, boot files written (roostd, after `git worktree add --no-checkout`)."""
    git.git(["read-tree", "HEAD"], path, doing=f"filling the index of {path}")
    listed = git.git(
        ["ls-files", "-z", "--", *boot_pathspecs(rel_cwd)],
        path,
        doing="listing the files pi reads at start-up",
    ).stdout
    if listed:
        _checkout_index(path, ["-f", "-u", "-z", "--stdin"], listed)
    os.makedirs(posixpath.join(path, rel_cwd) if rel_cwd else path, exist_ok=True)


CHECKOUT_WORKERS = 8
"""git's parallel checkout: a file's creation waits on the disk more than on a CPU (on
this project's busy 2-core machines 5,000 files took 3.7 s with one worker, 1.0-1.6 s
with 8), so more writers than cores pay off."""


CHECKOUT_NICE = 10
"""The checkout runs at a lower CPU priority than pi: on 2 cores, pi's boot (which the
job's first model request waits for) goes first, the checkout takes what is left."""


def finish(path: str) -> None:
    """Write every file of the worktree (the worker, while pi boots)."""
    _checkout_index(path, ["-a", "-f", "-u"], None, parallel=True)


def _checkout_index(path: str, args: list[str], stdin: str | None, parallel: bool = False) -> None:
    config = ["-c", f"checkout.workers={CHECKOUT_WORKERS}"] if parallel else []
    try:
        proc = subprocess.run(
            ["git", *config, "checkout-index", *args],
            cwd=path,
            input=stdin,
            env=git._env(),
            capture_output=True,
            text=True,
            timeout=git.GIT_TIMEOUT,
            preexec_fn=_lower_priority if parallel else None,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise git.GitError(f"checking out the worktree {path}: {exc}") from None
    if proc.returncode != 0:
        raise git.GitError(f"checking out the worktree {path}: {proc.stderr.strip()[-500:]}")


def _lower_priority() -> None:
    os.nice(CHECKOUT_NICE)


def pending(job_dir: Path) -> bool:
    return (job_dir / MARKER).exists()


def finish_pending(job_dir: Path, worktree_path: str) -> bool:
    """The worker's part: finish a pending checkout; True when there was one."""
    marker = job_dir / MARKER
    if not marker.exists():
        return False
    finish(worktree_path)
    marker.unlink(missing_ok=True)
    return True
