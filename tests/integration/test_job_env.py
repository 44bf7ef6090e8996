"""Integration: a job runs with the environment of the command that created it (README:
Environment), with the fake pi and shell jobs.

roostd is started first by a command whose environment lacks the variables under test, so
a job that got roostd's environment (as before) would not see them. The fake pi's
`[[env NAME ...]]` answers with a hash of each value (`env NAME=sha256:…`), so no value
reaches a session file: the leak test greps all of ROOST_HOME but env.json for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat

from kit.jobs import alive, settle
from kit.lab import Lab
from kit.wait import wait_until

from roost.pi.transcript import content_text
from roost.wire.protocol import RequestError

SECRET = "sk-test-7f3a91c2e5b84d06a1c9"


def seen(name: str, value: str | None) -> str:
    """What the fake pi answers for `[[env NAME]]` when its environment has `value`."""
    if value is None:
        return f"env {name} unset"
    return f"env {name}=sha256:{hashlib.sha256(value.encode()).hexdigest()[:16]}"


def answer(env: Lab, job: str) -> str:
    """The last answer of the job's settled run, from its session file."""
    assert settle(env, job) == "done"
    said = [
        content_text(e["message"].get("content"))
        for e in env.session(job)
        if e.get("type") == "message" and e["message"].get("role") == "assistant"
    ]
    return said[-1]


def started_without(env: Lab, *names: str) -> None:
    """roostd up, started by a command whose environment has none of `names`."""
    assert not any(name in env.env for name in names)
    env.roost_ok("daemon", "start")


def env_file(env: Lab, job: str) -> dict:
    return json.loads((env.job_dir(job) / "env.json").read_text())


def test_a_shell_job_gets_the_callers_variables(roost_env: Lab) -> None:
    env = roost_env
    started_without(env, "FOO")
    job = env.run_job("--shell", "--", "sh", "-c", 'echo "FOO=[$FOO]"', env={"FOO": "1"})
    assert settle(env, job) == "done"
    assert "FOO=[1]" in (env.job_dir(job) / "output.log").read_text()
    path = env.job_dir(job) / "env.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(env.job_dir(job).stat().st_mode) == 0o700
    assert env_file(env, job)["env"]["FOO"] == "1"


def test_a_pi_job_gets_the_callers_variables_and_roosts_own_win(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    started_without(env, "MY_API_KEY")
    caller = {
        "MY_API_KEY": SECRET,
        "ROOST_JOB_ID": "bogus",
        "ROOST_EXT_SOCK": "/nowhere",
        "PI_CODING_AGENT_DIR": str(env.root / "not-the-agent-dir"),
        "ROOST_FAULTS": "/nowhere",
        "PI_JOB_TOKEN": "t0ken",
    }
    job = env.run_job(
        "[[env MY_API_KEY ROOST_JOB_ID PI_CODING_AGENT_DIR ROOST_FAULTS PI_JOB_TOKEN ROOST_HOME]]", env=caller
    )
    assert answer(env, job) == "; ".join(
        [
            seen("MY_API_KEY", SECRET),
            seen("ROOST_JOB_ID", job),
            seen("PI_CODING_AGENT_DIR", str(env.agent_dir)),
            seen("ROOST_FAULTS", None),
            seen("PI_JOB_TOKEN", None),
            seen("ROOST_HOME", str(env.roost_home)),
        ]
    )
    kept = env_file(env, job)
    assert kept["source"] == "roost run" and kept["env"]["MY_API_KEY"] == SECRET
    assert not {
        "ROOST_JOB_ID",
        "ROOST_EXT_SOCK",
        "PI_CODING_AGENT_DIR",
        "PI_JOB_TOKEN",
        "ROOST_FAULTS",
        "PWD",
    } & set(kept["env"])


def test_restarts_keep_the_environment(fake_pi_env: Lab) -> None:
    """A worker killed (roostd restarts it) and a roostd killed with the worker (the next
    roostd, started without the variable, starts a new one): the same environment."""
    env = fake_pi_env
    env.configure(restartBackoffSeconds=0.05)
    started_without(env, "MY_API_KEY")
    job = env.run_job("[[env MY_API_KEY]]", env={"MY_API_KEY": SECRET})
    assert answer(env, job) == seen("MY_API_KEY", SECRET)

    worker = env.show(job)["worker"]["pid"]
    os.kill(worker, signal.SIGKILL)
    wait_until(
        lambda: env.show(job)["worker"]["pid"] not in (None, worker),
        20,
        what="roostd to restart the killed worker",
    )
    assert env.reply(job, "[[env MY_API_KEY]] after a crash") in ("delivered", "queued", "started")
    assert answer(env, job) == seen("MY_API_KEY", SECRET)

    daemon, worker = env.daemon_pid(), env.show(job)["worker"]["pid"]
    assert daemon is not None and worker is not None
    for pid in (daemon, worker):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(daemon) and not alive(worker), 10, what="both to die")
    assert env.reply(job, "[[env MY_API_KEY]] after roostd") == "started"  # a new roostd
    assert answer(env, job) == seen("MY_API_KEY", SECRET)
    assert env.show(job)["worker"]["pid"] not in (None, worker)


