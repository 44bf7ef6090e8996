"""Other writers of a session (roost.locks.writers, roost.locks.holding) and the worker's refusal.

The rule's two parts against real processes: a program whose command line names the
session (every form pi accepts), and a pi outside roost (a process titled `pi`) once the
session changed behind roost's back. Then the worker with the fake pi: restarted after a
crash while another process names the session, it refuses once (no crash loop), starts no
pi, and the job fails with who holds the session; the item waits and `roost start`
delivers it once that process is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.jobs import alive, pi_child, run_job, settle
from kit.lab import Lab
from kit.wait import wait_until

from roost.locks import writers

SLEEPER = "import sys, time; sys.stdout.write('up\\n'); sys.stdout.flush(); time.sleep(60)"
TITLED = (  # a process whose name is `pi`, as pi retitles itself (its argv then reads `pi`)
    "import ctypes, sys, time; ctypes.CDLL(None).prctl(15, b'pi', 0, 0, 0); "
    "sys.stdout.write('up\\n'); sys.stdout.flush(); time.sleep(60)"
)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def spawn(
    procs: list[subprocess.Popen[str]],
    code: str,
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, text=True
    )
    procs.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    return proc


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """A session file with an id of its own, as pi makes them: the rule names any process
    whose `--session`/`--session-id` gives the id, wherever it runs, so two tests side by side
    that shared one id saw each other's processes as writers."""
    path = tmp_path / "job" / "session.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"type": "session", "id": str(uuid.uuid4()), "cwd": "/"}) + "\n")
    return path


def pids(session: Path, job_dir: Path | None = None) -> set[int]:
    return {w.pid for w in writers.find_writers(str(session), str(job_dir) if job_dir else None)}


def test_command_lines_that_name_the_session(procs: list, session: Path, tmp_path: Path) -> None:
    folder = session.parent
    sid = writers.session_id(str(session))
    assert sid is not None
    by_path = spawn(procs, SLEEPER, "--session", str(session))
    relative = spawn(procs, SLEEPER, "--session=session.jsonl", cwd=folder)
    hint = spawn(procs, SLEEPER, "--session-dir", str(folder), "--session", sid[:8])
    by_id = spawn(procs, SLEEPER, "--session-dir", str(folder), "--session-id", sid)
    resume = spawn(procs, SLEEPER, "--session-dir", str(folder), "--resume")
    named = pids(session)
    assert {by_path.pid, relative.pid, hint.pid, by_id.pid, resume.pid} <= named

    # Not this session: another file, another id, a picker elsewhere, a mere mention.
    other = tmp_path / "other.jsonl"
    others = [
        spawn(procs, SLEEPER, "--session", str(other)),
        spawn(procs, SLEEPER, "--session", "not-this-id"),  # no uuid starts so
        spawn(procs, SLEEPER, "--session-dir", str(tmp_path), "-c"),
        spawn(procs, SLEEPER, str(session)),
    ]
    assert not {p.pid for p in others} & named
    found = {w.pid: w for w in writers.find_writers(str(session))}
    assert found[hint.pid].how == "its --session names its id"
    assert found[by_path.pid].job is None


def test_a_pi_outside_roost_counts_once_the_session_changed_behind_roosts_back(
    procs: list,
    session: Path,
) -> None:
    job_dir = session.parent
    before = spawn(procs, TITLED)  # a pi the person was using before roost let go
    writers.remember(str(session), str(job_dir))
    assert writers.changed_outside(str(session), str(job_dir)) is None
    after = spawn(procs, TITLED)  # started after: e.g. from pi's resume hint
    under_roost = spawn(
        procs, TITLED, env={**os.environ, "ROOST_EXT_SOCK": "/x/ext.sock", "ROOST_JOB_ID": "abcd"}
    )
    assert pids(session, job_dir) == set()  # unchanged: nothing suspected

    with session.open("a") as handle:  # someone wrote it
        handle.write("{}\n")
    assert writers.changed_outside(str(session), str(job_dir)) is not None
    assert pids(session, job_dir) == {after.pid}
    assert before.pid not in pids(session, job_dir) and under_roost.pid not in pids(session, job_dir)

    writers.remember(str(session), str(job_dir))  # roost's own pi wrote it: noted again
    assert pids(session, job_dir) == set()


def test_restarted_worker_refuses_another_writer_and_keeps_the_item(
    fake_pi_env: Lab,
    procs: list,
) -> None:
    env = fake_pi_env
    env.configure(restartBackoffSeconds=0.05)
    job = run_job(env, "first")
    assert settle(env, job) == "done"
    session = env.show(job)["session"]
    worker = env.show(job)["worker"]["pid"]
    own_pi = pi_child(worker)
    other = spawn(procs, SLEEPER, "--session", session)  # keeps its command line

    os.kill(worker, signal.SIGKILL)  # its pi names the session too: it is ours, not counted
    wait_until(lambda: env.show(job)["state"] == "failed", 30, what="the job to fail")
    shown = env.show(job)
    name = Path(f"/proc/{other.pid}/comm").read_text().strip()  # the program's name
    assert (f"held by pid {other.pid} ({name}, not under roost): quit it or run roost attach {job}") in shown[
        "error"
    ], shown
    assert shown["worker"]["crashes"] == 1  # refused once: no restart loop
    assert not alive(own_pi.pid)
    assert pi_children_of_lab(env) == []  # no pi was started on the session

    reply = env.roost("reply", job, "kept for later")
    assert reply.stdout.strip() == "queued"
    assert f"held by pid {other.pid}" in reply.stderr
    assert [i["text"] for i in env.mailbox_files(job)] == ["kept for later"]

    other.kill()
    other.wait()
    env.roost_ok("start", job)
    assert settle(env, job) == "done"
    assert env.mailbox_files(job) == []
    assert env.show(job)["summary"] == "echo: kept for later"


def pi_children_of_lab(env: Lab) -> list[int]:
    """The fake pis running for the lab's jobs (they name fakepi.py in their arguments)."""
    out = []
    for proc in env.processes():
        try:
            if any("fakepi" in a for a in proc.cmdline()):
                out.append(proc.pid)
        except Exception:
            continue
    return out
