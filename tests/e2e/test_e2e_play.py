"""End to end, the real pi: the play mode. `roost demo --keep --no-scenes` leaves a sandbox
(its roostd and the scripted model, a process of its own) under TMPDIR and prints the
export line to use it; there a new job and a reply get the scripted model's answers;
`roost demo --end` stops everything it runs and deletes it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from kit.procs import kill_processes, processes_of, wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("real_pi")]

KEEP = ("ROOST_PI", "ROOST_PI_PREFIX", "ROOST_NODE")
T = 120.0


def _base_env(tmpdir: Path) -> dict[str, str]:
    """The caller's environment without its roost and pi (but the choice of pi), TMPDIR
    ours: a newcomer's shell."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k in KEEP or not (k.startswith(("ROOST_", "PI_")) or k.endswith("_API_KEY"))
    }
    env.pop("XDG_STATE_HOME", None)
    env["TMPDIR"] = str(tmpdir)
    return env


def _roost(
    env: dict[str, str], *args: str, cwd: Path, timeout: float = T
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roost.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_demo_keep_leaves_a_sandbox_to_play_in_and_end_removes_it() -> None:
    tmpdir = Path(tempfile.mkdtemp(prefix="play-", dir="/tmp"))
    base = _base_env(tmpdir)
    root: Path | None = None
    try:
        kept = _roost(base, "demo", "--keep", "--no-scenes", cwd=tmpdir)
        assert kept.returncode == 0, (kept.stdout, kept.stderr)
        exports = [line.strip() for line in kept.stdout.splitlines() if line.strip().startswith("export ")]
        assert len(exports) == 1, kept.stdout
        assert "roost view" in kept.stdout and "roost demo --end" in kept.stdout
        env = dict(base)
        env.update(word.split("=", 1) for word in shlex.split(exports[0])[1:])
        root = Path(env["ROOST_HOME"]).parent
        assert root.parent == tmpdir and root.name.startswith("roost-demo-")  # TMPDIR honoured
        assert Path(env["PI_CODING_AGENT_DIR"]).is_relative_to(root)

        job = _roost(env, "run", "write me a haiku", cwd=tmpdir).stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{8}", job), job
        waited = _roost(env, "wait", job, "--timeout", str(T), cwd=tmpdir, timeout=T + 30)
        assert waited.stdout == "done\n", (waited.stdout, waited.stderr)
        logs = _roost(env, "logs", job, cwd=tmpdir).stdout
        assert 'Noted: "write me a haiku"' in logs and "scripted demo model" in logs, logs

        replied = _roost(env, "reply", job, "is it raining?", cwd=tmpdir)
        assert replied.stdout.strip() == "started", (replied.stdout, replied.stderr)
        waited = _roost(env, "wait", job, "--timeout", str(T), cwd=tmpdir, timeout=T + 30)
        assert waited.stdout == "needs_input\n", (waited.stdout, waited.stderr)
        logs = _roost(env, "logs", job, cwd=tmpdir).stdout
        assert 'You asked: "is it raining?"' in logs, logs
        assert processes_of(root), "roostd, the worker, pi and the model run"

        ended = _roost(env, "demo", "--end", cwd=tmpdir)
        assert ended.returncode == 0, (ended.stdout, ended.stderr)
        assert not root.exists()
        wait_until(
            lambda: not processes_of(root), 30, lambda: f"no process of the sandbox: {processes_of(root)}"
        )
    finally:
        if root is not None:
            kill_processes(processes_of(root))
        shutil.rmtree(tmpdir, ignore_errors=True)


def test_end_refuses_a_directory_that_is_no_sandbox(tmp_path: Path) -> None:
    (tmp_path / "rh").mkdir()
    (tmp_path / "keep.txt").write_text("mine")
    env = _base_env(tmp_path)
    for target in (tmp_path, tmp_path / "rh"):
        proc = _roost(env, "demo", "--end", str(target), cwd=tmp_path)
        assert proc.returncode == 1 and "not a sandbox" in proc.stdout, proc.stdout
    assert (tmp_path / "keep.txt").read_text() == "mine"
    proc = _roost({**env, "ROOST_HOME": str(tmp_path / "rh")}, "demo", "--end", cwd=tmp_path)
    assert proc.returncode == 1 and (tmp_path / "rh").is_dir()
