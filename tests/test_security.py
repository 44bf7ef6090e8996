"""Security probes: what another user, a raw socket client, a tool run by an agent, and a
planted symlink cannot do.

Most run against the fake pi (fast); the token probes that need a real pi running a real
bash tool are marked e2e. The other-uid probes create a user when run as root and are
skipped (with the reason) otherwise.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import RoostEnv, wait_until
from test_integration_fakepi import Raw, pi_child, run_job, settle, status_is

from roost.locks import SessionLock

PROBE_USER = "roost-probe"


def error_code(frame: dict) -> str:
    assert frame["type"] == "response" and frame["ok"] is False, frame
    return str(frame["error"]["code"])


def raw_unix(path: Path) -> Raw:
    """A Raw client on any roost socket (the worker's ext.sock too)."""
    raw = Raw.__new__(Raw)
    raw.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.sock.settimeout(10)
    raw.sock.connect(str(path))
    raw.file = raw.sock.makefile("rb")
    raw.greeting = raw.read()
    return raw


def request(raw: Raw, **frame: Any) -> dict:
    return raw.send(json.dumps({"id": 1, **frame}).encode() + b"\n")


# -- another user on the same machine -----------------------------------------------------------
def probe_user() -> tuple[int, int]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second user (useradd) and run as it (setpriv)")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    try:
        entry = pwd.getpwnam(PROBE_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        PROBE_USER], check=True, capture_output=True)
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


def test_another_user_can_reach_nothing_of_roost(fake_pi_env: RoostEnv) -> None:
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
    session_lock = next((env.home / "locks").glob("*.json"))
    items = sorted((d / "mailbox").glob("*/*.json"))
    assert items
    args = {
        "socket": str(env.socket_path), "ext": str(d / "ext.sock"), "home": str(env.home),
        "read": [str(d / "job.json"), str(items[0]), str(d / "worker.log"),
                 row["session"], str(session_lock)],
        "lock": str(env.home / "locks" / "planted.json"), "session_lock": str(session_lock),
        "pids": [env.daemon_pid(), worker, pi],
    }
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    probe = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", python, "-c", PROBE,
         json.dumps(args)],
        capture_output=True, text=True, timeout=60, cwd="/",
    )
    assert probe.returncode == 0, probe.stderr
    outcome = json.loads(probe.stdout)
    assert outcome and all(v in ("PermissionError",) for v in outcome.values()), outcome
    assert session_lock.exists()
    (env.work / "gate").touch()
    assert settle(env, job) == "done"

    # And nothing under ROOST_HOME is open to group or others in the first place.
    for path in [env.home, *env.home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, (path, oct(mode))


# -- raw clients of roostd ------------------------------------------------------------------------
def test_a_raw_client_cannot_pass_for_a_worker_even_with_the_token(fake_pi_env: RoostEnv) -> None:
    env = fake_pi_env
    job = run_job(env, "[[hold gate]] mine")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    record = json.loads((env.job_dir(job) / "job.json").read_text())
    raw = Raw(env)
    for pid in (record["workerPid"], os.getpid()):
        frame = request(raw, op="worker_hello", job=job, token=record["token"], pid=pid)
        assert error_code(frame) == "unauthorized", frame
    # Not bound: it cannot send as the job, report for it or change its state.
    assert error_code(request(raw, op="send", to=job, message="hi")) == "unauthorized"
    assert error_code(request(raw, op="handback", state="done")) == "unauthorized"
    assert error_code(request(raw, op="worker_update", state="failed")) == "unauthorized"
    raw.close()
    assert env.show(job)["worker"]["pid"] == record["workerPid"]
    (env.work / "gate").touch()
    assert settle(env, job) == "done"


def test_a_raw_client_cannot_take_the_extensions_place(fake_pi_env: RoostEnv) -> None:
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


def test_peer_register_is_for_the_callers_own_session_only(fake_pi_env: RoostEnv) -> None:
    env = fake_pi_env
    env.roost_ok("daemon", "start")
    theirs = env.root / "theirs.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from roost.locks import SessionLock
            assert SessionLock({str(theirs)!r}).acquire()
            print("held", flush=True)
            time.sleep(120)
        """)], env=env.env, stdout=subprocess.PIPE, text=True)
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


def test_a_registered_peer_cannot_reach_outside_its_tree(fake_pi_env: RoostEnv) -> None:
    env = fake_pi_env
    other = run_job(env, "someone else's job")
    settle(env, other)
    mine = env.root / "mine.jsonl"
    lock = SessionLock(str(mine))
    os.environ["ROOST_HOME"] = str(env.home)  # the lock lives in this roost's locks/
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


def test_a_client_cannot_claim_a_run_cause(fake_pi_env: RoostEnv) -> None:
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
def test_symlinks_planted_where_roost_writes_are_not_followed(fake_pi_env: RoostEnv) -> None:
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
    wait_until(lambda: env.show(job)["state"] in ("failed", "starting", "stopped"), 20,
               what="the start to be refused")
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
@pytest.mark.e2e
def test_no_job_secret_reaches_pi_or_its_tools_and_the_extension_cannot_be_replaced() -> None:
    from agents_support import AgentLab, after_tool, fresh, new_user_has, task, wait_file_command

    from roost.testkit.fakellm import text, tool_call

    lab = AgentLab()
    try:
        gate = lab.root / "gate"
        probe = ("tr '\\0' '\\n' < /proc/$PPID/environ; echo ---; env; echo ---; "
                 + wait_file_command(gate))
        lab.llm.add(fresh("SEC-T1"), tool_call("bash", {"command": probe}))
        lab.llm.add(after_tool("SEC-T1", "bash"), text("probed"))
        lab.llm.add(task("SEC-T1") & new_user_has("AFTER-PROBE"), text("still connected"))
        job = lab.run("SEC-T1 probe the environment")
        lab.wait_request(fresh("SEC-T1"))
        record = lab.record(job)
        worker = record["workerPid"]
        import psutil

        pi = wait_until(lambda: psutil.Process(worker).children(), 60, "pi")[0]
        pi_environ = Path(f"/proc/{pi.pid}/environ").read_bytes().decode(errors="replace")
        token = record["token"]
        assert token not in pi_environ and "PI_JOB_TOKEN" not in pi_environ

        # A client that is not the worker's pi cannot replace the extension.
        raw = raw_unix(lab.job_dir(job) / "ext.sock")
        assert error_code(request(raw, op="ext_hello", pid=pi.pid)) == "unauthorized"
        raw.close()

        gate.touch()
        assert lab.wait(job) == "done"
        out = lab.tool_results_of("SEC-T1", "bash")[0]["text"]
        assert "ROOST_JOB_ID=" in out  # the probe did read pi's environment
        assert token not in out and "PI_JOB_TOKEN" not in out

        # The extension's channel still works after the probe: a reply reaches pi and a
        # message from roost's side is answered.
        assert lab.reply(job, "AFTER-PROBE") == "started"
        assert lab.wait(job) == "done"
        assert lab.record(job)["summary"].endswith("still connected")

        # Nowhere on disk where others could read it, and in no log.
        for path in [lab.roost_home, *lab.roost_home.rglob("*")]:
            assert stat.S_IMODE(path.lstat().st_mode) & 0o077 == 0, path
        for log in [lab.roost_home / "roostd.log", *lab.roost_home.glob("jobs/*/worker.log")]:
            if log.exists():
                assert token not in log.read_text(errors="replace"), log
    finally:
        print(lab.diagnostics())
        lab.close()
