"""`roost doctor` and `roost --version`, in an isolated roost (tests/conftest.py `roost_env`).

The doctor's load check starts the real pi (the pinned one, or ROOST_PI): those tests are
tests/e2e/test_doctor_pi.py. None of them may leave roostd running, a session file or a peer
behind.
"""

from __future__ import annotations

import pytest
from kit.doctor import by_name, doctor, failed
from kit.lab import Lab

from roost.pi.locate import find_pi

pytestmark = pytest.mark.timeout(120)


def test_missing_roost_pi_fails_with_a_fix(roost_env: Lab) -> None:
    roost_env.env["ROOST_PI"] = str(roost_env.root / "no-such-pi")
    proc = roost_env.roost("doctor")
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("FAIL pi ") and "no-such-pi does not exist" in lines[0]
    assert lines[1].strip().startswith("fix: set ROOST_PI to a pi that exists")
    assert lines[-1].startswith("1 problem")

    code, report = doctor(roost_env)
    assert code == 1 and report["ok"] is False and report["pi"] is None
    assert failed(report) == {"pi"}
    assert "extension loads" not in by_name(report)  # nothing to load it in


def test_version_names_roost_and_pi(roost_env: Lab, real_pi: list[str]) -> None:
    from roost import __version__

    install = find_pi()
    lines = roost_env.roost_ok("--version").splitlines()
    assert len(lines) == 2, lines
    assert lines[0] == f"roost {__version__}"
    assert lines[1].startswith(f"pi {install.version} ({install.package}, node ")
    assert find_pi().version is not None

    roost_env.env["ROOST_NODE"] = "/usr/bin/node"
    assert roost_env.roost_ok("--version").splitlines()[1].endswith(", node /usr/bin/node)")

    roost_env.env["ROOST_PI"] = str(roost_env.root / "no-such-pi")
    proc = roost_env.roost("--version")
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[1] == (
        f"pi: not found (ROOST_PI: {roost_env.root / 'no-such-pi'} does not exist)"
    )


# -- a ROOST_HOME roost cannot write in --------------------------------------------------------
def _mount(*args: str) -> bool:
    import subprocess

    return subprocess.run(["mount", *args], capture_output=True, check=False).returncode == 0


def test_a_read_only_or_full_roost_home_fails_with_the_reason(roost_env: Lab) -> None:
    """A real read-only and a real full filesystem (tmpfs; root only: a 0500 directory does
    not stop root from writing)."""
    import os
    import subprocess

    roost_env.env["ROOST_PI"] = str(roost_env.root / "no-such-pi")  # no pi: a quick doctor
    mount = roost_env.root / "mnt"
    mount.mkdir()
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(mount)):
        pytest.skip("needs root and mount(8): test_write_problem_names_the_failure covers it")
    try:
        home = mount / "rh"
        home.mkdir(mode=0o700)
        roost_env.env["ROOST_HOME"] = str(home)
        assert by_name(doctor(roost_env)[1])["ROOST_HOME"]["level"] == "ok"

        filler = mount / "filler"
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={filler}", "bs=4k"], capture_output=True, check=False
        )  # until the filesystem is full
        code, report = doctor(roost_env)
        check = by_name(report)["ROOST_HOME"]
        assert code == 1 and check["level"] == "fail", check
        assert "No space left on device" in check["detail"] or "is full" in check["detail"]
        assert "free space" in check["fix"]
        filler.unlink()

        assert _mount("-o", "remount,ro", str(mount))
        code, report = doctor(roost_env)
        check = by_name(report)["ROOST_HOME"]
        assert code == 1 and check["level"] == "fail"
        assert check["detail"] == f"{home} is on a read-only filesystem"
        roost_env.env["ROOST_HOME"] = str(home / "not-yet")  # would be made there: same
        check = by_name(doctor(roost_env)[1])["ROOST_HOME"]
        assert check["level"] == "fail" and "cannot be made" in check["detail"], check
        assert sorted(os.listdir(home)) == []  # the probe left nothing behind
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_write_problem_names_the_failure(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import errno
    import os

    from roost.cli.doctor import report as doctor_module

    assert doctor_module.write_problem(tmp_path) is None
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    assert doctor_module.write_problem(tmp_path) == (f"cannot write in {tmp_path}: No space left on device")
    monkeypatch.setattr(os, "write", real_write)
    assert list(tmp_path.iterdir()) == []  # the probe file is gone either way

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    assert doctor_module.write_problem(tmp_path) == f"{tmp_path} is on a read-only filesystem"
