"""End to end: the real `roost` CLI, roostd, workers and the real pi against a FakeLLM.

Each test gets its own ROOST_HOME, HOME and pi agent dir (a kit.lab.Lab); the
scripted model runs in this process, so the tests can look at every request pi made and
hold a response back to keep a run in flight.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from kit import FIXTURES
from kit.lab import Lab
from kit.matchers import user_messages, user_texts
from kit.wait import is_pi, kill, pi_under, pid_alive, wait_until

from roost.fakellm import (
    FakeLLM,
    any_message_contains,
    first_user_contains,
    last_is_tool_result,
    last_tool_result_contains,
    last_user_contains,
    text,
    tool_call,
)
from roost.pi.compat import features_of
from roost.pi.locate import find_pi

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("real_pi")]


@pytest.fixture
def lab(make_lab: Callable[..., Lab], llm: FakeLLM) -> Lab:
    return make_lab(llm=llm)


def worker_pid(lab: Lab, job: str) -> int:
    pid = lab.show(job, cli=True)["worker"]["pid"]
    assert pid, lab.show(job, cli=True)
    return int(pid)


# ---- run, logs, reply ----------------------------------------------------------------


def test_run_done_and_logs(lab: Lab, llm: FakeLLM) -> None:
    llm.add(last_user_contains("TASK-RUN"), text("ANSWER-RUN: all fine."))
    job = lab.run_job("--name", "runner", "TASK-RUN please")

    assert lab.wait(job) == "done"
    row = lab.row(job)
    assert row["state"] == "done"
    assert row["name"] == "runner"
    assert row["kind"] == "pi"
    assert row["summary"] == "ANSWER-RUN: all fine."
    assert row["pending"] == {"replies": 0, "agent": 0}
    assert row["cwd"] == str(lab.work)
    assert row["parentSession"] is None and row["rootSession"] is None

    logs = lab.cli("logs", "runner").stdout  # by name
    assert "TASK-RUN please" in logs
    assert "ANSWER-RUN: all fine." in logs

    assert len(llm.requests) == 1
    assert user_messages(llm.requests[0]) == ["TASK-RUN please"]
    assert user_texts(lab.session(job)) == ["TASK-RUN please"]
    assert lab.cli("mailbox", job, "--json").returncode == 0


def test_reply_round_trip(lab: Lab, llm: FakeLLM) -> None:
    llm.add(last_user_contains("TASK-RT"), text("What colour should it be?"))
    llm.add(last_user_contains("REPLY-RT"), text("ANSWER-RT: blue it is."))
    job = lab.run_job("TASK-RT")

    assert lab.wait(job) == "needs_input"  # a final answer ending in a question
    assert lab.row(job)["question"] == "What colour should it be?"

    reply = lab.cli("reply", job, "REPLY-RT: blue")
    assert reply.stdout.strip() == "started"
    assert lab.wait(job) == "done"

    second = llm.wait_for_request(last_user_contains("REPLY-RT"), timeout=5)
    assert user_messages(second) == ["TASK-RT", "REPLY-RT: blue"]
    assistant = [m for m in second["messages"] if m["role"] == "assistant"]
    assert "What colour should it be?" in json.dumps(assistant)
    assert len(llm.requests) == 2

    row = lab.row(job)
    assert row["summary"] == "ANSWER-RT: blue it is."
    assert row["question"] is None
    assert user_texts(lab.session(job)) == ["TASK-RT", "REPLY-RT: blue"]
    assert "ANSWER-RT: blue it is." in lab.cli("logs", job).stdout


def test_reply_to_reaped_job_starts_it(make_lab: Callable[..., Lab], llm: FakeLLM) -> None:
    lab = make_lab(llm=llm, reapAfterSeconds=1)
    llm.add(last_user_contains("TASK-REAP"), text("ANSWER-REAP-1"))
    llm.add(last_user_contains("REPLY-REAP"), text("ANSWER-REAP-2"))
    job = lab.run_job("TASK-REAP")
    first_worker = worker_pid(lab, job)

    lab.wait_state(job, "reaped", timeout=60)
    assert lab.row(job)["state"] == "reaped"
    wait_until(lambda: not pid_alive(first_worker), 10, "the reaped worker to exit")
    assert lab.show(job, cli=True)["worker"]["pid"] is None

    reply = lab.cli("reply", job, "REPLY-REAP now")
    assert reply.stdout.strip() == "started"
    assert lab.wait(job) in ("done", "reaped")

    second = llm.wait_for_request(last_user_contains("REPLY-REAP"), timeout=5)
    # The new worker resumed the session: the model sees the whole history.
    assert user_messages(second) == ["TASK-REAP", "REPLY-REAP now"]
    assert "ANSWER-REAP-1" in json.dumps(second["messages"])
    assert user_texts(lab.session(job)) == ["TASK-REAP", "REPLY-REAP now"]
    assert lab.row(job)["summary"] == "ANSWER-REAP-2"


def test_a_session_left_in_part_of_a_line_keeps_its_history(
    make_lab: Callable[..., Lab], llm: FakeLLM
) -> None:
    """A pi SIGKILLed in the middle of writing an entry leaves part of a line at the end of
    the session. The next pi's entries must start a line of their own: pi 0.73.1 glued its
    first one to the fragment, and that entry (here the reply) was gone for every reader,
    pi included, when the session was next loaded (roost.pi.sessiontail)."""
    lab = make_lab(llm=llm, reapAfterSeconds=1)
    llm.add(last_user_contains("TASK-CUT"), text("ANSWER-CUT-1"))
    llm.add(last_user_contains("REPLY-CUT-A"), text("ANSWER-CUT-A"))
    llm.add(last_user_contains("REPLY-CUT-B"), text("ANSWER-CUT-B"))
    job = lab.run_job("TASK-CUT")
    lab.wait_state(job, "reaped", timeout=60)
    session = Path(lab.record(job)["session"])
    whole = session.read_bytes()
    last_line = whole.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    with session.open("ab") as handle:  # what a pi killed mid-write leaves
        handle.write(last_line[:30])

    assert lab.cli("reply", job, "REPLY-CUT-A").stdout.strip() == "started"
    lab.wait_state(job, "reaped", timeout=60)
    assert "ended in part of a line" in (lab.job_dir(job) / "worker.log").read_text()
    assert session.read_bytes().startswith(whole + last_line[:30] + b"\n")
    assert user_texts(lab.session(job)) == ["TASK-CUT", "REPLY-CUT-A"]

    # A new pi loads the session: the whole history is there.
    assert lab.cli("reply", job, "REPLY-CUT-B").stdout.strip() == "started"
    assert lab.wait(job) in ("done", "reaped")
    last = llm.wait_for_request(last_user_contains("REPLY-CUT-B"), timeout=5)
    assert user_messages(last) == ["TASK-CUT", "REPLY-CUT-A", "REPLY-CUT-B"]
    assert "ANSWER-CUT-A" in json.dumps(last["messages"])


def test_stop_then_reply_is_refused(lab: Lab, llm: FakeLLM) -> None:
    hold = threading.Event()
    llm.add(last_user_contains("TASK-STOP"), text("never seen", hold=hold))
    try:
        job = lab.run_job("TASK-STOP")
        llm.wait_for_request(last_user_contains("TASK-STOP"), timeout=60)
        lab.wait_state(job, "running")
        pid = worker_pid(lab, job)

        stop = lab.cli("stop", job)
        assert stop.stdout.strip() == f"{job} stopped"
        assert not pid_alive(pid)
        assert lab.row(job)["state"] == "stopped"

        reply = lab.cli("reply", job, "are you there?", check=False)
        assert reply.returncode == 1  # refused
        assert reply.stdout.strip() == "stopped"
        assert "stopped" in reply.stderr
        row = lab.row(job)
        assert row["state"] == "stopped"
        assert row["pending"] == {"replies": 0, "agent": 0}  # nothing was queued
        assert lab.show(job, cli=True)["worker"]["pid"] is None
        assert len(llm.requests) == 1
    finally:
        hold.set()


def test_daemon_stop_jobs_keeps_each_question_until_it_is_answered(lab: Lab, llm: FakeLLM) -> None:
    """`roost daemon stop --jobs` stops a job waiting on its question: its row (ls, show,
    view) keeps the question, a reply is refused (nothing wakes a stopped job), and `roost
    start` brings it back waiting on the same question, which a reply then answers."""
    from roost.view.app import table_rows

    llm.add(last_user_contains("TASK-DQ"), text("Plan ready. Shall I apply it to main?"))
    llm.add(last_user_contains("REPLY-DQ"), text("ANSWER-DQ: applied."))
    job = lab.run_job("TASK-DQ")
    assert lab.wait(job) == "needs_input"
    question = "Plan ready. Shall I apply it to main?"
    assert lab.row(job)["question"] == question

    lab.cli("daemon", "stop", "--jobs")
    assert lab.record(job)["state"] == "stopped"
    row = lab.row(job)  # a new roostd
    assert (row["state"], row["question"]) == ("stopped", question), row
    assert f"question  {question}" in lab.cli("show", job).stdout
    cells = dict(table_rows([row]))[job]
    assert any(question in cell.plain for cell in cells), cells
    assert lab.cli("reply", job, "REPLY-DQ early", check=False).returncode == 1  # a refusal

    lab.cli("start", job)
    row = wait_until(lambda: (r := lab.row(job))["state"] != "starting" and r, 60, "the job to come back")
    assert (row["state"], row["question"]) == ("needs_input", question), row
    assert len(llm.requests) == 1  # it waits: no run started by itself
    assert lab.cli("reply", job, "REPLY-DQ: yes").stdout.strip() == "started"
    assert lab.wait(job) == "done"
    assert lab.row(job)["question"] is None


# ---- dialogs ---------------------------------------------------------------------------


def test_dialog_needs_input_then_reply_answers_it(lab: Lab, llm: FakeLLM) -> None:
    # pi loads every extension in <agent dir>/extensions/ by itself (the worker passes
    # only roost's own with -e).
    (lab.agent_dir / "extensions").mkdir()
    shutil.copy(FIXTURES / "ask.ts", lab.agent_dir / "extensions" / "ask.ts")
    llm.add(first_user_contains("TASK-DIALOG") & ~last_is_tool_result(), tool_call("ask_colour", {}), times=1)
    llm.add(last_tool_result_contains("picked:"), text("ANSWER-DIALOG: done."))
    job = lab.run_job("TASK-DIALOG")

    assert "ask_colour" in json.dumps(llm.wait_for_request(timeout=60).get("tools"))
    lab.wait_state(job, "needs_input")
    row = lab.row(job)
    assert row["state"] == "needs_input"
    assert "Pick a colour" in (row["question"] or "")
    assert "green" in row["question"]
    assert lab.wait(job) == "needs_input"  # blocked on the user counts as settled

    reply = lab.cli("reply", job, "green")
    assert reply.stdout.strip() == "delivered"
    assert lab.wait(job) == "done"

    answered = llm.wait_for_request(last_tool_result_contains("picked:"), timeout=5)
    tool_messages = [m for m in answered["messages"] if m["role"] == "tool"]
    assert "picked: green" in json.dumps(tool_messages)
    row = lab.row(job)
    assert row["question"] is None
    assert row["summary"] == "ANSWER-DIALOG: done."
    # The reply answered the dialog: it is not a user message of the session.
    assert user_texts(lab.session(job)) == ["TASK-DIALOG"]


# ---- crashes ---------------------------------------------------------------------------


def without_notes(texts: list[str]) -> list[str]:
    """User-role texts of a request without roost's own notes (a continued run)."""
    return [t for t in texts if not t.startswith("[roost] ")]


