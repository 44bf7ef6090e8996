"""roost.approvals.callrules: what one tool call needs under a job's policy."""

from __future__ import annotations

import pytest

from roost.approvals.callrules import BadRule, always_rule, check_policy, combine, decide, gated, summary

CWD = "/srv/project"


def policy(mode: str = "auto", **rules: list[str]) -> dict:
    return check_policy({"mode": mode, **rules})


def action(p: dict, tool: str, **tool_input: str) -> str:
    return decide(p, tool, tool_input, CWD).action


def test_auto_runs_everything_and_is_not_gated() -> None:
    p = policy()
    assert not gated(p)
    assert action(p, "bash", command="rm -rf /") == "allow"


def test_ask_asks_for_tools_that_change_something_only() -> None:
    p = policy("ask")
    assert gated(p)
    for tool in ("bash", "write", "edit", "some_mcp_tool"):
        assert action(p, tool, command="x", path="a") == "ask"
    for tool in ("read", "grep", "find", "ls", "roost_agents", "roost_send", "roost_spawn"):
        assert action(p, tool, path="a") == "allow"


def test_deny_beats_ask_beats_allow() -> None:
    p = policy("auto", allow=["bash"], ask=["bash:git *"], deny=["bash:git push*"])
    assert action(p, "bash", command="ls") == "allow"
    assert action(p, "bash", command="git status") == "ask"
    assert action(p, "bash", command="git push origin main") == "deny"
    assert decide(p, "bash", {"command": "git push"}, CWD).rule == "bash:git push*"
    assert gated(p)


def test_allow_rule_lets_ask_mode_run_a_command_unasked() -> None:
    p = policy("ask", allow=["bash:npm test*", "write:src/*"])
    assert action(p, "bash", command="npm test -- --watch") == "allow"
    assert action(p, "bash", command="npm publish") == "ask"
    assert action(p, "write", path="src/a/b.py") == "allow"
    assert action(p, "write", path=f"{CWD}/src/x.py") == "allow"
    assert action(p, "write", path="docs/x.md") == "ask"


def test_outside_means_outside_the_jobs_directory() -> None:
    p = policy("auto", deny=["write:outside"], ask=["edit:outside"])
    assert action(p, "write", path="a/b.txt") == "allow"
    assert action(p, "write", path="../other/b.txt") == "deny"
    assert action(p, "write", path="/etc/passwd") == "deny"
    assert action(p, "write", path=f"{CWD}-evil/x") == "deny"  # a sibling with the prefix
    assert action(p, "write", path="~/.bashrc") == "deny"
    assert action(p, "edit", path="/tmp/x") == "ask"
    assert action(p, "edit", path="x") == "allow"


@pytest.mark.parametrize("rule", ["", ":x", "bash:", "ba sh", "read:outside", "mytool:x*"])
def test_bad_rules_are_refused(rule: str) -> None:
    with pytest.raises(BadRule):
        policy("auto", allow=[rule])


def test_bad_policies_are_refused() -> None:
    with pytest.raises(BadRule):
        check_policy({"mode": "yolo"})
    with pytest.raises(BadRule):
        check_policy({"mode": "ask", "timeout": 0})


def test_a_child_has_at_least_its_parents_rules() -> None:
    parent = policy("ask", deny=["bash:git push*"], timeout=60)
    child = combine(parent, policy("auto", allow=["bash"]))
    assert child is not None
    assert child["mode"] == "ask"
    assert child["timeout"] == 60
    assert action(child, "bash", command="git push") == "deny"
    assert combine(parent, None) == parent
    assert combine(None, None) is None


def test_summary_is_one_escaped_line() -> None:
    assert summary("bash", {"command": "git push origin main"}) == "approve bash: git push origin main"
    line = summary("bash", {"command": "echo a\nrm -rf x\x1b[2J\u202e"})
    assert "\n" not in line and "\x1b" not in line and "\u202e" not in line
    assert line.startswith("approve bash: echo a rm -rf x\\x1b[2J")
    assert summary("write", {"path": "a.txt", "content": "x"}) == "approve write: a.txt"
    assert len(summary("bash", {"command": "x" * 500})) == 120


def test_always_rule_is_the_exact_command() -> None:
    rule = always_rule("bash", {"command": "rm *.tmp"})
    assert rule == "bash:rm [*].tmp"
    p = policy("ask", allow=[rule])
    assert action(p, "bash", command="rm *.tmp") == "allow"
    assert action(p, "bash", command="rm a.tmp") == "ask"
    assert always_rule("write", {"path": "x"}) == "write"


def test_compose_request_over_definition_over_settings() -> None:
    from roost.approvals.callrules import compose

    assert compose({}, None, False, "auto", {}, 1800.0) is None
    p = compose({}, None, False, "ask", {"deny": ["bash:rm *"]}, 1800.0)
    assert p is not None and p["mode"] == "ask" and p["deny"] == ["bash:rm *"]
    p = compose({"approvals": "auto", "allow": ["bash"]}, "ask", False, "ask", {}, 60.0)
    assert p is not None and p["mode"] == "auto" and p["allow"] == ["bash"] and p["timeout"] == 60
    assert compose({}, "ask", False, "auto", {}, 1800.0)["mode"] == "ask"  # type: ignore[index]
    # a project's definition only adds strictness
    p = compose({}, {"mode": "auto", "allow": ["bash"], "deny": ["write:outside"]}, True, "ask", {}, 1800.0)
    assert p is not None and p["mode"] == "ask" and p["allow"] == [] and p["deny"] == ["write:outside"]
    # a child cannot ask for auto under an asking parent
    parent = compose({"approvals": "ask"}, None, False, "auto", {}, 1800.0)
    child = compose({"approvals": "auto"}, None, False, "auto", {}, 1800.0, parent=parent)
    assert child is not None and child["mode"] == "ask"
