"""Events, hooks, notifications and `roost wait --any/--all`.

Unit tests of the event log (roost.events.writer) first, then integration tests with a
real roostd and the fake pi. The real-pi run of every event type is in test_e2e_events.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from kit.lab import Lab
from kit.wait import wait_until

from roost.events import log as eventlog
from roost.events.writer import EVENT_TYPES, EventLog

WAIT = 30.0


# -- the log, without a daemon ------------------------------------------------------------
class Named:
    id, name = "a1b2c3d4", "worker"


def test_seq_continues_after_reopening_and_a_torn_last_line(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.open()
    for _ in range(3):
        log.emit("job.created", Named(), kind="pi", cwd="/", parent=None)
    log.close()
    with open(tmp_path / "events.jsonl", "ab") as handle:
        handle.write(b'{"seq":4,"time":"x","ty')  # a power cut mid-line
    log = EventLog(tmp_path)
    log.open()
    assert log.emit("job.removed", Named())["seq"] == 4
    log.close()
    seqs = [e["seq"] for e in eventlog.read_events(tmp_path)]
    assert seqs == [1, 2, 3, 4]
    assert [e["seq"] for e in eventlog.read_events(tmp_path, since=2)] == [3, 4]


def test_rotation_keeps_older_files_and_reading_spans_them(tmp_path: Path) -> None:
    log = EventLog(tmp_path, max_bytes=400, keep=2)
    log.open()
    for _ in range(40):
        log.emit("job.state", Named(), **{"from": "running"}, to="done", reason="")
    log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["events.jsonl", "events.jsonl.1", "events.jsonl.2"], files
    seqs = [e["seq"] for e in eventlog.read_events(tmp_path)]
    assert seqs == list(range(seqs[0], 41)) and seqs[0] > 1  # the oldest were deleted
    reopened = EventLog(tmp_path, max_bytes=400, keep=2)
    reopened.open()
    assert reopened.seq == 40
    reopened.close()


def test_event_filters() -> None:
    event = {
        "seq": 1,
        "type": "message.sent",
        "job": {"id": "f1234567", "name": "me"},
        "from": {"id": "f1234567", "name": "me"},
        "to": {"id": "a1b2c3d4", "name": "w"},
    }
    assert eventlog.matches(event, None, "w") and eventlog.matches(event, ["message."], None)
    assert not eventlog.matches(event, ["job.state"], None)
    assert not eventlog.matches(event, None, "other")


# -- helpers ------------------------------------------------------------------------------
def run_job(env: Lab, task: str, *options: str) -> str:
    return env.roost_ok("run", *options, task).strip()


def events(env: Lab) -> list[dict[str, Any]]:
    return list(eventlog.read_events(env.roost_home))


def of_type(env: Lab, kind: str, job: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in events(env) if e["type"] == kind and (job is None or (e["job"] or {}).get("id") == job)
    ]


def check_fields(event: dict[str, Any]) -> None:
    assert set(event) >= {"seq", "time", "type", "job"}, event
    assert set(event) - {"seq", "time", "type", "job"} == set(EVENT_TYPES[event["type"]]), event


def hook_script(env: Lab, name: str, body: str) -> list[str]:
    script = env.root / f"{name}.py"
    script.write_text(body)
    return [sys.executable, str(script)]


RECORD_HOOK = """
import json, os, sys
event = json.load(sys.stdin)
with open(sys.argv[1], "a") as out:
    out.write(json.dumps({"event": event, "type": os.environ["ROOST_EVENT_TYPE"],
                          "job": os.environ["ROOST_JOB"]}) + "\\n")
