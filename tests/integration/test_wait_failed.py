"""`roost wait` on a failed job: its reason (the job's error, not its task) and exit 1, so
`roost wait J && next` stops on a failure; the fake pi, a job stopped by its turn limit."""

from __future__ import annotations

from kit.lab import Lab
from kit.procs import wait_until

WAIT = "60"


def test_wait_on_a_job_failed_by_its_limit_says_why_and_exits_1(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job("--max-turns", "1", "[[sleep 0]] the task text")
    proc = env.roost("wait", job, "--timeout", WAIT, timeout=float(WAIT) + 30)
    assert (proc.returncode, proc.stdout) == (1, "failed\n"), proc.stderr
    assert proc.stderr == f"roost: job {job} failed: turn limit reached: 1 of 1 model requests\n"
    assert "the task text" not in proc.stderr
    # --all / --any stop on a failure too, unless a failure is what they wait for
    both = env.roost("wait", "--all", job, "--timeout", WAIT, timeout=float(WAIT) + 30)
    assert both.returncode == 1 and both.stdout.split()[:: len(both.stdout.split()) - 1] == [job, "failed"]
    assert "turn limit reached" in both.stderr
    asked = env.roost("wait", "--any", job, "--for", "failed", "--timeout", WAIT)
    assert asked.returncode == 0, asked.stderr


def test_wait_on_a_done_job_exits_0(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job("plain words")
    proc = env.roost("wait", job, "--timeout", WAIT, timeout=float(WAIT) + 30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "done\n", "")
    wait_until(lambda: env.row(job)["state"] == "done", 10)
