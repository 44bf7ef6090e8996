"""Where a job's worker runs (roost.supervise.placement), without Ray: `roost run --runner`
pins a job, a shell job and `--each` refuse it, roostd refuses an unknown runner, and a job
pinned here runs as a local worker (nothing of Ray imported). Fake pi. The Ray runner's own
tests are in tests/rayrunner (they need roost[ray] and a head)."""

from __future__ import annotations

import json

from kit.jobs import run_job, settle
from kit.lab import Lab


def test_a_job_pinned_here_runs_as_a_local_worker(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(runner={"kind": "ray", "address": "http://127.0.0.1:9"})  # never reached
    job = run_job(env, "pinned", "--runner", "local")
    assert settle(env, job) == "done"
    assert json.loads((env.job_dir(job) / "placement.json").read_text()) == {"runner": "local"}
    assert env.show(job)["worker"]["pid"]  # a process of this machine
    assert not (env.job_dir(job) / "remote.json").exists()
    assert "remote hub" not in (env.roost_home / "roostd.log").read_text()


def test_runner_is_refused_where_it_means_nothing(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    shell = env.roost("run", "--runner", "ray", "--shell", "--", "true")
    assert shell.returncode != 0 and "--runner is for one pi job" in shell.stderr
    bogus = env.roost("run", "--runner", "slurm", "task")
    assert bogus.returncode != 0 and "slurm" in bogus.stderr
    env.roost_ok("ls")
    client = env.client()
    try:
        client.call("run", {"task": "x", "cwd": str(env.work), "runner": "slurm"})
    except Exception as exc:
        assert "run: runner must be one of 'local', 'ray', got a string" in str(exc)  # Op.check
    else:
        raise AssertionError("roostd took an unknown runner")