"""


# -- the log, from a real roostd ------------------------------------------------------------
def test_lifecycle_events_in_order_with_their_fields_and_seq_across_a_restart(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    env.configure(restartBackoffSeconds=0.05, restartMaxCrashes=2)
    job = run_job(env, "[[dialog select A,B]] choose", "--name", "chooser")
    wait_until(lambda: of_type(env, "job.needs_input", job), WAIT, "needs_input")
    assert env.roost_ok("reply", job, "B").strip() == "delivered"
    env.wait_settled(job, WAIT)
    env.roost_ok("daemon", "stop")
    crasher = run_job(env, "[[crash]] boom", "--name", "crasher")  # starts a new roostd
    wait_until(lambda: of_type(env, "job.failed", crasher), WAIT, "the crash loop to give up")
    env.roost_ok("rm", job)

    log = events(env)
    seqs = [e["seq"] for e in log]
    assert seqs == list(range(1, len(log) + 1)), seqs  # no gap, no duplicate, restart included
    for event in log:
        check_fields(event)
    kinds = [e["type"] for e in log]
    assert kinds[:2] == ["daemon.started", "job.created"]
    assert kinds.count("daemon.started") == 2 and kinds.count("daemon.stopped") == 1
    assert kinds.index("daemon.stopped") < len(kinds) - 1 - kinds[::-1].index("daemon.started")
    (asked,) = of_type(env, "job.needs_input", job)
    assert asked["options"] == ["A", "B"] and asked["dialog"] is True
    assert asked["job"] == {"id": job, "name": "chooser"}
    moves = [(e["from"], e["to"]) for e in of_type(env, "job.state", job)]
    assert moves[:4] == [
        ("starting", "running"),
        ("running", "needs_input"),
        ("needs_input", "running"),
        ("running", "done"),
    ], moves
    assert moves[-1][1] == "stopped" and len(of_type(env, "job.removed", job)) == 1
    # Every crash has its worker.crashed, the last one too (it made roostd give up).
    crashed = of_type(env, "worker.crashed", crasher)
    assert [e["crashes"] for e in crashed] == [1, 2], crashed
    (gave_up,) = of_type(env, "worker.gave_up", crasher)
    (failed,) = of_type(env, "job.failed", crasher)
    assert crashed[-1]["seq"] < gave_up["seq"] < failed["seq"] and "gave up" in failed["error"]
    assert crashed[-1]["reason"] == gave_up["reason"]

    text = env.roost_ok("events", "--job", "chooser")
    assert "running -> needs_input" in text and "asks: Pick one" in text
    assert "crasher" not in text
    only = [
        json.loads(x)
        for x in env.roost_ok("events", "--json", "--type", "worker.", "--since", "3").splitlines()
    ]
    assert [e["type"] for e in only] == ["worker.crashed", "worker.crashed", "worker.gave_up"]


def test_follow_started_mid_stream_gets_every_event_exactly_once(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    first = run_job(env, "one")
    env.wait_settled(first, WAIT)
    mid = events(env)[-1]["seq"]
    out = env.root / "follow.out"
    with open(out, "w") as handle:
        follower = subprocess.Popen(
            [sys.executable, "-m", "roost.cli.main", "events", "--follow", "--json", "--since", str(mid)],
            env=env.env,
            cwd=env.work,
            stdout=handle,
        )
    try:
        # Events while the follower reads history and subscribes, and across a restart.
        jobs = [run_job(env, f"job {i}") for i in range(3)]
        for job in jobs:
            env.wait_settled(job, WAIT)
        env.roost_ok("daemon", "stop")
        env.roost_ok("reply", jobs[0], "again")  # a new roostd; the follower reconnects
        env.wait_settled(jobs[0], WAIT)
        last = events(env)[-1]["seq"]

        def seen() -> list[int]:
            return [json.loads(x)["seq"] for x in out.read_text().splitlines() if x.strip()]

        wait_until(
            lambda: seen() and seen()[-1] >= last,
            WAIT,
            lambda: f"the follower to reach seq {last} (has {seen()[-3:]})",
        )
        assert seen() == list(range(mid + 1, last + 1))
    finally:
        follower.kill()
        follower.wait()


def test_follow_pushes_without_polling(fake_pi_env: Lab) -> None:
    """A follower with nothing to print uses no CPU: it blocks on roostd's socket."""
    env = fake_pi_env
    env.roost_ok("daemon", "start")
    # From the log's end as this test sees it: without --since the follower starts from its
    # own "now", which under load can come after the first job's events.
    since = eventlog.last_seq(env.roost_home)
    follower = subprocess.Popen(
        [sys.executable, "-m", "roost.cli.main", "events", "-f", "--since", str(since)],
        env=env.env,
        cwd=env.work,
        stdout=subprocess.PIPE,
        text=True,
    )
    # Its lines, read by a thread: every wait below is bounded (a blocking readline for a
    # line that never came held a worker to pytest's timeout).
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in follower.stdout or ()], daemon=True).start()

    def next_line_with(text: str) -> str:
        deadline = time.monotonic() + WAIT
        while (line := lines.get(timeout=max(0.1, deadline - time.monotonic()))) and text not in line:
            pass
        return line

    try:
        first = run_job(env, "first")
        assert first in next_line_with(first)  # subscribed and pushed
        env.wait_settled(first, WAIT)
        with contextlib.suppress(queue.Empty):  # drain what the run printed, until 2 s of quiet
            while True:
                lines.get(timeout=2.0)
        proc = psutil.Process(follower.pid)
        before = proc.cpu_times()
        time.sleep(1.0)  # measuring idleness needs a fixed interval
        after = proc.cpu_times()
        assert (after.user + after.system) - (before.user + before.system) < 0.05
        job = run_job(env, "pushed")
        assert job in next_line_with(job)
    finally:
        follower.kill()
        follower.wait()


