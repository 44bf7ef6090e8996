"""`roost doctor` and `roost --version`, in an isolated roost (tests/conftest.py `roost_env`).

The doctor's load check starts the real pi (the pinned one, or ROOST_PI): those tests are
tests/e2e/test_doctor_pi.py. None of them may leave roostd running, a session file or a peer
behind.
"""

from __future__ import annotations

import pytest
from kit.doctor import by_name, doctor, failed

from roost.pi.locate import find_pi
from roost.testkit.lab import Lab

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
        f"pi: not found (ROOST_PI: {roost_env.root / 'no-such-pi'} does not exist)")
