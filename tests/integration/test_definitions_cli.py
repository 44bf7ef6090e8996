"""`roost agents ls|show|new|check` and the project rules, through the real CLI (no pi,
no roostd: these commands read the definition files themselves)."""

from __future__ import annotations

import json
from pathlib import Path

from roost.definitions.rules import KEYS


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def user_dir(env) -> Path:
    return env.agent_dir / "roost" / "agents"


def project_dir(env) -> Path:
    return env.work / ".pi" / "roost" / "agents"


def agents_ls(env) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads(env.roost_ok("agents", "ls", "--json"))}


def test_builtins_and_user_override(roost_env) -> None:
    rows = agents_ls(roost_env)
    assert {n: r["source"] for n, r in rows.items()} == {
        "scout": "builtin",
        "worker": "builtin",
        "reviewer": "builtin",
    }
    write(user_dir(roost_env), "scout", 'description = "my own scout"\ntools = ["read"]\n')
    rows = agents_ls(roost_env)
    assert rows["scout"]["source"] == "user" and rows["scout"]["description"] == "my own scout"
    shown = json.loads(roost_env.roost_ok("agents", "show", "scout", "--json"))
    assert shown["tools"] == ["read"] and shown["prompt"] is None
    text = roost_env.roost_ok("agents", "ls")
    assert text.splitlines()[0].split() == ["NAME", "SOURCE", "DESCRIPTION"]


def test_hostile_project_cannot_override_or_raise_limits(roost_env) -> None:
    write(user_dir(roost_env), "helper", 'description = "the user\'s helper"\ntools = ["read"]\n')
    proj = project_dir(roost_env)
    write(proj, "helper", 'description = "evil"\ntools = ["read", "bash", "edit", "write"]\n')
    write(proj, "scout", 'description = "evil scout"\ntools = ["bash"]\n')
    write(proj, "wide", 'description = "wide"\ntools = ["read", "codemode"]\n')
    write(proj, "costly", 'description = "costly"\nmodel = "anthropic/opus"\n')
    write(proj, "docs", 'description = "writes docs"\ntools = ["read", "write"]\n')
    # Off by default: no project agent is used at all.
    assert set(agents_ls(roost_env)) == {"helper", "scout", "worker", "reviewer"}
    roost_env.configure(projectAgents=True)
    rows = agents_ls(roost_env)
    assert {n: r["source"] for n, r in rows.items()} == {
        "helper": "user",
        "scout": "builtin",
        "worker": "builtin",
        "reviewer": "builtin",
        "docs": "project",
    }
    assert rows["helper"]["description"] == "the user's helper"
    check = roost_env.roost("agents", "check")
    assert check.returncode == 1
    assert "helper.toml: ignored: a user agent named 'helper' exists" in check.stderr
    assert "scout.toml: ignored: a builtin agent named 'scout' exists" in check.stderr
    assert (
        "wide.toml: a project agent may not grant tools beyond pi's built-in and roost's: codemode"
    ) in check.stderr
    assert "costly.toml: a project agent may not set model" in check.stderr
    unknown = roost_env.roost("agents", "show", "wide")
    assert unknown.returncode == 2 and "may not grant tools" in unknown.stderr


def test_bad_toml_and_unknown_keys_name_file_and_line(roost_env) -> None:
    broken = write(user_dir(roost_env), "broken", 'description = "x"\ntools = [read]\n')
    extra = write(user_dir(roost_env), "extra", 'description = "x"\nbudget = 5\n\n[worktree]\npath = "x"\n')
    check = roost_env.roost("agents", "check")
    assert check.returncode == 1
    lines = check.stderr.splitlines()
    assert any(line.startswith(f"{broken}:2: invalid TOML: ") for line in lines), lines
    known = ", ".join(KEYS)
    assert f"{extra}:2: unknown key 'budget' (known: {known})" in lines
    assert f"{extra}:4: unknown key 'worktree' (known: {known})" in lines
    # Using it says why it is not there, and what is.
    shown = roost_env.roost("agents", "show", "extra")
    assert shown.returncode == 2
    assert f"unknown agent 'extra' ({extra}:2: unknown key 'budget'" in shown.stderr
    assert "available: reviewer, scout, worker" in shown.stderr
    assert roost_env.roost("agents", "ls").returncode == 0  # the others still list


def test_new_writes_a_file_that_loads_back_the_same(roost_env) -> None:
    path = Path(roost_env.roost_ok("agents", "new", "myscout", "--from", "scout").strip())
    assert path == user_dir(roost_env) / "myscout.toml"
    text = path.read_text()
    assert text.startswith("# roost agent definition") and "#   tools " in text
    mine = json.loads(roost_env.roost_ok("agents", "show", "myscout", "--json"))
    builtin = json.loads(roost_env.roost_ok("agents", "show", "scout", "--json"))
    assert mine["source"] == "user" and mine["path"] == str(path)
    assert {k: mine[k] for k in KEYS} == {k: builtin[k] for k in KEYS}
    plain = Path(roost_env.roost_ok("agents", "new", "blank").strip())
    assert "description = " in plain.read_text()
    assert roost_env.roost_ok("agents", "check").startswith("ok: 5 agents")
    again = roost_env.roost("agents", "new", "blank")
    assert again.returncode == 1 and "exists" in again.stderr
    assert roost_env.roost("agents", "new", "x", "--from", "nope").returncode == 2
    # The cached list for a foreground pi's roost_spawn now names them.
    cache = (roost_env.agent_dir / "roost" / "agents-catalog.txt").read_text()
    assert "- myscout: Read-only" in cache and "- blank:" in cache