# -- hooks ----------------------------------------------------------------------------------
def test_a_hook_gets_the_event_json_and_its_environment(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    seen = env.root / "seen.jsonl"
    env.configure(
        hooks={
            "job.created": [*hook_script(env, "rec", RECORD_HOOK), str(seen)],
            "bogus.type": ["true"],
            "job.failed": "not a list",
        }
    )
    job = run_job(env, "hooked")
    line = wait_until(lambda: seen.exists() and seen.read_text().strip(), WAIT, "the hook")
    got = json.loads(line)
    (created,) = of_type(env, "job.created", job)
    assert got == {"event": created, "type": "job.created", "job": job}
    # roostd logs the hook's exit once it reaped it, which may be after its output is written.
    log = wait_until(
        lambda: "exited 0" in (t := (env.roost_home / "roostd.log").read_text()) and t,
        WAIT,
        "the hook's exit in roostd.log",
    )
    assert "for job.created (seq" in log and "exited 0" in log
    assert "ignoring the hook for 'bogus.type'" in log and "job.failed='not a list'" in log


def test_a_hanging_hook_is_killed(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    pidfile = env.root / "hook.pid"
    hang = hook_script(
        env,
        "hang",
        "import os, sys, time\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "sys.stderr.write('stuck\\n'); sys.stderr.flush(); time.sleep(600)\n",
    )
    env.configure(hooks={"job.created": [*hang, str(pidfile)]}, hookTimeoutSeconds=1)
    run_job(env, "hang on")
    pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text(), WAIT, "the hook"))
    wait_until(
        lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie",
        WAIT,
        "the hook to be killed",
    )
    wait_until(
        lambda: "killed after 1s" in (env.roost_home / "roostd.log").read_text(),
        WAIT,
        "the kill in roostd.log",
    )


