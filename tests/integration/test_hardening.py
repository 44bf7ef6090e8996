"""Integration (fake pi): defects an adversary found on main, each pinned by a test.

Two workers for one job after a roostd killed mid-spawn, a corrupted job.json, a task over
the item limit, a deeply nested frame, control characters in names, a non-numeric wait
timeout, private file modes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat

import psutil
from kit.jobs import Raw, alive, pi_child, run_job, settle, status_is
from kit.lab import Lab
from kit.wait import wait_until

from roost.mailbox.item import MAX_ITEM_BYTES


def error_code(frame: dict) -> str:
    assert frame["type"] == "response" and frame["ok"] is False, frame
    return str(frame["error"]["code"])


# -- 4: a deeply nested frame ---------------------------------------------------------------
def test_a_deeply_nested_frame_is_a_bad_frame_and_the_connection_stays(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    env.roost_ok("daemon", "start")
    raw = Raw(env)
    assert error_code(raw.send(b"[" * 200_000 + b"\n")) == "bad_frame"
    assert error_code(raw.send(b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"\n")) == "bad_frame"
    assert raw.send(b'{"id": 1, "op": "status"}\n')["ok"]  # the same connection still works
    raw.close()


# -- 9: wait with a timeout that is not a number ----------------------------------------------
def test_wait_with_a_non_numeric_timeout_is_a_bad_request(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "hello")
    settle(env, job)
    raw = Raw(env)
    for bad in ('"soon"', "[]", "true", "-1"):
        frame = raw.send(f'{{"id": 1, "op": "wait", "job": "{job}", "timeout": {bad}}}\n'.encode())
        assert error_code(frame) == "bad_request", (bad, frame)
    raw.close()


# -- 3: a task over the item size limit -------------------------------------------------------
def test_a_task_over_the_item_limit_creates_nothing(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("daemon", "start")
    big = "x" * (MAX_ITEM_BYTES + 10)
    raw = Raw(env)
    payload = json.dumps({"id": 1, "op": "run", "task": big, "cwd": str(env.work)})
    frame = raw.send(payload.encode() + b"\n")
    assert error_code(frame) == "bad_request" and "too large" in frame["error"]["message"]
    raw.close()
    assert json.loads(env.roost_ok("ls", "--json")) == []
    jobs = env.roost_home / "jobs"
    assert not jobs.exists() or list(jobs.iterdir()) == []


# -- 5: control characters in names -------------------------------------------------------------
def test_names_with_control_characters_are_refused_and_never_printed_raw(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    refused = env.roost("run", "--name", "evil\x1b[2J", "task")
    assert refused.returncode != 0 and "control characters" in refused.stderr
    assert json.loads(env.roost_ok("ls", "--json")) == []

    # Text that reaches rows by other ways (a task's first line, a model's answer) is
    # escaped by every view.
    job = run_job(env, "clear \x1b[2J\x1b]0;title\x07 screen")
    settle(env, job)
    for args in (("ls",), ("ls", "--group", "state"), ("show", job), ("mailbox", job, "--all")):
        out = env.roost_ok(*args)
        assert "\x1b" not in out and "\x07" not in out, (args, out)
        assert "\\x1b" in out, (args, out)


# -- 2: a corrupted job.json --------------------------------------------------------------------
def test_a_corrupted_job_record_fails_that_job_only(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    good = run_job(env, "good one")
    settle(env, good)
    victims = [run_job(env, f"victim {i}") for i in range(4)]
    for job in victims:
        settle(env, job)
    env.roost_ok("daemon", "stop", "--jobs")
    bodies = ["null", "[]", '"a string"', None]
    for job, body in zip(victims, bodies, strict=True):
        path = env.job_dir(job) / "job.json"
        if body is None:  # a record whose workerPid is a string
            data = json.loads(path.read_text())
            data["process"]["workerPid"] = "1234"
            body = json.dumps(data)
        path.write_text(body)
    (env.job_dir(victims[0]) / "mailbox" / "keep").write_text("x")

    rows = {r["id"]: r for r in json.loads(env.roost_ok("ls", "--json"))}  # a new roostd
    assert rows[good]["state"] == "stopped"  # as `daemon stop --jobs` left it
    for job in victims:
        assert rows[job]["state"] == "failed", rows[job]
        detail = env.show(job)
        assert "unreadable" in detail["error"] and "job.json.bad" in detail["error"]
        assert (env.job_dir(job) / "job.json.bad").exists()
        assert (env.job_dir(job) / "job.json.why").read_text().strip()
        assert not (env.job_dir(job) / "job.json").exists()
    assert (env.job_dir(victims[0]) / "mailbox" / "keep").exists()  # nothing else is touched
    assert rows[victims[3]]["name"] == "victim 3"  # what could be read is kept
    assert env.roost("start", victims[0]).returncode != 0

    # The next roostd still lists them (from job.json.bad), and `rm` removes one.
    env.roost_ok("daemon", "stop")
    rows = {r["id"]: r for r in json.loads(env.roost_ok("ls", "--json"))}
    assert all(rows[job]["state"] == "failed" for job in victims)
    env.roost_ok("rm", victims[1])
    assert not env.job_dir(victims[1]).exists()
    env.roost_ok("start", good)
    assert settle(env, good) == "done"
    assert env.roost_ok("reply", good, "still fine").strip() in ("started", "delivered")
    assert settle(env, good) == "done"


# -- 1: two workers for one job -----------------------------------------------------------------
def test_a_worker_lock_holder_no_record_names_is_stopped_not_adopted(
    fake_pi_env: Lab,
) -> None:
    # roostd saves a worker's pid and start time before the worker may run (its go pipe), so
    # a live lock holder that no record names is not a worker roostd started: it is stopped
    # with its pi (docs/security.md, door 5) and one fresh worker runs the job, never two.
    env = fake_pi_env
    job = run_job(env, "[[hold gate]] working")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    worker = env.show(job)["worker"]["pid"]
    pi = pi_child(worker)
    daemon = env.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not alive(daemon), 10, what="roostd to die")
    path = env.job_dir(job) / "job.json"
    data = json.loads(path.read_text())
    data["process"].update(workerPid=None, workerStart=None)
    data["state"] = "starting"
    path.write_text(json.dumps(data))

    env.roost_ok("ls")  # a new roostd
    wait_until(
        lambda: not alive(worker) and not alive(pi.pid),
        20,
        what="the unrecorded worker and its pi to be stopped",
    )
    wait_until(lambda: env.show(job)["worker"]["state"] == "running", 20, what="a fresh worker")
    fresh = env.show(job)["worker"]["pid"]
    workers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"] and "roost.worker" in p.info["cmdline"] and job in p.info["cmdline"]
    ]
    assert [p.pid for p in workers] == [fresh] and fresh != worker
    (env.work / "gate").touch()
    # its run was cut short by the stop (SIGTERM): it says so, and waits for a reply
    assert settle(env, job) == "needs_input" and env.show(job)["status"] == "interrupted"


def test_a_second_worker_for_a_job_exits_at_once(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "[[hold gate]] working")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    worker = env.show(job)["worker"]["pid"]
    sock = env.job_dir(job) / "ext.sock"
    inode = sock.stat().st_ino
    import subprocess
    import sys

    second = subprocess.run(
        [sys.executable, "-m", "roost.worker", job], env=env.env, capture_output=True, text=True, timeout=30
    )
    assert second.returncode != 0
    assert "already" in second.stderr + second.stdout
    assert sock.stat().st_ino == inode  # its socket was not replaced
    assert env.show(job)["worker"]["pid"] == worker
    (env.work / "gate").touch()
    assert settle(env, job) == "done"


# -- 9: private files -----------------------------------------------------------------------------
def test_logs_journals_and_sessions_are_private(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "hello")
    settle(env, job)
    d = env.job_dir(job)
    for name in ("worker.log", "delivery.jsonl", "session.jsonl", "job.json"):
        mode = stat.S_IMODE((d / name).stat().st_mode)
        assert mode == 0o600, (name, oct(mode))
    assert re.fullmatch(r"[0-9a-f]{8}", job)


def test_every_persisted_field_of_a_job_record_has_a_checked_type() -> None:
    """from_json checks each key's type: a field added without one would make every
    record that carries it unreadable."""
    import dataclasses

    from roost.job.record import _FIELD_TYPES, _GROUPS, JobRecord

    persisted = {
        f.name
        for f in dataclasses.fields(JobRecord)
        if not f.metadata.get("transient") and f.name not in _GROUPS
    }
    for group in _GROUPS.values():  # links, process, limits, reports: checked field by field
        persisted |= {f.name for f in dataclasses.fields(group)}
    assert persisted <= set(_FIELD_TYPES), persisted - set(_FIELD_TYPES)
