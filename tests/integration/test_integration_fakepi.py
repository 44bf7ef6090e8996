"""Integration: a real roostd and real workers in a temp ROOST_HOME, with the fake pi
(tests/fakepi/fakepi.py) instead of pi. Covers the CLI contracts, replies, dialogs,
crashes (kill -9 of a worker, of roostd), crash loops, malformed frames and shell jobs.

Runs are steered by the fake pi's directives in the user text (see its docstring):
`[[hold NAME]]` keeps a run inside a tool call and `[[think NAME]]` inside a model call
until the test creates the file NAME in the job's cwd (so "the job is mid-run" is a state
the test controls, not a race), `[[dialog select A,B]]` opens a dialog, `[[crash]]` makes
pi exit, `[[kill-worker-before-ack]]` kills the worker after the user message reached the
session but before pi announced it. No fixed sleeps: every wait is on an outcome.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from kit.jobs import WAIT, Raw, alive, pi_child, run_job, settle, status_is
from kit.lab import Lab
from kit.wait import wait_until

from roost.pi.transcript import content_text, read_entries
from roost.wire.protocol import MAX_FRAME

JOBROW_KEYS = {
    "id",
    "name",
    "kind",
    "state",
    "status",
    "summary",
    "question",
    "dialog",
    "options",
    "cwd",
    "session",
    "parent",
    "parentSession",
    "rootSession",
    "pending",
    "created",
    "updated",
    "agent",
    "usage",
    "worktree",
    "queue",
    "after",
    "schedule",
    "result",
    "sandbox",
}


# -- helpers ---------------------------------------------------------------------------------
def cli_wait(env: Lab, job: str) -> str:
    """`roost wait JOB` (must settle); the state it prints."""
    return env.roost_ok("wait", job, "--timeout", WAIT, timeout=float(WAIT) + 30).strip()


def reply(env: Lab, job: str, text: str) -> subprocess.CompletedProcess[str]:
    return env.roost("reply", job, text)


def user_texts(env: Lab, job: str) -> list[str]:
    """The user messages in the job's session file, in order."""
    session = env.show(job)["session"]
    return [
        content_text(entry["message"].get("content"))
        for entry in read_entries(session)
        if entry.get("type") == "message" and entry["message"].get("role") == "user"
    ]


def session_entries(env: Lab, job: str) -> list[dict]:
    return read_entries(env.show(job)["session"])


def open_gate(env: Lab, name: str) -> None:
    (env.work / name).touch()


# -- runs and the CLI contracts ----------------------------------------------------------------
def test_run_settles_done_with_the_answer_in_logs(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "[[sleep 0.1]] hello there", "--name", "greeter")
    assert cli_wait(env, job) == "done"
    row = env.show(job)
    assert row["state"] == "done" and row["summary"] == "echo: [[sleep 0.1]] hello there"
    assert row["name"] == "greeter" and row["cwd"] == str(env.work)
    logs = env.roost_ok("logs", "greeter")  # a job is found by its name too
    assert "user: [[sleep 0.1]] hello there" in logs
    assert "⚙ sleep" in logs and "⎿ sleep" in logs  # the tool call and its result
    assert logs.rstrip().endswith("assistant: echo: [[sleep 0.1]] hello there")
    assert user_texts(env, job) == ["[[sleep 0.1]] hello there"]
    assert row["pending"] == {"replies": 0, "agent": 0}


