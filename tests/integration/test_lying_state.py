"""State files that lie (docs/security.md, door 5), against a real roostd, workers and the fake
pi: a quarantined record stops what runs for it, `roost rm` leaves no process running, and
an error printed to the user is the truth about the item."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

from kit.jobs import pi_child, settle, status_is
from kit.lab import Lab
from kit.wait import wait_until

from roost.host import procid

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from roost.locks import SessionLock
    from roost.locks import joblock
    what, path = sys.argv[1], sys.argv[2]
    if what == "worker":
        joblock.acquire(Path(path))
    else:
        assert SessionLock(path).acquire()
    print("held", flush=True)
    time.sleep(300)
""")


def hold(env: Lab, what: str, path: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, what, path],
        env=env.env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def kill_roostd(env: Lab) -> None:
    daemon = env.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not procid.alive(daemon), 10, what="roostd to die")


def test_a_quarantined_record_stops_its_live_worker_and_pi(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job("[[hold gate]] working")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    worker = env.show(job)["worker"]["pid"]
    pi = pi_child(worker).pid
    kill_roostd(env)
    (env.job_dir(job) / "job.json").write_text('{"id": "broken')  # unreadable now

    rows = {r["id"]: r for r in json.loads(env.roost_ok("ls", "--json"))}  # a new roostd
    assert rows[job]["state"] == "failed"
    wait_until(
        lambda: not procid.alive(worker) and not procid.alive(pi),
        20,
        what="the worker and pi of the unreadable record to be stopped",
    )
    env.roost_ok("rm", job)
    assert not env.job_dir(job).exists()


def test_rm_stops_every_process_holding_the_jobs_locks(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job("soon idle")
    settle(env, job)
    env.roost_ok("stop", job)
    session = env.show(job)["session"]
    holders = [hold(env, "worker", str(env.job_dir(job))), hold(env, "session", session)]
    try:
        env.roost_ok("rm", job)
        assert not env.job_dir(job).exists()
        for proc in holders:  # stopped before the folder went
            assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        for proc in holders:
            proc.kill()
            proc.wait()


def test_rm_of_an_unreadable_record_whose_worker_runs_stops_it(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job("soon idle")
    settle(env, job)
    env.roost_ok("stop", job)
    env.roost_ok("daemon", "stop")
    (env.job_dir(job) / "job.json").write_text("[]")
    # A process that holds the job's worker lock while no roostd runs: as a worker of the
    # record before it was damaged would (its pid is in no readable record).
    holder = hold(env, "worker", str(env.job_dir(job)))
    try:
        env.roost_ok("ls")  # a new roostd quarantines the record and stops the holder
        assert holder.wait(timeout=20) == -signal.SIGTERM
        env.roost_ok("rm", job)
        assert not env.job_dir(job).exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_reply_that_was_queued_is_never_reported_as_an_error(fake_pi_env: Lab) -> None:
    # worker.log replaced by a symlink: roostd refuses to follow it, so no worker starts.
    # The reply is in the mailbox all the same: the answer says `queued` and why, never an
    # error that would make the person send it twice.
    env = fake_pi_env
    env.configure(reapAfterSeconds=1)
    job = env.run_job("soon idle")
    settle(env, job)
    wait_until(lambda: env.show(job)["state"] == "reaped", 20, what="the reaper")
    log = env.job_dir(job) / "worker.log"
    elsewhere = env.root / "elsewhere.log"
    elsewhere.write_text("")
    log.unlink()
    log.symlink_to(elsewhere)
    answer = env.roost("reply", job, "only once")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == "queued"
    assert "could not start its worker" in answer.stderr and "roost start" in answer.stderr
    assert elsewhere.read_text() == ""  # never written through
    assert [i["text"] for i in env.mailbox_files(job)] == ["only once"]
    assert env.show(job)["state"] == "failed"

    refused = env.roost("start", job)  # nothing queued by a start: an error is the truth
    assert refused.returncode != 0 and "could not start its worker" in refused.stderr
    log.unlink()
    env.roost_ok("start", job)
    assert settle(env, job) in ("done", "reaped")
    assert env.show(job)["summary"] == "echo: only once"
    texts = [
        e["message"]["content"]
        for e in env.session(job)
        if e.get("type") == "message" and e["message"]["role"] == "user"
    ]
    assert sum("only once" in json.dumps(t) for t in texts) == 1
