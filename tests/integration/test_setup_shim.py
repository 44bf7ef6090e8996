"""scripts/setup puts `roost` on PATH: a link in ~/.local/bin (here ROOST_BIN_DIR) to the
checkout's .venv/bin/roost, made once, never over something that is not its own, and the
line to add the directory to PATH when it is not there (`--shim-only`: that step alone)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TARGET = REPO / ".venv" / "bin" / "roost"

pytestmark = pytest.mark.timeout(120)


def setup(bin_dir: Path, on_path: bool = False) -> str:
    path = os.environ.get("PATH", "/usr/bin:/bin")
    env = {**os.environ, "ROOST_BIN_DIR": str(bin_dir), "PATH": f"{bin_dir}:{path}" if on_path else path}
    proc = subprocess.run(
        [str(REPO / "scripts" / "setup"), "--shim-only"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc
    return proc.stdout


def test_setup_links_roost_once_and_says_how_to_reach_it(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    said = setup(bin_dir)
    shim = bin_dir / "roost"
    assert shim.is_symlink() and Path(os.readlink(shim)) == TARGET
    assert f"installed {shim} -> {TARGET}" in said
    assert f'export PATH="{bin_dir}:$PATH"' in said  # the one line to add
    # Idempotent: the same link, and said so; on PATH, no line to add.
    again = setup(bin_dir, on_path=True)
    assert Path(os.readlink(shim)) == TARGET and "roost on PATH" in again
    assert "export PATH" not in again
    # The link works: it is the CLI.
    out = subprocess.run([str(shim), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Usage: roost" in out.stdout


def test_setup_never_replaces_what_is_not_its_own(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "roost"
    shim.write_text("#!/bin/sh\necho another roost\n")
    said = setup(bin_dir)
    assert shim.read_text() == "#!/bin/sh\necho another roost\n" and not shim.is_symlink()
    assert f"left {shim} alone" in said
    shim.unlink()
    other = tmp_path / "elsewhere"
    other.write_text("")
    shim.symlink_to(other)
    said = setup(bin_dir)
    assert Path(os.readlink(shim)) == other and f"left {shim} alone" in said


def test_setup_replaces_a_link_into_a_checkout_that_is_gone(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "roost"
    shim.symlink_to(tmp_path / "old-clone" / ".venv" / "bin" / "roost")
    said = setup(bin_dir)
    assert Path(os.readlink(shim)) == TARGET and "replaced" in said
