"""roost.worker.launch.popen_dying_with_worker: pi gets SIGTERM when its worker dies, even
by SIGKILL, through util-linux's setpriv where it works and a preexec_fn where it does not;
and a worker killed before the signal was set leaves no pi running."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roost.worker import launch

WORKER = """
import sys, time
from roost.worker import launch
if sys.argv[1] == "preexec":
    launch._setpriv = []  # as where setpriv is missing or refused
child = launch.popen_dying_with_worker(["sleep", "60"], stdin=None)
print(child.pid, " ".join(launch.death_signal_prefix()) or "-", flush=True)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("way", ["setpriv", "preexec"])
def test_the_child_dies_with_its_sigkilled_worker(way: str) -> None:
    if way == "setpriv" and not shutil.which("setpriv"):
        pytest.skip("no setpriv on this machine (the preexec way is tested)")
    worker = subprocess.Popen([sys.executable, "-c", WORKER, way], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        pid_text, prefix = worker.stdout.readline().split(" ", 1)
        child = int(pid_text)
        assert (prefix.strip() != "-") == (way == "setpriv")
        assert alive(child)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(child), f"the child {child} outlived its worker ({way})"
    finally:
        worker.kill()
        worker.wait()


def test_setpriv_is_used_only_once_it_was_seen_to_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "_setpriv", None)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert launch.death_signal_prefix() == []
    monkeypatch.setattr(launch, "_setpriv", None)
    monkeypatch.setattr(shutil, "which", lambda name: "/bin/false")  # a setpriv that fails
    assert launch.death_signal_prefix() == []
    if os.path.exists("/usr/bin/setpriv"):
        monkeypatch.setattr(launch, "_setpriv", None)
        monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/setpriv")
        assert launch.death_signal_prefix() == [
            "/usr/bin/setpriv",
            *launch.SETPRIV[1:],
            *launch.PARENT_CHECK,
            str(os.getpid()),
        ]


def test_a_child_whose_parent_is_not_the_worker_never_runs_its_command(tmp_path: Path) -> None:
    """The worker killed before the child's death signal was set: the child must not run pi
    as an orphan. Both ways check, once the signal is set, that the parent is the worker."""
    ran = tmp_path / "ran"
    prefix = launch.death_signal_prefix()
    if prefix:
        assert prefix[-1] == str(os.getpid())
        assert subprocess.run([*prefix[:-1], "1", "touch", str(ran)]).returncode != 0
        assert not ran.exists()  # its parent is not pid 1: the command never ran
        assert subprocess.run([*prefix, "touch", str(ran)]).returncode == 0 and ran.exists()
        ran.unlink()
    child = subprocess.Popen(["touch", str(ran)], preexec_fn=lambda: launch._die_with_parent(1))
    assert child.wait() == 1 and not ran.exists()
    parent = os.getpid()
    child = subprocess.Popen(["touch", str(ran)], preexec_fn=lambda: launch._die_with_parent(parent))
    assert child.wait() == 0 and ran.exists()
