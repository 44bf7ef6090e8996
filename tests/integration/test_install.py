"""`roost install`: the extension lands in `<agent dir>/extensions/roost/` and the real pi
loads it from there (its tools reach the model), idempotently; `--uninstall` removes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.lab import Lab
from kit.testpi import require_pi

from roost.cli import install as installer
from roost.fakellm import tool_names
from roost.host import paths

ROOST_TOOLS = {"roost_agents", "roost_send", "roost_spawn"}


def roost_cli(agent_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "ROOST_"))}
    env["PI_CODING_AGENT_DIR"] = str(agent_dir)
    env["ROOST_HOME"] = str(agent_dir.parent / "roost-home")
    return subprocess.run(
        [sys.executable, "-m", "roost.cli.main", "install", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


# -- the files -------------------------------------------------------------------------------
def test_install_is_idempotent_and_uninstall_removes_it(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    target = agent / "extensions" / "roost"

    out = roost_cli(agent, "--print-path")
    assert out.returncode == 0 and out.stdout.strip() == str(target)
    assert not target.exists()

    first = roost_cli(agent)
    assert first.returncode == 0, first.stderr
    assert "installed" in first.stdout and str(target) in first.stdout
    assert sorted(p.name for p in target.iterdir()) == [
        "index.ts",
        "own_home.ts",
        "roost.ts",
        "session_lock.ts",
        "toolgate.ts",
    ]
    source = paths.extension_path().parent
    for name in ("roost.ts", "session_lock.ts", "own_home.ts", "toolgate.ts"):
        assert (target / name).read_bytes() == (source / name).read_bytes()
    # roost.ts imports its helper relatively, so both must sit side by side.
    assert 'from "./session_lock.ts"' in (target / "roost.ts").read_text()

    again = roost_cli(agent)
    assert again.returncode == 0 and again.stdout.startswith("up to date")

    (target / "roost.ts").write_text("// stale\n")
    fixed = roost_cli(agent)
    assert fixed.returncode == 0 and "updated" in fixed.stdout and "roost.ts" in fixed.stdout
    assert (target / "roost.ts").read_bytes() == (source / "roost.ts").read_bytes()

    gone = roost_cli(agent, "--uninstall")
    assert gone.returncode == 0 and "removed" in gone.stdout
    assert not target.exists() and (agent / "extensions").is_dir()
    assert "not installed" in roost_cli(agent, "--uninstall").stdout


def test_install_refuses_a_directory_it_did_not_make(tmp_path: Path) -> None:
    target = tmp_path / "agent" / "extensions" / "roost"
    target.mkdir(parents=True)
    (target / "index.ts").write_text("export default function () {}\n")
    for args in ((), ("--uninstall",)):
        proc = roost_cli(tmp_path / "agent", *args)
        assert proc.returncode != 0 and "not installed by roost" in proc.stderr
    assert (target / "index.ts").read_text() == "export default function () {}\n"


# -- the real pi loads it --------------------------------------------------------------------
@pytest.fixture
def lab() -> Iterator[Lab]:
    try:
        require_pi()
    except FileNotFoundError as e:
        pytest.fail(f"this test needs the real pi: {e}", pytrace=False)
    with Lab(llm=True) as lab_:
        yield lab_


def offered_tools(
    lab: Lab, extensions: tuple[Path, ...] = (), extra: dict[str, str] | None = None
) -> list[str]:
    """Start pi, prompt once, and return the tool names of its model request."""
    env = {"ROOST_HOME": str(lab.root / "roost-home"), **(extra or {})}
    pi = lab.spawn_pi(extensions=extensions, extra_env=env)
    since = len(lab.llm.requests)
    pi.run_prompt("hello", timeout=30)
    request = lab.llm.wait_for_request(since=since, timeout=10)
    rc = pi.close()
    assert rc == 0, pi.stderr_text()
    assert "Failed to load extension" not in pi.stderr_text(), pi.stderr_text()
    return tool_names(request)


def test_pi_loads_the_installed_extension(lab: Lab) -> None:
    before = offered_tools(lab)
    assert not ROOST_TOOLS & set(before)

    assert roost_cli(lab.agent_dir).returncode == 0
    tools = offered_tools(lab)
    assert set(tools) >= ROOST_TOOLS
    assert set(tools) - ROOST_TOOLS == set(before)  # pi's own tools are untouched

    # Installed and passed with -e too (as a worker does): loaded once, no clash.
    twice = offered_tools(lab, extensions=(paths.extension_path(),))
    assert sorted(twice) == sorted(tools)

    # In a roost job the installed copy steps aside for the worker's -e copy.
    in_job = offered_tools(lab, extra={"ROOST_EXT_SOCK": str(lab.root / "no-such.sock")})
    assert not ROOST_TOOLS & set(in_job)


def test_agent_tools_false_hides_the_tools(lab: Lab) -> None:
    assert roost_cli(lab.agent_dir).returncode == 0
    (lab.agent_dir / "roost.json").write_text(json.dumps({"agentTools": False}))
    tools = offered_tools(lab)
    assert not ROOST_TOOLS & set(tools)
    assert "bash" in tools


def test_install_uses_the_package_files() -> None:
    files = installer.wanted_files()
    assert set(files) == {"index.ts", "roost.ts", "session_lock.ts", "own_home.ts", "toolgate.ts"}
    assert installer.MARKER.encode() in files["index.ts"]


def test_a_foreground_pi_starts_roostd_on_its_first_roost_tool_call(lab: Lab) -> None:
    from roost.fakellm import last_is_tool_result, last_user_contains, text, tool_call

    assert roost_cli(lab.agent_dir).returncode == 0
    home = lab.root / "roost-home"
    env = {"ROOST_HOME": str(home)}
    lab.llm.add(last_user_contains("who is there"), tool_call("roost_agents", {}), times=1)
    lab.llm.add(last_is_tool_result("roost_agents"), text("nobody"))
    pi = lab.spawn_pi(session=lab.root / "fg.jsonl", extra_env=env)
    try:
        assert not (home / "roostd.sock").exists()
        pi.run_prompt("who is there", timeout=60)
        answered = lab.llm.wait_for_request(last_is_tool_result("roost_agents"), timeout=10)
        result = [m for m in answered["messages"] if m["role"] == "tool"][-1]["content"]
        assert "no other agent sessions" in json.dumps(result), result
    finally:
        pi.close()
        status = subprocess.run(
            [sys.executable, "-m", "roost.cli.main", "daemon", "stop", "--jobs"],
            env={**os.environ, "ROOST_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert "roostd stopped" in status.stdout, status.stdout + status.stderr