def test_ls_json_rows_have_exactly_the_jobrow_keys(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    pi_job = run_job(env, "list me")
    shell_job = env.roost_ok("run", "--shell", "--", "true").strip()
    settle(env, pi_job)
    settle(env, shell_job)
    rows = json.loads(env.roost_ok("ls", "--json"))
    assert isinstance(rows, list) and {r["id"] for r in rows} == {pi_job, shell_job}
    for row in rows:
        assert set(row) == JOBROW_KEYS, set(row) ^ JOBROW_KEYS
        assert set(row["pending"]) == {"replies", "agent"}
        assert row["sandbox"] is None  # documented null for a job made without --sandbox
        assert row["parent"] is None and row["parentSession"] is None and row["rootSession"] is None
    kinds = {r["id"]: r["kind"] for r in rows}
    assert kinds == {pi_job: "pi", shell_job: "shell"}
    assert next(r for r in rows if r["id"] == pi_job)["session"].endswith("session.jsonl")


def test_reply_starts_an_idle_job_and_is_delivered_to_a_running_one(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    queued = env.root / "queued.txt"  # the fake pi notes each steer it queued
    job = env.run_job("first", env={"FAKEPI_QUEUED": str(queued)})
    settle(env, job)

    proc = reply(env, job, "second")
    assert (proc.returncode, proc.stdout.strip()) == (0, "started"), proc.stderr
    assert settle(env, job) == "done"
    assert "assistant: echo: second" in env.roost_ok("logs", job)

    proc = reply(env, job, "[[hold gate]] third")
    assert proc.stdout.strip() == "started"
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    proc = reply(env, job, "mid-run note")
    assert (proc.returncode, proc.stdout.strip()) == (0, "delivered"), proc.stderr
    # "delivered": in the job's mailbox, which the worker hands to pi on its own time; the
    # tool ends once pi queued it (under load the worker took longer than the tool's end).
    wait_until(
        lambda: queued.is_file() and "mid-run note" in queued.read_text(), 30, what="pi to queue the steer"
    )
    open_gate(env, "gate")
    assert settle(env, job) == "done"
    assert env.show(job)["summary"] == "echo: mid-run note"
    # The steer went in at the tool boundary: after the tool result, inside the same run.
    roles = [
        (e["message"]["role"], content_text(e["message"].get("content")))
        for e in session_entries(env, job)
        if e.get("type") == "message"
    ]
    at = roles.index(("user", "mid-run note"))
    assert roles[at - 1][0] == "toolResult" and roles[at - 2][0] == "assistant"
    assert roles[at + 1] == ("assistant", "echo: mid-run note")
    assert user_texts(env, job) == ["first", "second", "[[hold gate]] third", "mid-run note"]


def test_reply_to_a_stopped_job_is_refused_until_it_is_started(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "before stop")
    settle(env, job)
    worker = env.show(job)["worker"]["pid"]
    assert env.roost_ok("stop", job).strip() == f"{job} stopped"
    assert env.show(job)["state"] == "stopped" and not alive(worker)

    proc = reply(env, job, "while stopped")
    assert (proc.returncode, proc.stdout.strip()) == (1, "stopped")  # refused
    assert "roost start" in proc.stderr
    assert env.show(job)["pending"]["replies"] == 0  # nothing was queued

    env.roost_ok("start", job)
    wait_until(lambda: env.show(job)["state"] == "done", 20, what="the restarted job to be idle")
    proc = reply(env, job, "after start")
    assert proc.stdout.strip() == "started", proc.stderr
    assert settle(env, job) == "done"
    assert user_texts(env, job) == ["before stop", "after start"]
    assert "echo: after start" in env.roost_ok("logs", job)


def test_reply_to_a_reaped_job_starts_it(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(reapAfterSeconds=1)
    job = run_job(env, "soon idle")
    settle(env, job)
    wait_until(lambda: env.show(job)["state"] == "reaped", 20, what="the reaper")
    assert env.show(job)["worker"]["pid"] is None

    proc = reply(env, job, "wake up")
    assert (proc.returncode, proc.stdout.strip()) == (0, "started"), proc.stderr
    assert settle(env, job) in ("done", "reaped")
    logs = env.roost_ok("logs", job)
    assert "echo: soon idle" in logs and "echo: wake up" in logs  # history survived
    assert user_texts(env, job) == ["soon idle", "wake up"]
    headers = [e for e in session_entries(env, job) if e.get("type") == "session"]
    assert len(headers) == 1


def test_dialog_needs_input_and_a_reply_answers_it(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "[[dialog select A,B]] choose")
    row = wait_until(lambda: (r := env.show(job))["state"] == "needs_input" and r, 20, what="the dialog")
    assert "A" in row["question"] and "B" in row["question"]
    assert settle(env, job) == "needs_input"  # blocked on the user counts as settled

    proc = reply(env, job, "B")
    assert (proc.returncode, proc.stdout.strip()) == (0, "delivered"), proc.stderr
    assert settle(env, job) == "done"
    row = env.show(job)
    assert row["summary"] == "chose: B" and row["question"] is None
    assert user_texts(env, job) == ["[[dialog select A,B]] choose"]  # an answer is no message


def test_ask_leaves_the_job_needing_input_with_the_question(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "[[ask]] plan")
    assert settle(env, job) == "needs_input"
    assert env.show(job)["question"] == "Should I go on?"
    assert reply(env, job, "yes").stdout.strip() == "started"
    assert settle(env, job) == "done"
    assert env.show(job)["question"] is None


# -- crashes -----------------------------------------------------------------------------------
def test_worker_sigkill_mid_run_resumes_without_losing_or_doubling(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(restartBackoffSeconds=0.05)
    job = run_job(env, "[[hold never]] long task")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    assert reply(env, job, "steer while held").stdout.strip() == "delivered"
    worker = json.loads(env.roost_ok("show", job, "--json"))["worker"]["pid"]
    pi = pi_child(worker)

    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: not alive(pi.pid), 10, what="the orphaned pi to exit (pdeathsig)")
    new_worker = wait_until(
        lambda: (
            (w := env.show(job)["worker"])["pid"] not in (None, worker)
            and w["state"] == "running"
            and w["pid"]
        ),
        20,
        what="a new worker",
    )
    assert settle(env, job) == "done"

    row = env.show(job)
    assert row["worker"]["pid"] == new_worker and row["worker"]["crashes"] == 1
    assert row["pending"] == {"replies": 0, "agent": 0}
    # The steer was in flight (pi had queued it, never stored it): it is redelivered once.
    assert user_texts(env, job) == ["[[hold never]] long task", "steer while held"]
    assert row["summary"] == "echo: steer while held"
    assert len([e for e in session_entries(env, job) if e.get("type") == "session"]) == 1


def kill_worker_between_delivery_and_ack(env: Lab) -> tuple[str, str]:
    """A job whose worker dies after pi took (and saved) a reply, before the ack; returns
    the job and the reply once a new worker is up."""
    job = run_job(env, "first")
    settle(env, job)
    worker = env.show(job)["worker"]["pid"]
    text = "[[kill-worker-before-ack]] second"
    assert reply(env, job, text).stdout.strip() == "started"
    wait_until(lambda: not alive(worker), 20, what="the worker to be killed")
    wait_until(lambda: env.show(job)["worker"]["pid"] not in (None, worker), 20, what="a new worker")
    return job, text


def test_worker_sigkill_between_delivery_and_ack_shows_the_reply_once(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    env.configure(restartBackoffSeconds=0.05, resumeInterrupted=False)
    job, text = kill_worker_between_delivery_and_ack(env)
    # The reply reached pi but its run was cut short; with resumeInterrupted off, the job
    # asks to be continued.
    assert settle(env, job) == "needs_input"
    row = env.show(job)
    assert "interrupted" in (row["question"] or "")
    assert row["worker"]["crashes"] == 1
    assert row["pending"] == {"replies": 0, "agent": 0}  # the resend was dropped and acked
    assert user_texts(env, job) == ["first", text]

    assert reply(env, job, "third").stdout.strip() == "started"
    assert settle(env, job) == "done"
    assert user_texts(env, job) == ["first", text, "third"]


def notes_in(env: Lab, job: str) -> list[str]:
    entries = read_entries(env.show(job)["session"])
    return [
        e["content"]
        for e in entries
        if e.get("type") == "custom_message" and e.get("customType") == "pi-roost-note"
    ]


def test_a_run_cut_short_by_a_crash_continues_by_itself(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(restartBackoffSeconds=0.05)
    job, text = kill_worker_between_delivery_and_ack(env)
    # The reply is in the session but its run was cut short: roost continues it with a note
    # of its own (not a user message), and the reply is not sent twice.
    assert settle(env, job) == "done"
    row = env.show(job)
    assert row["question"] is None and row["worker"]["crashes"] == 1
    assert row["pending"] == {"replies": 0, "agent": 0}
    assert user_texts(env, job) == ["first", text]
    notes = notes_in(env, job)
    assert len(notes) == 1 and "interrupted" in notes[0] and "not from the user" in notes[0]
    assert (
        not (env.job_dir(job) / "run.json").exists()
        or json.loads((env.job_dir(job) / "run.json").read_text())["cause"] is None
    )


def test_continuations_in_a_row_are_limited(fake_pi_env: Lab) -> None:
    """Each continuation crashes again: after resumeMaxInRow of them the job waits for a
    person, as with resumeInterrupted off."""
    env = fake_pi_env
    env.env["FAKEPI_KILL_ON_NOTE"] = "1"
    env.configure(restartBackoffSeconds=0.05, resumeMaxInRow=2)
    job = run_job(env, "first")
    settle(env, job)
    assert reply(env, job, "[[kill-worker-before-ack]] again").stdout.strip() == "started"
    wait_until(
        lambda: env.show(job)["worker"]["crashes"] == 3,
        30,
        what="the first crash and two crashing continuations",
    )
    assert settle(env, job) == "needs_input"
    row = env.show(job)
    assert "interrupted" in (row["question"] or "")
    assert row["worker"]["crashes"] == 3
    assert len(notes_in(env, job)) == 2


def test_a_stopped_run_is_not_continued(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "[[sleep 30]] slow")
    wait_until(lambda: env.show(job)["status"].startswith("running"), 20, what="the tool")
    env.roost_ok("stop", job)
    wait_until(lambda: env.show(job)["state"] == "stopped", 20, what="the job to stop")
    env.roost_ok("start", job)
    # not continued, and not `done` either: its run was cut short, a reply continues it
    assert settle(env, job) == "needs_input"
    row = env.show(job)
    assert (row["status"], row["summary"]) == ("interrupted", "interrupted: reply to continue")
    assert "reply to continue" in (row["question"] or "")
    assert notes_in(env, job) == []
    assert reply(env, job, "go on").stdout.strip() == "started"
    assert settle(env, job) == "done" and env.show(job)["summary"] != row["summary"]


def test_a_new_jobs_first_prompt_survives_a_kill_before_pi_wrote_the_session(
    fake_pi_env: Lab,
) -> None:
    """pi writes a new session file only at the first assistant message: a task that pi
    took (message_end) is still only in its memory during the first model call."""
    env = fake_pi_env
    env.configure(restartBackoffSeconds=0.05)
    task = "[[think gate]] first words"
    job = run_job(env, task)
    wait_until(lambda: env.show(job)["status"] == "thinking", 20, what="the first model call")
    session = env.show(job)["session"]
    assert not os.path.exists(session)
    worker = env.show(job)["worker"]["pid"]

    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: env.show(job)["worker"]["pid"] not in (None, worker), 20, what="a new worker")
    open_gate(env, "gate")
    assert settle(env, job) == "done"
    assert user_texts(env, job) == [task]
    assert env.show(job)["summary"] == f"echo: {task}"


def test_a_restarted_worker_waits_for_its_previous_pi_to_let_go(fake_pi_env: Lab) -> None:
    """A pi that takes a while to exit after its worker died still holds the session lock;
    the next worker must wait for it, not start a second pi that finds the lock taken."""
    env = fake_pi_env
    env.env["FAKEPI_TERM_LINGER"] = "1.5"  # outlives the next worker's SIGTERM too
    env.configure(restartBackoffSeconds=0.05)
    job = run_job(env, "[[hold never]] slow to die")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    worker = env.show(job)["worker"]["pid"]
    pi = pi_child(worker)
    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: env.show(job)["worker"]["pid"] not in (None, worker), 20, what="a new worker")
    assert reply(env, job, "still there").returncode == 0
    assert settle(env, job) == "done"
    assert not alive(pi.pid)
    row = env.show(job)
    assert row["summary"] == "echo: still there" and row["worker"]["crashes"] == 1
    assert user_texts(env, job) == ["[[hold never]] slow to die", "still there"]


def test_roostd_sigkill_leaves_workers_running_and_the_next_roostd_adopts_them(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    job = run_job(env, "[[hold gate]] survive")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    worker = env.show(job)["worker"]["pid"]
    pi = pi_child(worker)
    daemon = env.daemon_pid()
    assert daemon is not None

    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not alive(daemon), 10, what="roostd to die")
    assert alive(worker) and alive(pi.pid)

    rows = json.loads(env.roost_ok("ls", "--json"))  # starts a new roostd
    assert env.daemon_pid() not in (None, daemon)
    assert [r["id"] for r in rows] == [job] and rows[0]["state"] == "running"
    wait_until(
        lambda: env.show(job)["worker"]["state"] == "running",
        20,
        what="the worker to reconnect to the new roostd",
    )
    row = env.show(job)
    assert row["worker"]["pid"] == worker and row["worker"]["crashes"] == 0
    assert alive(pi.pid) and pi_child(worker).pid == pi.pid

    open_gate(env, "gate")
    assert settle(env, job) == "done"
    assert reply(env, job, "after the new roostd").stdout.strip() == "started"
    assert settle(env, job) == "done"
    assert env.show(job)["summary"] == "echo: after the new roostd"
    assert user_texts(env, job) == ["[[hold gate]] survive", "after the new roostd"]
    assert env.show(job)["worker"]["pid"] == worker  # never restarted


def test_a_new_roostd_restarts_working_jobs_and_leaves_idle_ones_to_their_next_item(
    fake_pi_env: Lab,
) -> None:
    """Everything died while no roostd watched: only the job that was working restarts."""
    env = fake_pi_env
    idle = run_job(env, "idle one")
    assert settle(env, idle) == "done"
    busy = run_job(env, "[[hold gate]] busy one")
    wait_until(lambda: status_is(env, busy, "running hold"), 20, what="the hold tool to run")
    daemon = env.daemon_pid()
    workers = [env.show(job)["worker"]["pid"] for job in (idle, busy)]
    assert daemon is not None
    for pid in (daemon, *workers):
        os.kill(pid, signal.SIGKILL)
    wait_until(
        lambda: not any(alive(pid) for pid in (daemon, *workers)), 10, what="roostd and the workers to die"
    )

    env.roost_ok("ls")  # a new roostd
    wait_until(
        lambda: env.show(busy)["worker"]["pid"] not in (None, workers[1]),
        20,
        what="the working job's worker to be restarted",
    )
    row = env.show(idle)
    assert row["state"] == "done" and row["worker"]["pid"] is None  # idle: nothing to do
    assert reply(env, idle, "wake up").stdout.strip() == "started"
    assert settle(env, idle) == "done"
    assert env.show(idle)["summary"] == "echo: wake up"


def test_a_crash_loop_ends_failed_and_roostd_gives_up(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(restartBackoffSeconds=0.05, restartMaxCrashes=3)
    job = run_job(env, "[[crash]] every time")
    row = wait_until(lambda: (r := env.show(job))["state"] == "failed" and r, 40, what="the job to fail")
    assert "gave up" in row["error"], row["error"]
    assert row["worker"]["pid"] is None and row["worker"]["state"] == "fatal"
    assert row["pending"]["replies"] == 1  # the task was never taken, so never acked
    assert settle(env, job) == "failed"


# -- the socket --------------------------------------------------------------------------------
def test_bad_frames_get_clear_errors_and_break_nothing(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("daemon", "start")
    raw = Raw(env)
    assert raw.greeting["type"] == "hello" and raw.greeting["server"] == "roostd"

    def error_code(frame: dict) -> str:
        assert frame["type"] == "response" and frame["ok"] is False, frame
        return frame["error"]["code"]

    assert error_code(raw.send(b"garbage\n")) == "bad_frame"
    assert error_code(raw.send(b"[1, 2]\n")) == "bad_frame"
    assert error_code(raw.send(b"\xff\xfe{}\n")) == "bad_frame"
    ok = raw.send(b'{"id": 1, "op": "status"}\n')
    assert ok["ok"] and ok["id"] == 1 and ok["result"]["running"] is True  # still usable
    frame = raw.send(b'{"id": 2, "op": "no_such_op"}\n')
    assert error_code(frame) == "unknown_op" and frame["id"] == 2
    assert error_code(raw.send(b'{"id": 3}\n')) == "bad_request"
    assert error_code(raw.send(b'{"id": 4, "op": "show"}\n')) == "bad_request"
    for worker_op in (
        b'{"id": 5, "op": "worker_update", "state": "done"}\n',
        b'{"id": 6, "op": "worker_exiting", "reason": "x"}\n',
        b'{"id": 7, "op": "handback", "state": "done"}\n',
    ):
        frame = raw.send(worker_op)
        assert error_code(frame) in ("unauthorized", "unknown_op"), frame
    assert error_code(raw.send(b'{"id": 8, "op": "worker_update"}\n')) == "unauthorized"
    frame = raw.send(b'{"id": 9, "op": "worker_hello", "job": "nope", "token": "x", "pid": 1}\n')
    assert error_code(frame) == "not_found"

    big = b'{"id": 10, "op": "status", "pad": "' + b"x" * (MAX_FRAME + 10) + b'"}\n'
    assert error_code(raw.send(big)) == "frame_too_large"
    # The rest of the oversize line was skipped: the next frame is read as a frame.
    assert raw.send(b'{"id": 11, "op": "status"}\n')["id"] == 11
    raw.close()

    fresh = Raw(env)
    status = fresh.send(b'{"id": 1, "op": "status"}\n')
    assert status["ok"] and status["result"]["pid"] == env.daemon_pid()
    fresh.close()
    assert json.loads(env.roost_ok("daemon", "status", "--json"))["running"] is True


# -- shell jobs --------------------------------------------------------------------------------
def test_shell_jobs_report_their_exit_and_take_no_replies(roost_env: Lab) -> None:
    env = roost_env
    failing = env.roost_ok("run", "--shell", "--", "sh", "-c", "echo hi; exit 3").strip()
    passing = env.roost_ok("run", "--shell", "--", "true").strip()
    assert settle(env, failing) == "failed"
    assert settle(env, passing) == "done"
    row = env.show(failing)
    assert row["kind"] == "shell" and row["exitCode"] == 3 and "3" in row["error"]
    assert env.show(passing)["exitCode"] == 0
    logs = env.roost_ok("logs", failing)
    assert "hi" in logs
    # The command as a shell needs it: pasted back, it runs the same thing.
    assert logs.startswith("$ sh -c 'echo hi; exit 3'   # "), logs
    assert "command  sh -c 'echo hi; exit 3'\n" in env.roost_ok("show", failing)

    proc = reply(env, failing, "hello?")
    assert proc.returncode == 1 and "shell job" in proc.stderr  # refused
    assert proc.stdout.strip() == ""


# -- the daemon --------------------------------------------------------------------------------
def test_daemon_status_json(roost_env: Lab) -> None:
    env = roost_env
    keys = {"running", "pid", "socket", "version", "jobs"}
    proc = env.roost("daemon", "status", "--json")
    down = json.loads(proc.stdout)
    assert proc.returncode == 1 and set(down) == keys
    assert down["running"] is False and down["pid"] is None and down["jobs"] == 0
    assert down["socket"] == str(env.socket_path)

    env.roost_ok("run", "--shell", "--", "true")
    up = json.loads(env.roost_ok("daemon", "status", "--json"))
    assert set(up) == keys
    assert up["running"] is True and up["pid"] == env.daemon_pid() and up["jobs"] == 1
    assert up["socket"] == str(env.socket_path) and isinstance(up["version"], str)


def test_a_second_daemon_on_the_same_home_refuses(roost_env: Lab) -> None:
    env = roost_env
    env.roost_ok("daemon", "start")
    first = env.daemon_pid()
    second = subprocess.run(
        [sys.executable, "-m", "roost.cli.main", "daemon", "run"],
        env=env.env,
        cwd=env.work,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == 1
    assert "already running" in second.stderr
    assert env.daemon_pid() == first and alive(first)
    assert env.request("status")["pid"] == first  # the first still owns the socket
    assert json.loads(env.roost_ok("daemon", "status", "--json"))["pid"] == first


def test_wait_with_timeout_exits_1_while_the_run_goes_on(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "[[hold gate]] slow")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    proc = env.roost("wait", job, "--timeout", "0.3")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"roost: timed out; job {job} is running", proc.stderr
    assert proc.stdout == ""
    open_gate(env, "gate")
    assert settle(env, job) == "done"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
