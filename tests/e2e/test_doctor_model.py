"""`roost doctor`'s model check and `roost agents check`'s model rule, with the real pi: pi is
asked (no network call) which model it would use and whether it has credentials for it."""

from __future__ import annotations

import json

import pytest
from kit.doctor import by_name, doctor, failed
from kit.lab import Lab
from kit.testpi import make_agent_dir

pytestmark = pytest.mark.timeout(120)


def model_check(lab: Lab, *args: str) -> tuple[int, dict[str, object]]:
    proc = lab.roost("doctor", "--json", *args)
    report = json.loads(proc.stdout)
    return proc.returncode, by_name(report)["model"]


def test_a_fresh_agent_dir_fails_with_the_fix(roost_env: Lab, real_pi: list[str]) -> None:
    code, report = doctor(roost_env)
    assert code == 1 and failed(report) == {"model"}, report
    check = by_name(report)["model"]
    assert check["detail"] == "none: pi has no model it can use"
    assert str(check["fix"]).startswith("no model configured: run pi once and /login")
    text = roost_env.roost("doctor").stdout
    assert "FAIL model" in text and "fix: no model configured" in text


def test_a_default_provider_without_a_key(roost_env: Lab, real_pi: list[str]) -> None:
    (roost_env.agent_dir / "settings.json").write_text(
        json.dumps({"defaultProvider": "anthropic", "defaultModel": "claude-sonnet-4-5"})
    )
    code, check = model_check(roost_env)
    assert code == 1 and check["level"] == "fail", check
    assert "anthropic/claude-sonnet-4-5 (pi's default (settings.json))" in str(check["detail"])
    assert check["fix"] == (
        'no API key for provider "anthropic": run pi once and /login, or set ANTHROPIC_API_KEY'
    )
    roost_env.env["ANTHROPIC_API_KEY"] = "sk-not-used"  # never sent: no model call is made
    code, check = model_check(roost_env)
    assert check["level"] == "ok" and "pi has credentials for it" in str(check["detail"]), check


def test_model_option_and_models_json(roost_env: Lab, real_pi: list[str]) -> None:
    code, check = model_check(roost_env, "--model", "nope/x")
    assert code == 1 and 'Model "nope/x" not found' in str(check["detail"]), check
    assert str(check["fix"]).startswith('pi does not know model "nope/x"')
    make_agent_dir(roost_env.agent_dir, "http://127.0.0.1:9/v1")
    code, check = model_check(roost_env)
    assert check["level"] == "ok" and str(check["detail"]).startswith("fake/fake-model"), check
    (roost_env.agent_dir / "models.json").write_text("{ not json")
    code, check = model_check(roost_env)
    assert code == 1 and "could not read models.json" in str(check["detail"]), check


def test_agents_check_flags_a_model_pi_does_not_know(roost_env: Lab, real_pi: list[str]) -> None:
    make_agent_dir(roost_env.agent_dir, "http://127.0.0.1:9/v1")
    agents = roost_env.agent_dir / "roost" / "agents"
    agents.mkdir(parents=True)
    (agents / "good.toml").write_text('description = "ok"\nmodel = "fake/fake-model"\n')
    assert roost_env.roost_ok("agents", "check").startswith("ok:")
    (agents / "bad.toml").write_text('description = "bad"\nmodel = "nope/x"\n')
    proc = roost_env.roost("agents", "check")
    assert proc.returncode == 1
    assert f"{agents / 'bad.toml'}: model 'nope/x': Model \"nope/x\" not found" in proc.stderr
    assert "good.toml" not in proc.stderr
    code, check = model_check(roost_env, "--agent", "bad")
    assert code == 1 and "nope/x (agent bad)" in str(check["detail"]), check
