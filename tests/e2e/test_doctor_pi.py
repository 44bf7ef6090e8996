"""`roost doctor` with the real pi (its load check starts pi: the pinned one, or ROOST_PI), in
an isolated roost (tests/conftest.py `roost_env`). None of them may leave roostd running, a
session file or a peer behind.
"""

from __future__ import annotations

import os

import pytest
from kit.doctor import CHECKS, by_name, doctor, failed
from kit.lab import Lab
from kit.testpi import make_agent_dir

from roost.pi.compat import features_of
from roost.pi.locate import find_pi

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def a_model(roost_env: Lab) -> None:
    """A model with credentials (never called: the doctor makes no network call), so
    that the checks here are about the rest; tests/e2e/test_doctor_model.py checks it."""
    make_agent_dir(roost_env.agent_dir, "http://127.0.0.1:9/v1")


def test_healthy_setup(roost_env: Lab, real_pi: list[str]) -> None:
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
    assert not roost_env.roost_home.exists()
    assert not (roost_env.agent_dir / "sessions").exists()

    roost_env.roost_ok("install")
    code, report = doctor(roost_env)
    assert code == 0 and report["ok"] is True, report
    checks = by_name(report)
    assert set(checks) == CHECKS
    # The sandbox check: ok where bwrap makes sandboxes; where it cannot, a warning (roost
    # run --sandbox is refused) that fails no setup which never asked for one (test_sandbox).
    sandbox = checks.pop("sandbox")
    assert sandbox["ok"] is True and sandbox["level"] in ("ok", "warn"), sandbox
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
    assert not roost_env.roost_home.exists()

    # With roostd up: its status and the socket's mode are checked too.
    roost_env.roost_ok("daemon", "start")
    code, report = doctor(roost_env)
    checks = by_name(report)
    assert code == 0, report
    assert checks["roostd"]["detail"].startswith("running, pid ")
    assert checks["socket"]["ok"] and checks["ROOST_HOME"]["detail"].endswith("(0700, yours)")
    assert roost_env.request("list")["jobs"] == []


def test_roost_home_open_to_others_fails(roost_env: Lab, real_pi: list[str]) -> None:
    roost_env.roost_home.mkdir(mode=0o755)
    os.chmod(roost_env.roost_home, 0o755)
    proc = roost_env.roost("doctor")
    assert proc.returncode == 1, proc.stdout
    assert f"fix: chmod 700 {roost_env.roost_home}" in proc.stdout
    code, report = doctor(roost_env)
    assert code == 1 and failed(report) == {"ROOST_HOME"}
    assert "0755" in by_name(report)["ROOST_HOME"]["detail"]

    os.chmod(roost_env.roost_home, 0o700)
    assert roost_env.roost("doctor").returncode == 0


def test_broken_extension_fails_the_load_check(roost_env: Lab, real_pi: list[str]) -> None:
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
    (installed / "index.ts").write_text(
        "// Installed by `roost install`\nexport default function (pi: any) {}\n"
    )
    code, report = doctor(roost_env)
    assert code == 1 and "registered no /roost-bg" in by_name(report)["extension loads"]["detail"]

    roost_env.roost_ok("install")
    code, report = doctor(roost_env)
    assert code == 0 and report["ok"], report