NOOP_EXTENSION = """
export default function (pi: any) {
  pi.registerCommand("noop", { description: "does nothing", handler: async () => {} });
}
"""


def test_a_reply_that_an_extension_command_handles_is_done_at_once(lab: Lab, llm: FakeLLM) -> None:
    """pi 1.x says a prompt was `handled` (no message, no run follows): the reply is
    acknowledged and the job is idle, so `roost wait` returns. (0.73 says nothing: such a
    reply waits in flight until the next run; README, Known limits.)"""
    if not features_of(find_pi()).prompt_disposition:
        pytest.skip(f"{features_of(find_pi()).label} does not report a prompt's disposition")
    extensions = lab.agent_dir / "extensions"
    extensions.mkdir(parents=True, exist_ok=True)
    (extensions / "noop.ts").write_text(NOOP_EXTENSION)
    llm.add(last_user_contains("TASK-NOOP"), text("ready"))
    job = lab.run_job("TASK-NOOP")
    assert lab.wait(job) == "done"
    requests = len(llm.requests)
    assert lab.cli("reply", job, "/noop").stdout.strip() == "started"
    assert lab.wait(job, timeout=20) == "done"
    assert lab.row(job)["pending"] == {"replies": 0, "agent": 0}
    assert len(llm.requests) == requests  # no run, no model request
    assert user_texts(lab.session(job)) == ["TASK-NOOP"]


