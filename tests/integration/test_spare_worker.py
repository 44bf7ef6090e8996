"""The spare worker (roost.supervise.spare, roost.worker.standby): roostd keeps one pi worker
started ahead of its job. A new pi job takes it (its pid is the job's worker), it serves that
job only, a new one replaces it, it costs no CPU while it waits, and none is left behind
when roostd stops or dies. Fake pi."""

from __future__ import annotations

import os
import signal

import psutil
from kit.jobs import alive, run_job, settle
from kit.lab import Lab
from kit.wait import wait_until


def spares(env: Lab) -> list[psutil.Process]:
    """roostd's children waiting as spares (`python -m roost.worker --standby` that no job's
    record names as its worker)."""
    pid = env.daemon_pid()
    if pid is None:
        return []
    workers = {
        env.record(path.parent.name)["process"]["workerPid"]
        for path in (env.roost_home / "jobs").glob("*/job.json")
    }
    try:
        return [
            p
            for p in psutil.Process(pid).children()
            if p.cmdline()[-1:] == ["--standby"] and p.pid not in workers
        ]
    except psutil.NoSuchProcess:
        return []


def ready_spare(env: Lab) -> psutil.Process:
    """The one spare, once it waits for a job: its imports done, it uses no CPU at all."""

    def one() -> psutil.Process | None:
        found = spares(env)
        return found[0] if len(found) == 1 and cpu_flat(found[0], 0.5) else None

    return wait_until(one, 30, what="one spare worker, waiting")


def cpu_flat(proc: psutil.Process, seconds: float) -> bool:
    """No CPU used over `seconds` (the kernel's counters, 10 ms ticks)."""
    try:
        before = sum(proc.cpu_times()[:2])
        try:
            proc.wait(seconds)
        except psutil.TimeoutExpired:
            pass
        return sum(proc.cpu_times()[:2]) == before
    except psutil.Error:
        return False


def test_a_pi_job_takes_the_spare_and_a_new_one_replaces_it(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("ls")  # starts roostd
    spare = ready_spare(env)
    assert cpu_flat(spare, 2.0)  # it waits on its socket: no timer, no polling
    job = run_job(env, "first")
    assert settle(env, job) == "done"
    assert env.show(job)["worker"]["pid"] == spare.pid  # the spare is the job's worker
    assert "echo: first" in env.roost_ok("logs", job)
    log = (env.job_dir(job) / "worker.log").read_text()
    assert f"worker[{spare.pid}]" in log  # its output goes to the job's log
    assert spare.cwd() == str(env.work)  # and it runs in the job's directory
    # its command line names its job now, as a worker started for it: not `--standby`
    assert spare.cmdline()[-3:] == ["-m", "roost.worker", job], spare.cmdline()
    with open(f"/proc/{spare.pid}/cmdline", "rb") as handle:
        assert handle.read().endswith(f" -m roost.worker {job}\0".encode())
    assert spare not in spares(env)

    second = ready_spare(env)  # replaced, once
    assert second.pid != spare.pid
    other = run_job(env, "second")
    assert settle(env, other) == "done"
    assert env.show(other)["worker"]["pid"] == second.pid
    assert env.show(job)["worker"]["pid"] == spare.pid  # each spare serves one job


def test_a_shell_job_never_takes_the_spare(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("ls")
    spare = ready_spare(env)
    job = env.roost_ok("run", "--shell", "--", "true").strip()
    assert settle(env, job) == "done"
    assert spares(env) == [spare] and spare.is_running()


def test_no_spare_when_turned_off(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(spareWorker=False)
    job = run_job(env, "cold")
    assert settle(env, job) == "done"
    assert spares(env) == []
    pid = env.show(job)["worker"]["pid"]
    assert psutil.Process(pid).cmdline()[-1] == job  # started for it: python -m roost.worker JOB


def test_the_spare_ends_with_roostd(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("ls")
    spare = ready_spare(env)
    env.roost_ok("daemon", "stop")
    wait_until(lambda: not alive(spare.pid), 15, what="the spare gone after roostd stopped")

    env.roost_ok("ls")  # a new roostd, a new spare
    spare = ready_spare(env)
    pid = env.daemon_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # its socket closes with it: the spare exits by itself
    wait_until(lambda: not alive(spare.pid), 15, what="the spare gone after roostd was killed")


def test_a_spare_that_died_is_not_used(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("ls")
    spare = ready_spare(env)
    spare.kill()
    wait_until(lambda: spares(env) == [], 15, what="roostd noticed its spare's end")
    job = run_job(env, "after the spare died")
    assert settle(env, job) == "done"
    pid = env.show(job)["worker"]["pid"]
    assert pid != spare.pid and psutil.Process(pid).cmdline()[-1] == job


def test_a_spare_turned_off_meanwhile_goes_unused(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("ls")
    spare = ready_spare(env)
    env.configure(spareWorker=False)
    job = run_job(env, "cold again")
    assert settle(env, job) == "done"
    assert env.show(job)["worker"]["pid"] != spare.pid
    wait_until(lambda: not alive(spare.pid), 15, what="the unused spare gone")
