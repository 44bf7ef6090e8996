"""`roost daemon stop` with jobs running (the fake pi): it says how many workers it left
running (the next roostd adopts them), and `--jobs` finds and stops them, with or without a
running roostd, never a process that only reuses a recorded pid."""

from __future__ import annotations

import json
import subprocess

import psutil
from kit.lab import Lab
from kit.procs import wait_until

from roost.host import procid

WAIT = 60.0


def _held_jobs(env: Lab, count: int) -> dict[str, int]:
    """`count` jobs busy in a tool until their gate opens: job id -> worker pid."""
    jobs = [env.run_job("--name", f"held-{i}", f"[[hold gate-{i}]] work") for i in range(count)]
    for job in jobs:
        wait_until(lambda job=job: env.show(job)["status"].startswith("running"), WAIT, f"job {job}'s tool")
    return {job: env.show(job)["worker"]["pid"] for job in jobs}


def _pis_under(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_stop_says_which_workers_it_left_and_stop_jobs_ends_them_without_roostd(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    workers = _held_jobs(env, 2)
    pis = [p for pid in workers.values() for p in _pis_under(pid)]
    assert pis, "the fake pi runs under each worker"

    out = env.roost_ok("daemon", "stop")
    assert out.startswith("roostd stopped (pid ")
    assert "2 workers left running" in out and "the next roostd adopts them" in out, out
    assert all(job in out for job in workers)
    assert all(procid.alive(pid) for pid in workers.values())

    again = env.roost_ok("daemon", "stop")  # no roostd: still says what runs
    assert again.startswith("roostd is not running") and "2 workers left running" in again

    # A record naming a live process that only reuses a pid (another start time) is left.
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        decoy = env.job_dir(next(iter(workers))).parent / "decoy0"
        decoy.mkdir()
        record = env.record(next(iter(workers)))
        record.update(id="decoy0", name="decoy")
        record["process"].update(
            workerPid=stranger.pid, workerStart=procid.live_start_time(stranger.pid) - 100
        )
        (decoy / "job.json").write_text(json.dumps(record))

        out = env.roost_ok("daemon", "stop", "--jobs", timeout=WAIT)
        assert out.startswith("roostd is not running; stopped 2 workers"), out
        assert "decoy0" not in out and stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
    wait_until(
        lambda: (
            not any(procid.alive(pid) for pid in workers.values())
            and not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in pis)
        ),
        WAIT,
        "the workers and their pi to be gone",
    )
    for job in workers:
        assert env.record(job)["state"] == "stopped"
    # the next roostd neither adopts nor restarts them
    (env.job_dir(next(iter(workers))).parent / "decoy0" / "job.json").unlink()
    rows = {r["id"]: r for r in env.ls()}
    assert all(rows[job]["state"] == "stopped" for job in workers), rows
    assert env.roost_ok("daemon", "stop", "--jobs").startswith("roostd stopped")


def test_stop_with_no_worker_says_only_that_it_stopped(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("daemon", "start")
    out = env.roost_ok("daemon", "stop")
    assert out.startswith("roostd stopped (pid ") and out.count("\n") == 1, out
    assert env.roost_ok("daemon", "stop", "--jobs") == "roostd is not running; stopped 0 workers\n"