def test_start_refreshes_the_environment_and_reply_keeps_it(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    started_without(env, "MY_API_KEY")
    job = env.run_job("[[env MY_API_KEY]]", env={"MY_API_KEY": "old"})
    assert answer(env, job) == seen("MY_API_KEY", "old")
    env.roost_ok("stop", job)
    env.cli("start", job, env={"MY_API_KEY": "new"})
    wait_until(lambda: env.show(job)["worker"]["state"] == "running", 20, what="the started worker")
    assert env.show(job)["environment"]["source"] == "roost start"
    out = env.cli("reply", job, "[[env MY_API_KEY]]", env={"MY_API_KEY": "ignored"}).stdout
    assert out.strip() in ("delivered", "queued", "started")
    assert answer(env, job) == seen("MY_API_KEY", "new")


def test_spawned_children_get_their_parents_environment(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    started_without(env, "MY_API_KEY")
    parent = env.run_job("[[spawn {{env MY_API_KEY}}]]", env={"MY_API_KEY": SECRET})
    assert answer(env, parent) == "spawn sent"
    child = wait_until(lambda: env.children(parent), 20, what="the child")[0]["id"]
    assert answer(env, child) == seen("MY_API_KEY", SECRET)
    assert env_file(env, child)["source"] == "roost_spawn"


def test_a_foreground_pis_spawn_sends_its_environment(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    started_without(env, "MY_API_KEY")
    with env.client() as client:  # this test process is the foreground peer
        client.request("peer_register", pid=os.getpid(), name="fg")
        child = client.request(
            "spawn",
            task="[[env MY_API_KEY]]",
            cwd=str(env.work),
            env={"MY_API_KEY": SECRET, "ROOST_JOB_ID": "x"},
        )["id"]
        assert answer(env, child) == seen("MY_API_KEY", SECRET)
        assert "ROOST_JOB_ID" not in env_file(env, child)["env"]


def test_a_bad_env_is_refused_and_creates_nothing(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("daemon", "start")
    for bad, why in (
        ([], "must be an object"),
        ({"A": 1}, "value of A"),
        ({"A=B": "x"}, "bad variable name"),
        ({"A": "x" * (1 << 20)}, "bytes"),
    ):
        try:
            env.request("run", task="t", cwd=str(env.work), env=bad)
        except RequestError as exc:
            assert exc.code == "bad_request" and why in exc.message, exc.message
            assert "x" * 100 not in exc.message
        else:
            raise AssertionError(f"env {bad!r} was accepted")
    assert env.ls() == []


def test_no_value_reaches_a_row_an_event_or_a_log(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    started_without(env, "MY_API_KEY")
    pi_job = env.run_job("[[env MY_API_KEY]]", env={"MY_API_KEY": SECRET})
    shell = env.run_job(
        "--shell", "--", "sh", "-c", 'test -n "$MY_API_KEY" && echo has-it', env={"MY_API_KEY": SECRET}
    )
    assert answer(env, pi_job) == seen("MY_API_KEY", SECRET)
    assert settle(env, shell) == "done"
    assert "has-it" in (env.job_dir(shell) / "output.log").read_text()
    shown = env.cli_json("show", pi_job, "--json")
    assert "MY_API_KEY" in shown["environment"]["names"]  # the name, where it helps
    outputs = [
        json.dumps(shown),
        env.roost_ok("show", pi_job),
        env.roost_ok("ls", "--json"),
        env.roost_ok("show", shell, "--json"),
        env.roost_ok("events", "--json"),
        env.roost_ok("logs", pi_job),
        env.roost_ok("logs", shell),
    ]
    assert not [out for out in outputs if SECRET in out]
    leaks = []
    for path in env.roost_home.rglob("*"):
        if path.is_file() and path.name != "env.json" and SECRET.encode() in path.read_bytes():
            leaks.append(path)
    assert leaks == []
    for job in (pi_job, shell):
        assert SECRET in (env.job_dir(job) / "env.json").read_text()
    env.roost_ok("rm", pi_job)
    assert not (env.job_dir(pi_job) / "env.json").exists()


def test_a_job_without_a_stored_environment_gets_roostds(fake_pi_env: Lab) -> None:
    """A client that sends no env (or a job from an older roost): roostd's, as before."""
    env = fake_pi_env
    env.env["MY_API_KEY"] = "from-roostd"
    env.roost_ok("daemon", "start")
    job = env.request("run", task="[[env MY_API_KEY]]", cwd=str(env.work))["id"]
    assert answer(env, job) == seen("MY_API_KEY", "from-roostd")
    assert env.show(job)["environment"] is None


def test_notify_hooks_find_notify_send_where_it_was_enabled(fake_pi_env: Lab) -> None:
    """notify-send only on the PATH of `roost notify --enable`, not on roostd's."""
    env = fake_pi_env
    started_without(env)
    bin_dir = env.root / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "notify-send"
    tool.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {env.root}/notified\n")
    tool.chmod(0o755)
    desktop = {"PATH": f"{bin_dir}:{env.env['PATH']}", "DBUS_SESSION_BUS_ADDRESS": "unix:x"}
    assert "on for" in env.roost_ok("notify", "--enable", env=desktop)
    hook = json.loads((env.agent_dir / "roost.json").read_text())["hooks"]["job.needs_input"]
    assert f"PATH={desktop['PATH']}" in hook and "DBUS_SESSION_BUS_ADDRESS=unix:x" in hook
    env.run_job("[[ask]] plan", "--name", "planner")
    notified = env.root / "notified"
    text = wait_until(lambda: notified.exists() and notified.read_text(), 30, "a notification")
    assert "roost: planner needs input" in text


def test_run_says_when_the_callers_agent_dir_is_not_the_one_pi_uses(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    started_without(env)
    other = env.root / "other-agent-dir"
    proc = env.cli("run", "hello", env={"PI_CODING_AGENT_DIR": str(other)})
    assert f"roostd's agent dir {env.agent_dir}, not {other}" in proc.stderr
    assert settle(env, proc.stdout.strip()) == "done"
    same = env.cli("run", "hello again")
    assert same.stderr == ""
