"""roost.sandbox: bwrap's argument list, the variables a sandboxed command never sees, the
path rules, a job's sandbox composed (a child never loosens its parent's), the refusal
without a working bwrap; roost.json's and a definition's `sandbox`; doctor's check."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from roost import sandbox
from roost.cli.doctor.report import Report, check_sandbox
from roost.config import Settings
from roost.definitions.rules import parse

HOME, RH, AGENT = "/home/u", "/home/u/.local/state/roost", "/home/u/.pi/agent"
EXISTING = {
    "/work",
    "/home/u/.ssh",
    "/home/u/.netrc",
    "/home/u/.pi/agent/auth.json",
    RH,
    "/data",
    "/home/u",
    "/home/u/.local/state/roost/worktrees/abc",
}
DIRS = EXISTING - {"/home/u/.netrc", "/home/u/.pi/agent/auth.json"}


def plan(
    cwd: str = "/work",
    writable: tuple[str, ...] = (),
    network: str = "none",
) -> sandbox.Plan:
    return sandbox.plan(
        "/usr/bin/bwrap",
        cwd,
        writable,
        network,
        home=HOME,
        roost_home=RH,
        agent_dir=AGENT,
        exists=EXISTING.__contains__,
        isdir=DIRS.__contains__,
        realpath=lambda p: p,
    )


def pairs(argv: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The mount options in order, each with its arguments."""
    out: list[tuple[str, ...]] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--bind", "--ro-bind"):
            out.append(argv[i : i + 3])
            i += 3
        elif argv[i] in ("--tmpfs", "--dev", "--proc", "--chdir"):
            out.append(argv[i : i + 2])
            i += 2
        else:
            i += 1
    return out


def test_plan_read_only_but_the_job_dir_and_tmp_secrets_hidden() -> None:
    p = plan(writable=("/data",))
    argv = p.argv
    assert argv[:5] == ("/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev")
    assert argv[-3:] == ("--", "/bin/bash", "-c")
    for flag in ("--unshare-pid", "--die-with-parent", "--new-session", "--unshare-net"):
        assert flag in argv
    mounts = pairs(argv)
    assert ("--tmpfs", "/tmp") in mounts
    assert ("--tmpfs", "/home/u/.ssh") in mounts and ("--tmpfs", RH) in mounts
    assert ("--ro-bind", "/dev/null", "/home/u/.netrc") in mounts  # a file: /dev/null
    assert ("--ro-bind", "/dev/null", "/home/u/.pi/agent/auth.json") in mounts
    assert ("--bind", "/work", "/work") in mounts and ("--bind", "/data", "/data") in mounts
    assert ("--chdir", "/work") in mounts
    assert p.roots == ("/work", "/data")
    # the secrets that do not exist are not mounted over (bwrap cannot on a read-only /)
    assert not any("/home/u/.aws" in part for part in argv)


def test_network_host_keeps_the_network() -> None:
    assert "--unshare-net" not in plan(network="host").argv
    assert json.loads(plan(network="host").to_json())["network"] == "host"


def test_a_root_inside_roost_home_is_bound_after_hiding_it() -> None:
    """A worktree lives in ROOST_HOME: ROOST_HOME is hidden, the worktree bound over it."""
    cwd = f"{RH}/worktrees/abc"
    mounts = pairs(plan(cwd=cwd).argv)
    assert mounts.index(("--tmpfs", RH)) < mounts.index(("--bind", cwd, cwd))


def test_a_root_holding_secrets_hides_them_again() -> None:
    """cwd = $HOME: binding it writable must not uncover ~/.ssh or ROOST_HOME."""
    mounts = pairs(plan(cwd=HOME).argv)
    bind = mounts.index(("--bind", HOME, HOME))
    assert ("--tmpfs", "/home/u/.ssh") in mounts[bind + 1 :]
    assert ("--tmpfs", RH) in mounts[bind + 1 :]


def test_secret_variables_are_dropped() -> None:
    env = {
        "OPENAI_API_KEY": "x",
        "ANTHROPIC_API_KEY": "x",
        "ANTHROPIC_OAUTH_TOKEN": "x",
        "GEMINI_API_KEY": "x",
        "GH_TOKEN": "x",
        "github_token": "x",
        "MY_SECRET": "x",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AZURE_OPENAI_API_KEY": "x",
        "DB_PASSWORD": "x",
        "GOOGLE_APPLICATION_CREDENTIALS": "x",
        "SSH_AUTH_SOCK": "x",
        "PATH": "/bin",
        "HOME": "/h",
        "LANG": "C",
        "TERM": "xterm",
        "TOKENIZERS": "1",
        "ROOST_HOME": "/r",
        "KEYBOARD": "us",
    }
    assert sandbox.filtered_env(env) == {
        "PATH": "/bin",
        "HOME": "/h",
        "LANG": "C",
        "TERM": "xterm",
        "TOKENIZERS": "1",
        "ROOST_HOME": "/r",
        "KEYBOARD": "us",
    }