def test_worker_sigkill_mid_run_restarts_and_loses_nothing(lab: Lab, llm: FakeLLM) -> None:
    hold_task, hold_reply = threading.Event(), threading.Event()
    # A run cut short is continued by roost's own note (pi 1.x has the cut input in the
    # session already; 0.73 may not, and then gets it again).
    llm.add(last_user_contains("[roost] Your previous run was interrupted"), text("CONTINUED"))
    # First attempt at the task is held (and then killed); the redelivered task answers.
    llm.add(last_user_contains("TASK-KILL"), text("lost", hold=hold_task), times=1)
    llm.add(last_user_contains("TASK-KILL"), text("ANSWER-KILL-1"))
    llm.add(last_user_contains("REPLY-KILL-A"), text("lost too", hold=hold_reply), times=1)
    llm.add(last_user_contains("REPLY-KILL-B"), text("ANSWER-KILL-B"))
    try:
        job = lab.run_job("TASK-KILL")
        llm.wait_for_request(last_user_contains("TASK-KILL"), timeout=60)
        first = worker_pid(lab, job)
        kill(first)  # the first run is in flight: pi has the task, the model has not answered

        assert lab.wait(job) == "done"
        second = worker_pid(lab, job)
        assert second != first
        assert lab.show(job, cli=True)["worker"]["crashes"] >= 1
        # The task is in the session once: delivered again (0.73 had not written it), or
        # kept and its run continued (pi 1.x wrote it as it shut down).
        assert user_texts(lab.session(job)) == ["TASK-KILL"]
        assert lab.row(job)["summary"] in ("ANSWER-KILL-1", "CONTINUED")

        # A reply in flight when the worker dies: in the session once, never twice.
        assert lab.cli("reply", job, "REPLY-KILL-A").stdout.strip() == "started"
        held = llm.wait_for_request(last_user_contains("REPLY-KILL-A"), timeout=30)
        assert without_notes(user_messages(held)) == ["TASK-KILL", "REPLY-KILL-A"]
        wait_until(
            lambda: "REPLY-KILL-A" in user_texts(lab.session(job)), 10, "the reply to reach the session file"
        )
        kill(second)
        wait_until(lambda: lab.show(job, cli=True)["worker"]["pid"] not in (None, second), 30, "a new worker")
        # The reply is in the session but its run was cut short: roost continues the run,
        # and the model gets the reply once, before roost's note.
        assert lab.wait(job) == "done"
        assert lab.row(job)["summary"] == "CONTINUED"
        cont = llm.wait_for_request(
            last_user_contains("[roost] Your previous run") & any_message_contains("REPLY-KILL-A"), timeout=5
        )
        assert without_notes(user_messages(cont)) == ["TASK-KILL", "REPLY-KILL-A"]
        third = worker_pid(lab, job)
        assert third not in (first, second)

        assert lab.cli("reply", job, "REPLY-KILL-B").stdout.strip() == "started"
        assert lab.wait(job) == "done"
        last = llm.wait_for_request(last_user_contains("REPLY-KILL-B"), timeout=5)
        assert without_notes(user_messages(last)) == ["TASK-KILL", "REPLY-KILL-A", "REPLY-KILL-B"]
        assert user_texts(lab.session(job)) == ["TASK-KILL", "REPLY-KILL-A", "REPLY-KILL-B"]
        assert lab.row(job)["pending"] == {"replies": 0, "agent": 0}
        # One pi per worker: the killed workers' pi processes are gone.
        pis = [p for p in lab.processes() if is_pi(p)]
        assert len(pis) == 1, [p.cmdline() for p in pis]
    finally:
        hold_task.set()
        hold_reply.set()


