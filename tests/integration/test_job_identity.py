"""A job's identity (docs/security.md, door 5): a worker connection is accepted only from the
process roostd started for the job (kernel pid + start time, saved before the worker runs),
and a foreground peer gets a job's session only through `roost attach`.

The impostors are ordinary processes of the same user: they read job.json's token, take the
job's locks, and say hello over roostd's socket exactly as a worker or a pi would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
from kit.jobs import pi_child, settle, status_is
from kit.lab import Lab
from kit.wait import wait_until

from roost.host import procid
from roost.locks import joblock

IMPOSTOR = textwrap.dedent("""
    import json, os, socket, sys, time
    from pathlib import Path
    from roost.host import paths
    from roost.locks import SessionLock
    from roost.locks import joblock
    args = json.loads(sys.argv[1])
    if args.get("session"):
        assert SessionLock(args["session"]).acquire()
    else:
        joblock.acquire(paths.job_dir(args["job"]))
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(paths.socket_path()))
    f = s.makefile("rb")
    f.readline()  # the greeting
    def call(**frame):
        s.sendall(json.dumps({"id": 1, **frame}).encode() + b"\\n")
        while True:
            got = json.loads(f.readline())
            if got.get("type") == "response":
                return got
    for frame in args["calls"]:
        frame = {k: (os.getpid() if v == "$pid" else v) for k, v in frame.items()}
        print(json.dumps(call(**frame)), flush=True)
    print("done", flush=True)
    s.settimeout(60)
    while line := f.readline():  # what roostd pushes to it (a delivered report)
        print(line.decode().strip(), flush=True)