def test_slow_hooks_do_not_delay_delivery(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    slow = hook_script(env, "slow", "import time; time.sleep(5)\n")
    env.configure(hooks={kind: slow for kind in EVENT_TYPES}, hookMaxConcurrent=2)
    job = run_job(env, "first")
    env.wait_settled(job, WAIT)  # every hook slot is now busy with 5 s hooks
    t0 = time.monotonic()
    assert env.roost_ok("reply", job, "while hooks run").strip() == "started"
    env.wait_settled(job, WAIT)
    assert time.monotonic() - t0 < 3.0, "delivery waited for the hooks"
    assert env.show(job)["summary"] == "echo: while hooks run"


def test_hooks_in_a_project_directory_are_ignored(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    marker = env.root / "project-hook-ran"
    project = env.work / ".pi"
    project.mkdir()
    (project / "roost.json").write_text(json.dumps({"hooks": {"job.created": ["touch", str(marker)]}}))
    (env.work / "roost.json").write_text(json.dumps({"hooks": {"job.created": ["touch", str(marker)]}}))
    seen = env.root / "seen.jsonl"
    env.configure(hooks={"job.state": [*hook_script(env, "rec", RECORD_HOOK), str(seen)]})
    job = run_job(env, "in a project")
    env.wait_settled(job, WAIT)
    wait_until(lambda: seen.exists(), WAIT, "the user-level hook")
    assert not marker.exists()


# -- roost wait --any / --all ----------------------------------------------------------------
def test_wait_any_returns_the_job_that_got_there_and_all_waits_for_every_one(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    a = run_job(env, "[[hold gate-a]] a", "--name", "a")
    b = run_job(env, "[[hold gate-b]] b", "--name", "b")
    cmd = [sys.executable, "-m", "roost.cli.main", "wait"]
    any_wait = subprocess.Popen(
        [*cmd, "--any", a, b, "--for", "done"], env=env.env, stdout=subprocess.PIPE, text=True
    )
    all_wait = subprocess.Popen(
        [*cmd, "--all", "a", "b", "--for", "done"], env=env.env, stdout=subprocess.PIPE, text=True
    )
    timed = env.roost("wait", "--any", a, b, "--for", "failed", "--timeout", "0.5")
    assert timed.returncode == 1 and "timed out" in timed.stderr
    (env.work / "gate-b").touch()
    out, _ = any_wait.communicate(timeout=WAIT)
    assert any_wait.returncode == 0 and out.split() == [b, "b", "done"]
    assert all_wait.poll() is None  # a still runs
    (env.work / "gate-a").touch()
    out, _ = all_wait.communicate(timeout=WAIT)
    assert all_wait.returncode == 0
    assert [line.split()[0] for line in out.splitlines()] == [a, b]
    unknown = env.roost("wait", "--all", a, "nosuchjob")
    assert unknown.returncode == 2 and "nosuchjob" in unknown.stderr
    assert env.roost_ok("wait", a).strip() == "done"  # the one-job form is unchanged


# -- roost notify ----------------------------------------------------------------------------
@pytest.fixture
def notify_env(fake_pi_env: Lab) -> Lab:
    """fake_pi_env with a recording notify-send first on PATH."""
    env = fake_pi_env
    bin_dir = env.root / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "notify-send"
    tool.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {env.root}/notified\n")
    tool.chmod(0o755)
    env.env["PATH"] = f"{bin_dir}:{env.env['PATH']}"
    return env


def test_notify_enable_send_rate_limit_and_disable(notify_env: Lab) -> None:
    env = notify_env
    env.configure(agentMaxDepth=2)
    assert "on for" in env.roost_ok("notify", "--enable")
    config = json.loads((env.agent_dir / "roost.json").read_text())
    assert config["agentMaxDepth"] == 2  # other keys kept
    # not gave_up: failed follows it; approval.requested: each call held for approval
    assert set(config["hooks"]) == {"job.needs_input", "job.failed", "approval.requested"}
    job = run_job(env, "[[ask]] plan", "--name", "planner")
    notified = env.root / "notified"
    text = wait_until(lambda: notified.exists() and notified.read_text(), WAIT, "a notification")
    assert "roost: planner needs input" in text and "Should I go on?" in text

    event = json.dumps(of_type(env, "job.needs_input", job)[0])
    for _ in range(2):  # the same event again within the window: notified once at most
        env.roost_ok("notify", "--send", input=event)
    assert notified.read_text().count("needs input") == 1

    assert "off" in env.roost_ok("notify", "--disable")
    assert json.loads((env.agent_dir / "roost.json").read_text()) == {"agentMaxDepth": 2}


def test_notify_enable_without_notify_send_writes_nothing(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(agentMaxDepth=2)
    before = (env.agent_dir / "roost.json").read_text()
    env.env["PATH"] = os.path.dirname(sys.executable)  # no notify-send there
    proc = env.roost("notify", "--enable")
    assert proc.returncode != 0 and "notify-send" in proc.stderr
    assert (env.agent_dir / "roost.json").read_text() == before