def test_roostd_sigkill_workers_survive_and_are_adopted(lab: Lab, llm: FakeLLM) -> None:
    hold = threading.Event()
    llm.add(last_user_contains("TASK-ADOPT"), text("ANSWER-ADOPT-1", hold=hold))
    llm.add(last_user_contains("REPLY-ADOPT"), text("ANSWER-ADOPT-2"))
    try:
        job = lab.run_job("TASK-ADOPT")
        llm.wait_for_request(last_user_contains("TASK-ADOPT"), timeout=60)
        lab.wait_state(job, "running")
        status = lab.daemon_status()
        assert status["running"] is True
        daemon_pid = status["pid"]
        worker = worker_pid(lab, job)
        pis = pi_under(worker)
        assert pis, "the worker has no pi child"

        kill(daemon_pid)
        assert lab.daemon_status()["running"] is False
        assert pid_alive(worker)
        assert all(p.is_running() for p in pis)

        # The next CLI call starts a new roostd, which adopts the running worker.
        row = lab.row(job)
        assert row["state"] == "running"
        new_status = lab.daemon_status()
        assert new_status["running"] and new_status["pid"] != daemon_pid
        wait_until(
            lambda: lab.show(job, cli=True)["worker"]["state"] == "running",
            15,
            "the worker to reconnect to the new roostd",
        )
        assert worker_pid(lab, job) == worker

        hold.set()  # the run in flight finishes under the new roostd
        assert lab.wait(job) == "done"
        assert lab.row(job)["summary"] == "ANSWER-ADOPT-1"

        assert lab.cli("reply", job, "REPLY-ADOPT").stdout.strip() == "started"
        assert lab.wait(job) == "done"
        last = llm.wait_for_request(last_user_contains("REPLY-ADOPT"), timeout=5)
        assert user_messages(last) == ["TASK-ADOPT", "REPLY-ADOPT"]
        assert worker_pid(lab, job) == worker  # never restarted
        assert all(p.is_running() for p in pis)
        assert lab.row(job)["summary"] == "ANSWER-ADOPT-2"
    finally:
        hold.set()


