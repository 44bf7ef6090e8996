"""`roost doctor` and `roost --version`, in an isolated roost (tests/conftest.py `roost_env`).

The doctor's load check starts the real pi (the pinned one, or ROOST_PI): those tests are
e2e. None of them may leave roostd running, a session file or a peer behind.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from conftest import RoostEnv

from roost.pi.compat import features_of
from roost.pi.locate import find_pi

pytestmark = pytest.mark.timeout(120)

CHECKS = {"pi", "pi version", "node", "pi features", "extension installed", "extension loads",
          "roostd", "ROOST_HOME"}


def doctor(env: RoostEnv) -> tuple[int, dict[str, Any]]:
    proc = env.roost("doctor", "--json")
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def failed(report: dict[str, Any]) -> set[str]:
    return {check["name"] for check in report["checks"] if not check["ok"]}


@pytest.mark.e2e
def test_healthy_setup(roost_env: RoostEnv, real_pi: list[str]) -> None:
    # Not installed for the person's pi: a warning with its fix, still exit 0; the load
    # check uses roost's packaged extension.
    proc = roost_env.roost("doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("warn extension installed") for line in lines), proc.stdout
    assert any(line.strip() == "fix: roost install" for line in lines), proc.stdout
    assert any(line.startswith("ok   extension loads") for line in lines), proc.stdout
    assert "✓" not in proc.stdout  # not a TTY: words, not marks
    # The doctor started no roostd and wrote no session.
    assert not roost_env.home.exists()
    assert not (roost_env.agent_dir / "sessions").exists()

    roost_env.roost_ok("install")
    code, report = doctor(roost_env)
    assert code == 0 and report["ok"] is True, report
    checks = by_name(report)
    assert set(checks) == CHECKS
    assert all(check["level"] == "ok" and check["fix"] is None for check in checks.values())
    assert "/roost-bg" in checks["extension loads"]["detail"]
    assert str(roost_env.agent_dir / "extensions" / "roost") in checks["extension loads"]["detail"]
    assert checks["roostd"]["detail"].startswith("not running")
    install = find_pi()
    assert report["pi"]["version"] == install.version
    assert report["pi"]["package"] == install.package
    assert report["pi"]["argv"] == install.argv
    assert report["pi"]["nodeVersion"].startswith("v")
    assert report["features"] == features_of(install).names()
    assert not roost_env.home.exists()

    # With roostd up: its status and the socket's mode are checked too.
    roost_env.roost_ok("daemon", "start")
    code, report = doctor(roost_env)
    checks = by_name(report)
    assert code == 0, report
    assert checks["roostd"]["detail"].startswith("running, pid ")
    assert checks["socket"]["ok"] and checks["ROOST_HOME"]["detail"].endswith("(0700, yours)")
    assert roost_env.request("list")["jobs"] == []


def test_missing_roost_pi_fails_with_a_fix(roost_env: RoostEnv) -> None:
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


@pytest.mark.e2e
def test_roost_home_open_to_others_fails(roost_env: RoostEnv, real_pi: list[str]) -> None:
    roost_env.home.mkdir(mode=0o755)
    os.chmod(roost_env.home, 0o755)
    proc = roost_env.roost("doctor")
    assert proc.returncode == 1, proc.stdout
    assert f"fix: chmod 700 {roost_env.home}" in proc.stdout
    code, report = doctor(roost_env)
    assert code == 1 and failed(report) == {"ROOST_HOME"}
    assert "0755" in by_name(report)["ROOST_HOME"]["detail"]

    os.chmod(roost_env.home, 0o700)
    assert roost_env.roost("doctor").returncode == 0


@pytest.mark.e2e
def test_broken_extension_fails_the_load_check(roost_env: RoostEnv, real_pi: list[str]) -> None:
    roost_env.roost_ok("install")
    installed = roost_env.agent_dir / "extensions" / "roost"
    with open(installed / "roost.ts", "a") as handle:
        handle.write("\nthis is not ( typescript\n")
    code, report = doctor(roost_env)
    checks = by_name(report)
    assert code == 1 and failed(report) == {"extension loads"}, report
    assert "roost.ts" in checks["extension loads"]["detail"]
    assert checks["extension loads"]["fix"].startswith("roost install")
    assert checks["extension installed"]["level"] == "warn"  # differs from roost's copy
    proc = roost_env.roost("doctor")
    assert "FAIL extension loads" in proc.stdout and "fix: roost install" in proc.stdout

    # Loads, but is not roost: no /roost-bg.
    (installed / "index.ts").write_text("// Installed by `roost install`\n"
                                        "export default function (pi: any) {}\n")
    code, report = doctor(roost_env)
    assert code == 1 and "registered no /roost-bg" in by_name(report)["extension loads"]["detail"]

    roost_env.roost_ok("install")
    code, report = doctor(roost_env)
    assert code == 0 and report["ok"], report


def test_version_names_roost_and_pi(roost_env: RoostEnv, real_pi: list[str]) -> None:
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