""")


def start_impostor(env: Lab, args: dict[str, Any]) -> tuple[subprocess.Popen[str], list[dict]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", IMPOSTOR, json.dumps(args)], env=env.env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    answers = []
    while (line := proc.stdout.readline().strip()) != "done":
        assert line, "the impostor died"
        answers.append(json.loads(line))
    return proc, answers


def refused(frame: dict) -> bool:
    return frame["ok"] is False and frame["error"]["code"] == "unauthorized"


def token_of(env: Lab, job: str) -> str:
    return str(json.loads((env.job_dir(job) / "job.json").read_text())["token"])


def test_a_process_holding_a_reaped_jobs_worker_lock_is_no_worker(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(reapAfterSeconds=1)
    job = env.run_job("soon idle")
    settle(env, job)
    wait_until(lambda: env.show(job)["state"] == "reaped", 20, what="the reaper")
    before = env.show(job)
    impostor, answers = start_impostor(
        env,
        {
            "job": job,
            "calls": [
                {"op": "worker_hello", "job": job, "token": token_of(env, job), "pid": "$pid"},
                {"op": "handback", "state": "done", "result": "forged"},
                {"op": "worker_update", "state": "failed", "error": "forged"},
            ],
        },
    )
    try:
        assert all(refused(a) for a in answers), answers
        after = env.show(job)
        assert after["worker"]["pid"] is None and after["state"] == "reaped"
        assert after["summary"] == before["summary"]
        # A new roostd does not adopt it either: it holds the lock but no record names it,
        # so it is stopped (it could only be a stranger, or a worker whose record was lost).
        daemon = env.daemon_pid()
        assert daemon is not None
        os.kill(daemon, signal.SIGKILL)
        wait_until(lambda: not procid.alive(daemon), 10, what="roostd to die")
        env.roost_ok("ls")
        impostor.wait(timeout=20)
        assert env.show(job)["worker"]["pid"] is None
        # The job itself still works: a reply starts a real worker.
        assert env.roost_ok("reply", job, "still mine").strip() == "started"
        assert settle(env, job) in ("done", "reaped")
        assert env.show(job)["summary"] == "echo: still mine"
    finally:
        impostor.kill()
        impostor.wait()


def test_a_killed_roostd_readopts_the_worker_it_recorded(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job("[[hold gate]] working")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    worker = env.show(job)["worker"]["pid"]
    pi = pi_child(worker)
    record = json.loads((env.job_dir(job) / "job.json").read_text())["process"]
    assert record["workerPid"] == worker  # saved before the worker ran
    assert procid.same_process(worker, record["workerStart"])
    for _ in range(2):
        daemon = env.daemon_pid()
        assert daemon is not None
        os.kill(daemon, signal.SIGKILL)
        wait_until(lambda d=daemon: not procid.alive(d), 10, what="roostd to die")
        env.roost_ok("ls")
        wait_until(
            lambda: env.show(job)["worker"]["state"] == "running",
            20,
            what="the worker to be adopted and say hello again",
        )
        assert env.show(job)["worker"]["pid"] == worker and pi.is_running()
    (env.work / "gate").touch()
    assert settle(env, job) == "done"


def test_a_worker_is_readopted_after_the_wall_clock_was_stepped() -> None:
    """btime moves when the wall clock is stepped (a loaded CI machine's did, between a
    worker's start and its hello): the worker roostd recorded before the step is still the
    one it adopts after a SIGKILL, and whose hello it takes (tests/kit/clockstep)."""
    step = Path(__file__).parent.parent / "kit" / "clockstep"
    with Lab(pi="fake") as env:
        flag = env.root / "clock-stepped"
        path = os.pathsep.join(p for p in (str(step), env.env.get("PYTHONPATH", "")) if p)
        env.env.update(PYTHONPATH=path, ROOST_TEST_CLOCK_STEP=str(flag))
        job = env.run_job("[[hold gate]] working")
        wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
        worker = env.show(job)["worker"]["pid"]
        daemon = env.daemon_pid()
        assert daemon is not None
        os.kill(daemon, signal.SIGKILL)
        wait_until(lambda: not procid.alive(daemon), 10, what="roostd to die")
        flag.touch()  # the wall clock jumps 13 s: so does every start time computed from now
        env.roost_ok("ls")
        wait_until(
            lambda: env.show(job)["worker"]["state"] == "running",
            30,
            what="the worker to be adopted and say hello again",
        )
        assert env.show(job)["worker"]["pid"] == worker
        assert f"adopting live worker pid {worker}" in (env.roost_home / "roostd.log").read_text()
        (env.work / "gate").touch()
        assert settle(env, job) == "done"


def test_a_worker_whose_roostd_died_before_recording_it_never_runs(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run_job("soon idle")
    settle(env, job)
    env.roost_ok("stop", job)
    read, write = os.pipe()
    os.close(write)  # what a roostd killed between spawning and saving leaves: a closed pipe
    done = subprocess.run(
        [sys.executable, "-m", "roost.worker", job],
        env={**env.env, joblock.GO_FD_VAR: str(read)},
        pass_fds=(read,),
        capture_output=True,
        text=True,
        timeout=30,
    )
    os.close(read)
    assert done.returncode == joblock.EXIT_UNRECORDED, done.stderr
    assert joblock.kernel_holders(env.job_dir(job)) == []
    assert not (env.job_dir(job) / "ext.sock").exists() or env.show(job)["worker"]["pid"] is None


def test_a_process_taking_a_reaped_parents_session_lock_gets_no_report(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    env.configure(reapAfterSeconds=1)
    parent = env.run_job("[[spawn {{hold gate}} child work]]")
    child = wait_until(lambda: env.children(parent), 20, what="the child")[0]["id"]
    wait_until(lambda: env.show(parent)["state"] == "reaped", 20, what="the parent's reaping")
    session = env.show(parent)["session"]
    impostor, answers = start_impostor(
        env,
        {
            "session": session,
            "calls": [
                {"op": "peer_register", "session": session, "pid": "$pid", "name": "parent"},
            ],
        },
    )
    try:
        assert refused(answers[0]), answers
        assert "roost attach" in answers[0]["error"]["message"]
        (Path(env.show(child)["cwd"]) / "gate").touch()  # the hold's file, in its cwd
        assert settle(env, child) in ("done", "reaped")
        # The report went to the parent job's mailbox, not to the impostor.
        wait_until(
            lambda: any(
                item.get("kind") == "report"
                for sub in ("new", "cur")
                for item in env.mailbox_files(parent, sub)
            ),
            20,
            what="the report in the parent's mailbox",
        )
    finally:
        impostor.send_signal(signal.SIGKILL)
        out = impostor.communicate()[0]
    assert "forged" not in out and "child work" not in out and '"deliver"' not in out, out
    assert [p for p in psutil.process_iter() if p.pid == impostor.pid] == []
