"""Idle jobs cost nothing (fake pi): the warm window stops a done job's worker and pi after
`warmSeconds` and the next item starts them again; past `maxLivePi` live pis the least
recently used idle ones are stopped, never one that runs."""

from __future__ import annotations

import time

from kit.jobs import alive, pi_child, run_job, settle, status_is
from kit.lab import Lab
from kit.wait import wait_until


def worker_pid(env: Lab, job: str) -> int | None:
    return env.show(job)["worker"]["pid"]


def test_a_done_job_keeps_its_pi_for_the_window_then_a_reply_starts_it(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(warmSeconds=4)
    job = run_job(env, "first")
    assert settle(env, job) == "done"
    done_at = time.monotonic()
    pid = worker_pid(env, job)
    assert pid is not None
    pi = pi_child(pid)
    row = wait_until(
        lambda: (r := env.show(job))["state"] == "reaped" and r, 30, what="the end of the warm window"
    )
    assert time.monotonic() - done_at > 2.5  # not before its window (4 s from done)
    assert row["worker"]["pid"] is None and not alive(pid) and not pi.is_running()

    proc = env.roost("reply", job, "second")
    assert (proc.returncode, proc.stdout.strip()) == (0, "started"), proc.stderr
    assert settle(env, job) in ("done", "reaped")
    logs = env.roost_ok("logs", job)
    assert "echo: first" in logs and "echo: second" in logs


def test_past_max_live_pi_the_least_recently_used_idle_job_is_stopped(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(warmSeconds=3600, maxLivePi=2)
    a = run_job(env, "a")
    assert settle(env, a) == "done"
    b = run_job(env, "b")
    assert settle(env, b) == "done"
    assert env.show(a)["state"] == "done" and env.show(b)["state"] == "done"  # 2 live: the cap
    c = run_job(env, "c")
    assert settle(env, c) == "done"
    wait_until(lambda: env.show(a)["state"] == "reaped", 30, what="a, idle longest, stopped")
    assert worker_pid(env, b) is not None and worker_pid(env, c) is not None

    assert env.roost_ok("reply", a, "a again").strip() == "started"  # a is used again
    wait_until(
        lambda: env.show(a)["state"] == "done" and env.show(b)["state"] == "reaped",
        30,
        what="b, now idle longest, stopped",
    )
    assert env.show(c)["state"] == "done" and worker_pid(env, c) is not None


def test_the_cap_never_stops_a_running_job(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(warmSeconds=3600, maxLivePi=1)
    working = run_job(env, "[[hold gate]] long")
    wait_until(lambda: status_is(env, working, "running hold"), 30, what="the hold")
    idle = run_job(env, "short")
    wait_until(lambda: env.show(idle)["state"] == "reaped", 30, what="the idle job stopped for the cap")
    row = env.show(working)
    assert row["state"] == "running" and alive(row["worker"]["pid"])  # over the cap, kept
    (env.work / "gate").touch()
    assert settle(env, working) == "done"
    assert env.show(working)["worker"]["pid"] is not None  # alone now: within the cap