def test_path_rules() -> None:
    assert sandbox.inside("/work", "/work") and sandbox.inside("/work/a/b", "/work")
    assert not sandbox.inside("/workshop", "/work") and not sandbox.inside("/", "/work")
    parent = {"network": "none", "writable": ["/data"]}
    assert sandbox.child_cwd_allowed("/work/sub", "/work", parent, realpath=lambda p: p)
    assert sandbox.child_cwd_allowed("/data", "/work", parent, realpath=lambda p: p)
    assert not sandbox.child_cwd_allowed("/home/u", "/work", parent, realpath=lambda p: p)


def test_compose() -> None:
    assert sandbox.compose(None, None, False, False, "none", (), None) is None
    assert sandbox.compose(True, None, False, False, "none", ("/d",), None) == {
        "network": "none",
        "writable": ["/d"],
    }
    assert sandbox.compose(None, None, True, False, "host", (), None) == {
        "network": "host",
        "writable": [],
    }  # the definition's sandbox = true
    assert sandbox.compose(None, None, False, True, "none", (), None) is not None  # roost.json
    assert sandbox.compose(False, None, False, True, "none", (), None) is None  # --no-sandbox
    assert sandbox.compose(False, None, True, False, "none", (), None) is not None
    with pytest.raises(sandbox.SandboxError):
        sandbox.compose(True, "bridge", False, False, "none", (), None)
    parent = {"network": "none", "writable": ["/d"]}
    # a child: sandboxed whatever it asks, never more network or folders than its parent
    assert sandbox.compose(False, "host", False, False, "host", ("/x",), parent) == parent
    assert sandbox.compose(None, None, False, False, "none", (), {"network": "host"}) == {
        "network": "host",
        "writable": [],
    }
    assert sandbox.compose(None, "none", False, False, "none", (), {"network": "host"}) == {
        "network": "none",
        "writable": [],
    }


def test_no_bwrap_is_refused_naming_the_package(tmp_path: Path) -> None:
    with pytest.raises(sandbox.SandboxError, match="bubblewrap") as info:
        sandbox.check({"ROOST_BWRAP": str(tmp_path / "missing")})
    assert "apt-get install bubblewrap" in str(info.value)
    with pytest.raises(sandbox.SandboxError, match="bwrap is not installed"):
        sandbox.check({"PATH": str(tmp_path)})
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(sandbox.SandboxError, match="No permissions to create new namespace"):
        sandbox.check({"ROOST_BWRAP": str(broken)})


def test_settings_and_definition() -> None:
    assert Settings.from_dict({}).sandbox is False
    assert Settings.from_dict({"sandbox": True}).sandbox is True
    s = Settings.from_dict({"sandbox": {"writable": ["~/cache"], "network": "host"}})
    assert (s.sandbox, s.sandboxWritable, s.sandboxNetwork) == (True, ("~/cache",), "host")
    s = Settings.from_dict({"sandbox": {"enabled": False, "writable": [3], "network": "x"}})
    assert (s.sandbox, s.sandboxWritable, s.sandboxNetwork) == (False, (), "none")
    defn, errors = parse("sandbox = true\n", "boxed", "user", "/x/boxed.toml")
    assert not errors and defn is not None and defn.sandbox is True
    assert defn.to_json()["sandbox"] is True
    _, errors = parse('sandbox = "yes"\n', "boxed", "user", "/x/boxed.toml")
    assert errors and "expected true or false" in errors[0].message


def test_doctor_checks_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    monkeypatch.setenv("ROOST_BWRAP", str(tmp_path / "missing"))
    report = Report()
    check_sandbox(report)
    (check,) = report.checks
    assert (check.name, check.level) == ("sandbox", "warn") and "bubblewrap" in check.fix
    (tmp_path / "roost.json").write_text('{"sandbox": true}')
    report = Report()
    check_sandbox(report)
    assert report.checks[0].level == "fail"


bwrap_works = True
try:
    sandbox.check()
except sandbox.SandboxError:
    bwrap_works = False


@pytest.mark.skipif(not bwrap_works, reason="no working bwrap")
def test_the_plan_runs_under_the_real_bwrap(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    p = sandbox.plan(
        sandbox.check(),
        str(work),
        [],
        "none",
        home=str(tmp_path / "home"),
        roost_home=str(tmp_path / "rh"),
        agent_dir=str(tmp_path / "agent"),
    )
    script = f"echo a > {work}/a && (echo b > {outside}/b) 2>/dev/null; echo $$"
    done = subprocess.run(
        [*p.argv, script],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": os.environ["PATH"]},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (work / "a").exists() and not (outside / "b").exists()
    assert int(done.stdout.strip()) < 10
