"""Security probes: what another user, a raw socket client, a tool run by an agent, and a
planted symlink cannot do.

They run against the fake pi (fast); the token probe that needs a real pi running a real
bash tool is tests/e2e/test_security_pi.py. The other-uid probes create a user when run as root and are
skipped (with the reason) otherwise.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import textwrap

import pytest
from kit.jobs import Raw, error_code, pi_child, raw_unix, request, run_job, settle, status_is
from kit.lab import Lab
from kit.wait import wait_until

from roost.locks import SessionLock

PROBE_USER = "roost-probe"


# -- another user on the same machine -----------------------------------------------------------
def probe_user() -> tuple[int, int]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second user (useradd) and run as it (setpriv)")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    try:
        entry = pwd.getpwnam(PROBE_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PROBE_USER],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(PROBE_USER)
    return entry.pw_uid, entry.pw_gid


PROBE = textwrap.dedent("""
    import json, os, socket, sys
    args = json.loads(sys.argv[1])
    out = {}
    def attempt(name, fn):
        try:
            fn()
            out[name] = "allowed"
        except OSError as exc:
            out[name] = type(exc).__name__
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(args["socket"])
    attempt("connect roostd.sock", connect)
    attempt("connect ext.sock", lambda: socket.socket(socket.AF_UNIX).connect(args["ext"]))
    for path in args["read"]:
        attempt("read " + path, lambda: open(path, "rb").read(1))
    attempt("list the home", lambda: os.listdir(args["home"]))
    attempt("create a lock", lambda: open(args["lock"], "x").write("{}"))
    attempt("remove the session lock", lambda: os.unlink(args["session_lock"]))
    for pid in args["pids"]:
        attempt(f"signal {pid}", lambda: os.kill(pid, 0))
    print(json.dumps(out))
