"""`roost doctor --json` read back (tests/integration/test_doctor.py, tests/e2e/test_doctor_pi.py)."""

from __future__ import annotations

import json
from typing import Any

from kit.lab import Lab

CHECKS = {
    "pi",
    "pi version",
    "node",
    "pi features",
    "extension installed",
    "extension loads",
    "model",
    "roostd",
    "ROOST_HOME",
    "sandbox",
}


def doctor(env: Lab) -> tuple[int, dict[str, Any]]:
    proc = env.roost("doctor", "--json")
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def failed(report: dict[str, Any]) -> set[str]:
    return {check["name"] for check in report["checks"] if not check["ok"]}
