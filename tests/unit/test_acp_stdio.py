"""`roost acp` on a stdin or stdout asyncio cannot wait on (/dev/null, a file): a clear error
and exit 1, not a traceback or a wait that never ends (it hung forever on /dev/null)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def acp(tmp_path: Path, stdin: object, stdout: object) -> subprocess.CompletedProcess[str]:
    env = {"ROOST_HOME": str(tmp_path / "rh"), "ROOST_NO_AUTOSTART": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "roost.cli.main", "acp"],
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=60,
    )


def test_stdin_from_dev_null_is_refused(tmp_path: Path) -> None:
    proc = acp(tmp_path, subprocess.DEVNULL, subprocess.PIPE)
    assert proc.returncode == 1, proc.stderr
    assert "its stdin is a file or /dev/null" in proc.stderr and "Traceback" not in proc.stderr


def test_stdout_to_a_file_is_refused(tmp_path: Path) -> None:
    with open(tmp_path / "out", "w") as out:
        proc = acp(tmp_path, subprocess.PIPE, out)
    assert proc.returncode == 1, proc.stderr
    assert "its stdout is a file or /dev/null" in proc.stderr and "Traceback" not in proc.stderr