""")


def test_another_user_can_reach_nothing_of_roost(fake_pi_env: Lab) -> None:
    uid, gid = probe_user()
    env = fake_pi_env
    job = run_job(env, "[[hold gate]] private work")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    # Only roost's own modes protect it: the test's temp root is opened up.
    os.chmod(env.root, 0o755)
    row = env.show(job)
    worker = row["worker"]["pid"]
    pi = pi_child(worker).pid
    d = env.job_dir(job)
    session_lock = next((env.roost_home / "locks").glob("*.json"))
    items = sorted((d / "mailbox").glob("*/*.json"))
    assert items
    args = {
        "socket": str(env.socket_path),
        "ext": str(d / "ext.sock"),
        "home": str(env.roost_home),
        "read": [
            str(d / "job.json"),
            str(items[0]),
            str(d / "worker.log"),
            row["session"],
            str(session_lock),
        ],
        "lock": str(env.roost_home / "locks" / "planted.json"),
        "session_lock": str(session_lock),
        "pids": [env.daemon_pid(), worker, pi],
    }
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    probe = subprocess.run(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            python,
            "-c",
            PROBE,
            json.dumps(args),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert probe.returncode == 0, probe.stderr
    outcome = json.loads(probe.stdout)
    assert outcome and all(v in ("PermissionError",) for v in outcome.values()), outcome
    assert session_lock.exists()
    (env.work / "gate").touch()
    assert settle(env, job) == "done"

    # And nothing under ROOST_HOME is open to group or others in the first place.
    for path in [env.roost_home, *env.roost_home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, (path, oct(mode))


# -- raw clients of roostd ------------------------------------------------------------------------
def test_a_raw_client_cannot_pass_for_a_worker_even_with_the_token(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "[[hold gate]] mine")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    record = json.loads((env.job_dir(job) / "job.json").read_text())
    raw = Raw(env)
    for pid in (record["process"]["workerPid"], os.getpid()):
        frame = request(raw, op="worker_hello", job=job, token=record["token"], pid=pid)
        assert error_code(frame) == "unauthorized", frame
    # Not bound: it cannot send as the job, report for it or change its state.
    assert error_code(request(raw, op="send", to=job, message="hi")) == "unauthorized"
    assert error_code(request(raw, op="handback", state="done")) == "unauthorized"
    assert error_code(request(raw, op="worker_update", state="failed")) == "unauthorized"
    raw.close()
    assert env.show(job)["worker"]["pid"] == record["process"]["workerPid"]
    (env.work / "gate").touch()
    assert settle(env, job) == "done"


def test_a_raw_client_cannot_take_the_extensions_place(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "[[hold gate]] mine")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    pi = pi_child(env.show(job)["worker"]["pid"]).pid
    raw = raw_unix(env.job_dir(job) / "ext.sock")
    for pid in (pi, os.getpid()):
        assert error_code(request(raw, op="ext_hello", pid=pid)) == "unauthorized"
    assert error_code(request(raw, op="send", to=job, message="x")) == "unauthorized"
    raw.close()
    # The real extension keeps its channel: a reply still arrives and is answered.
    (env.work / "gate").touch()
    assert settle(env, job) == "done"
    assert env.roost_ok("reply", job, "after the probe").strip() == "started"
    assert settle(env, job) == "done"
    assert env.show(job)["summary"] == "echo: after the probe"


def test_peer_register_is_for_the_callers_own_session_only(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("daemon", "start")
    theirs = env.root / "theirs.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from roost.locks import SessionLock
            assert SessionLock({str(theirs)!r}).acquire()
            print("held", flush=True)
            time.sleep(120)
        """),
        ],
        env=env.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        raw = Raw(env)
        for pid in (holder.pid, os.getpid()):
            frame = request(raw, op="peer_register", session=str(theirs), pid=pid, peer="f1234567")
            assert error_code(frame) == "unauthorized", frame
        frame = request(raw, op="peer_register", session=None, pid=holder.pid)
        assert error_code(frame) == "unauthorized", frame  # a claimed pid is never taken
        raw.close()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def test_a_registered_peer_cannot_reach_outside_its_tree(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    other = run_job(env, "someone else's job")
    settle(env, other)
    mine = env.root / "mine.jsonl"
    lock = SessionLock(str(mine))
    os.environ["ROOST_HOME"] = str(env.roost_home)  # the lock lives in this roost's locks/
    try:
        lock = SessionLock(str(mine))
        assert lock.acquire()
        raw = Raw(env)
        frame = request(raw, op="peer_register", session=str(mine), pid=os.getpid())
        assert frame["ok"], frame
        frame = request(raw, op="send", to=other, message="let me in")
        assert error_code(frame) == "refused", frame
        peers = request(raw, op="peers")
        assert other not in json.dumps(peers["result"]["peers"])
        raw.close()
        lock.release()
    finally:
        os.environ.pop("ROOST_HOME", None)
    assert env.show(other)["pending"] == {"replies": 0, "agent": 0}


def test_a_client_cannot_claim_a_run_cause(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "hello")
    settle(env, job)
    raw = Raw(env)
    for cause in ("task", "parent_message", "restore", 7):
        frame = request(raw, op="reply", job=job, text="x", cause=cause)
        assert error_code(frame) == "bad_request", (cause, frame)
    assert request(raw, op="reply", job=job, text="fine", cause="cli")["ok"]
    raw.close()
    assert settle(env, job) == "done"


# -- planted symlinks -------------------------------------------------------------------------------
def test_symlinks_planted_where_roost_writes_are_not_followed(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    outside = env.root / "outside"
    outside.mkdir()
    job = run_job(env, "first")
    settle(env, job)
    env.roost_ok("stop", job)
    box = env.job_dir(job) / "mailbox"

    for sub in ("tmp", "new"):
        real = box / f"{sub}.real"
        (box / sub).rename(real)
        (box / sub).symlink_to(outside)
        refused = env.roost("start", job)  # a worker may start; a post must not escape
        out = env.roost("reply", job, f"through {sub}")
        assert out.returncode != 0 or out.stdout.strip() != "delivered"
        assert list(outside.iterdir()) == [], (sub, list(outside.iterdir()), refused.stderr)
        env.roost("stop", job)
        (box / sub).unlink()
        real.rename(box / sub)

    # The worker's lock file.
    lock = env.job_dir(job) / "worker.lock"
    lock.unlink(missing_ok=True)
    target = outside / "owned"
    lock.symlink_to(target)
    env.roost("start", job)
    wait_until(
        lambda: env.show(job)["state"] in ("failed", "starting", "stopped"),
        20,
        what="the start to be refused",
    )
    assert not target.exists()
    env.roost("stop", job)
    lock.unlink()

    # The whole job directory.
    d = env.job_dir(job)
    moved = env.root / "moved-job"
    d.rename(moved)
    d.symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    env.roost("reply", job, "through the job dir")
    env.roost("start", job)
    assert sorted(p.name for p in outside.iterdir()) == before


# -- the real pi: no secret reaches a tool ---------------------------------------------------------