def test_crash_loop_gives_up_with_the_reason(
    tmp_path: Path, make_lab: Callable[..., Lab], llm: FakeLLM
) -> None:
    broken_pi = tmp_path / "broken-pi"
    broken_pi.write_text("#!/bin/sh\necho 'broken pi: cannot start' >&2\nexit 1\n")
    broken_pi.chmod(0o755)
    lab = make_lab(llm=llm, env={"ROOST_PI": str(broken_pi)}, restartBackoffSeconds=0.05, restartMaxCrashes=3)
    project = lab.work / "project"
    project.mkdir()
    job = lab.run_job("--cwd", str(project), "TASK-CRASH")

    assert lab.wait(job) == "failed"
    row = lab.row(job)
    assert row["state"] == "failed"
    detail = lab.show(job, cli=True)
    assert "crashed 3 times" in detail["error"], detail
    assert "gave up" in detail["error"]
    assert detail["worker"]["pid"] is None
    assert "crashed 3 times" in lab.cli("show", job).stdout
    assert (lab.job_dir(job) / "worker.log").read_text().count("broken pi: cannot start") == 3
    assert llm.requests == []
    # The task was never taken: it is still pending, and a reply queues behind it.
    assert row["pending"]["replies"] == 1
    assert lab.cli("reply", job, "hello?").stdout.strip() == "queued"

    # A job whose directory is gone fails at once, with that reason (no restarts).
    work = Path(row["cwd"])
    assert work == project
    project.rmdir()
    assert lab.cli("start", job).returncode == 0
    assert lab.wait(job) == "failed"
    detail = lab.show(job, cli=True)
    assert "does not exist" in detail["error"], detail
    assert str(work) in detail["error"]
    assert detail["worker"]["crashes"] == 0


def test_teardown_leaves_no_process(llm: FakeLLM) -> None:
    lab = Lab(llm=llm)
    try:
        job = lab.run_job("--shell", "--", "sleep", "60")
        wait_until(lambda: lab.show(job, cli=True)["worker"]["pid"], 10, "a worker pid")
    finally:
        lab.close()
    assert lab.processes() == []
