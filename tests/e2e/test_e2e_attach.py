"""End to end: moving a session between the background and the foreground.

`roost attach JOB` opens the job's session in the interactive pi (driven here under a
private tmux server; the screen is read with `capture-pane`), messages to the job reach
that pi while it is attached, `/quit` returns the job to the background, and a foreground
pi hands its session to a job with `/roost-bg [task]` (driven over RPC) — with the
reports of its children following the session to the new job.

Throughout, a watcher samples the session's writer lock and the live pi processes on the
session every 20 ms: the lock never passes to a second pi while an earlier holder still
runs, and at the end the session file is one unbroken branch.

The real roost CLI, roostd, workers and pi 0.73.1 against the FakeLLM in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from kit import FIXTURES
from kit.attach import (
    LockWatch,
    PiSessions,
    RawPeer,
    Tmux,
    assert_single_branch,
    attach_wrapper,
)
from kit.lab import Lab
from kit.matchers import after_tool, agent_messages_in, envelopes, fresh, last_user_has, task, user_texts
from kit.testpi import PiRpc, make_agent_dir, read_session
from kit.wait import pi_under, wait_until
from kit.wait import pid_alive as alive

from roost.fakellm import FakeLLM, Matcher, text, tool_call
from roost.fakellm.requests import message_text
from roost.locks import holder_is_alive, read_holder

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("real_pi")]

T = 90.0  # seconds: pi start-up is slow on a loaded 2-core machine


@pytest.fixture
def lab(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    lab = Lab(llm=llm, settings={"agentExternalMessages": True})
    # This process reads (and, as a raw peer, takes) locks in the lab's ROOST_HOME.
    monkeypatch.setenv("ROOST_HOME", str(lab.roost_home))
    try:
        yield lab
    finally:
        print(lab.diagnostics())  # shown when the test failed
        lab.close()


@pytest.fixture
def tmux(request: pytest.FixtureRequest) -> Iterator[Tmux]:
    session = Tmux(f"roost-{request.node.name[:20]}")
    try:
        yield session
    finally:
        print("--- tmux screen ---\n" + session.capture()[-4000:])
        session.close()


def wait_request(lab: Lab, match: Matcher, timeout: float = T, since: int = 0) -> dict:
    try:
        return lab.llm.wait_for_request(match, timeout=timeout, since=since)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{lab.diagnostics()}") from None


def worker_pid(lab: Lab, job: str) -> int | None:
    pid = (lab.show(job, cli=True).get("worker") or {}).get("pid")
    return int(pid) if pid and alive(int(pid)) else None


def the_pi_under(pid: int) -> psutil.Process:
    pis = wait_until(lambda: pi_under(pid), T, f"a pi under pid {pid}")
    assert len(pis) == 1, pis
    return pis[0]


def open_attach(lab: Lab, tmux: Tmux, job: str) -> int:
    """Start `roost attach JOB` in tmux; the pid of the attach CLI (the pane's process)."""
    wrapper = attach_wrapper(lab.root / f"attach-{job}.sh", lab.env, job, lab.work)
    tmux.start(str(wrapper))
    cli = tmux.pane_pid()
    wait_until(
        lambda: "attach" in " ".join(psutil.Process(cli).cmdline()), 10, "the wrapper to exec roost attach"
    )
    return cli


def quit_tui(tmux: Tmux, lab: Lab, job: str) -> str:
    """`/quit` in the TUI; waits for `roost attach` to end; the screen."""
    tmux.type_text("/quit")
    wait_until(lambda: "/quit" in tmux.capture(), 10, "the TUI's editor to show /quit")
    tmux.send_keys("Enter")
    wait_until(
        lambda: tmux.exit_status() is not None, 30, lambda: f"roost attach to end; screen:\n{tmux.capture()}"
    )
    screen = tmux.capture()
    assert f"{job} is back in the background" in screen, screen
    assert tmux.exit_status() == 0, screen
    return screen


def holder_pid(lab: Lab, session: str) -> int | None:
    """The pid of the live process holding the session's writer lock, or None."""
    holder = read_holder(session)
    return holder.pid if holder is not None and holder_is_alive(holder) else None


def answers(entries: list[dict]) -> list[str]:
    out = []
    for entry in entries:
        message = entry.get("message") or {}
        if entry.get("type") == "message" and message.get("role") == "assistant":
            out.append(
                " ".join(str(p.get("text", "")) for p in message.get("content") or [] if isinstance(p, dict))
            )
    return out


# -- attach ----------------------------------------------------------------------------------
def test_attach_idle_job_message_quit_and_restart(lab: Lab, llm: FakeLLM, tmux: Tmux) -> None:
    """Attach to an idle job: the TUI shows its earlier answer and holds its session's lock
    (the job is `attached`); a message to the job reaches the TUI pi; /quit returns the job
    to the background, and a later message starts it again in a worker."""
    llm.add(task("MK-AT1") & last_user_has("PING-ATTACHED"), text("TUI-ANSWER-AT1 got it"))
    llm.add(task("MK-AT1") & last_user_has("PING-LATER"), text("WORKER-ANSWER-AT1 again"))
    llm.add(fresh("MK-AT1"), text("EARLIER-ANSWER-AT1 the sky is blue"))

    job = lab.run_job("--name", "att-one", "MK-AT1 tell me about the sky")
    assert lab.wait(job, T) == "done"
    session = lab.record(job)["session"]
    old_worker = worker_pid(lab, job)
    assert old_worker is not None
    old_pi = the_pi_under(old_worker)
    assert holder_pid(lab, session) == old_pi.pid

    watch = LockWatch(session, PiSessions(lab.roost_home)).start()
    try:
        cli = open_attach(lab, tmux, job)
        # 1. The TUI shows the session's earlier content; the job is attached; the TUI pi
        #    (a child of roost attach) holds the session, the old worker and its pi are gone.
        wait_until(
            lambda: "EARLIER-ANSWER-AT1" in tmux.capture(),
            T,
            lambda: f"the earlier answer in the TUI; screen:\n{tmux.capture()}",
        )
        tui = the_pi_under(cli)
        assert tui.parent().pid == cli
        wait_until(
            lambda: lab.record(job).get("status") == "attached",
            30,
            lambda: f"status attached ({lab.record(job)})",
        )
        row = lab.row(job)
        assert row["status"] == "attached" and row["state"] == "done", row
        wait_until(
            lambda: holder_pid(lab, session) == tui.pid,
            30,
            lambda: f"the TUI pi {tui.pid} to hold the lock (holder {read_holder(session)})",
        )
        assert not alive(old_pi.pid) and not alive(old_worker)
        assert worker_pid(lab, job) is None

        # 3. A message sent to the job while attached arrives in the foreground pi.
        peer = RawPeer(lab.roost_home, lab.root / "dummy" / "dummy.jsonl", name="tester")
        try:
            # The TUI pi registers as the session's peer: the job id answers for it.
            wait_until(
                lambda: any(
                    p["id"].startswith("f") and p["id"] != peer.id
                    for p in peer.client.request("peers", timeout=10)["peers"]
                ),
                30,
                "the TUI pi to register as the session's peer",
            )
            since = len(llm.requests)
            sent = peer.send(job, "PING-ATTACHED hello from the test")
            assert sent["status"] == "delivered", sent
            assert sent["relation"] == "external", sent
            request = wait_request(lab, task("MK-AT1") & last_user_has("PING-ATTACHED"), since=since)
            # Only the TUI pi runs the session now: the request is its model call.
            assert holder_pid(lab, session) == tui.pid and alive(tui.pid)
            assert worker_pid(lab, job) is None
            assert watch.sample().pis == {tui.pid}
            found = envelopes(agent_messages_in(request)[-1])
            assert len(found) == 1, request
            assert found[0]["kind"] == "message" and found[0]["relation"] == "external"
            assert found[0]["id"] == peer.id and "PING-ATTACHED" in found[0]["body"]
            wait_until(
                lambda: "✉ message from" in (s := tmux.capture()) and "TUI-ANSWER-AT1" in s,
                30,
                lambda: f"the message and the answer in the TUI:\n{tmux.capture()}",
            )
            # Nothing waits in the job's mailbox: the item went straight to the TUI.
            assert lab.row(job)["pending"] == {"replies": 0, "agent": 0}

            # 4. /quit: back to the background; nobody holds the session.
            quit_tui(tmux, lab, job)
            wait_until(
                lambda: lab.record(job).get("status") != "attached",
                30,
                lambda: f"the job to leave `attached` ({lab.record(job)})",
            )
            assert not alive(tui.pid)
            assert holder_pid(lab, session) is None
            assert watch.sample().pis == set()
            assert lab.row(job)["status"] != "attached"

            # A later message starts the job: its worker's pi handles it.
            since = len(llm.requests)
            sent = peer.send(job, "PING-LATER are you back")
            assert sent["status"] == "started", sent
            wait_request(lab, task("MK-AT1") & last_user_has("PING-LATER"), since=since)
            assert lab.wait(job, T) == "done"
            new_worker = worker_pid(lab, job)
            assert new_worker is not None and new_worker != old_worker
            new_pi = the_pi_under(new_worker)
            holder = read_holder(session)
            assert holder is not None and holder.pid == new_pi.pid and holder.peer == job
        finally:
            peer.close()
    finally:
        watch.stop()
    seen = watch.check()
    print("lock watch:", seen)
    assert seen["holders"] == [old_pi.pid, tui.pid, new_pi.pid], seen
    entries = assert_single_branch(Path(session))
    said = answers(entries)
    order = [
        next(i for i, a in enumerate(said) if key in a)
        for key in ("EARLIER-ANSWER-AT1", "TUI-ANSWER-AT1", "WORKER-ANSWER-AT1")
    ]
    assert order == sorted(order), said
    assert not [t for t in user_texts(entries) if "PING-ATTACHED" in t], "a message became a prompt"


def test_attach_waits_for_a_running_job_to_settle(lab: Lab, llm: FakeLLM, tmux: Tmux) -> None:
    """Attach to a running job: `roost attach` says it waits for the run to settle and
    starts no pi until the run is over; then the TUI opens with the run's answer."""
    hold = threading.Event()
    llm.add(fresh("MK-AT2"), text("SETTLED-ANSWER-AT2 finally").with_(hold=hold))

    job = lab.run_job("--name", "att-two", "MK-AT2 a slow task")
    wait_request(lab, fresh("MK-AT2"))
    lab.wait_state(job, "running")
    session = lab.record(job)["session"]
    worker = worker_pid(lab, job)
    assert worker is not None
    job_pi = the_pi_under(worker)

    watch = LockWatch(session, PiSessions(lab.roost_home)).start()
    try:
        cli = open_attach(lab, tmux, job)
        wait_until(
            lambda: "waiting for the current run" in tmux.capture(),
            30,
            lambda: f"the waiting notice; screen:\n{tmux.capture()}",
        )
        screen = tmux.capture()
        assert f"waiting for the current run of {job}" in screen and "to settle" in screen
        # While the model's answer is held: no TUI pi, the job's pi still holds the session.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            assert not pi_under(cli), "roost attach started pi before the run settled"
            assert holder_pid(lab, session) == job_pi.pid
            time.sleep(0.1)
        assert lab.record(job).get("status") in ("attaching", "thinking", "running"), lab.record(job)
        assert alive(job_pi.pid) and not tmux.pane_dead()

        hold.set()
        wait_until(
            lambda: "SETTLED-ANSWER-AT2" in tmux.capture(),
            T,
            lambda: f"the TUI with the settled answer; screen:\n{tmux.capture()}",
        )
        tui = the_pi_under(cli)
        wait_until(lambda: holder_pid(lab, session) == tui.pid, 30, "the TUI pi to hold the lock")
        assert not alive(job_pi.pid) and not alive(worker)
        row = wait_until(lambda: (r := lab.row(job))["status"] == "attached" and r, 30, "status attached")
        assert row["state"] == "done", row
        quit_tui(tmux, lab, job)
        assert holder_pid(lab, session) is None
        assert lab.row(job)["status"] != "attached"
    finally:
        watch.stop()
    seen = watch.check()
    print("lock watch:", seen)
    assert seen["holders"] == [job_pi.pid, tui.pid], seen
    entries = assert_single_branch(Path(session))
    assert any("SETTLED-ANSWER-AT2" in a for a in answers(entries))


def test_attach_given_up_while_waiting_strands_nothing(lab: Lab, llm: FakeLLM, tmux: Tmux) -> None:
    """Ctrl+C while `roost attach` waits for the run: the job stays in the background, and
    a reply queued meanwhile is still delivered once the run is over."""
    hold = threading.Event()
    llm.add(task("MK-AT3") & last_user_has("REPLY-DURING-ATTACH"), text("REPLY-HANDLED-AT3"))
    llm.add(fresh("MK-AT3"), text("FIRST-ANSWER-AT3").with_(hold=hold))

    job = lab.run_job("--name", "att-three", "MK-AT3 a slow task")
    wait_request(lab, fresh("MK-AT3"))
    lab.wait_state(job, "running")
    cli = open_attach(lab, tmux, job)
    wait_until(
        lambda: "waiting for the current run" in tmux.capture(),
        30,
        lambda: f"the waiting notice; screen:\n{tmux.capture()}",
    )
    wait_until(lambda: lab.record(job).get("attach"), 30, "the job to be attaching")
    assert lab.cli("reply", job, "REPLY-DURING-ATTACH please").stdout.strip() == "queued"
    tmux.send_keys("C-c")
    wait_until(
        lambda: tmux.exit_status() is not None,
        30,
        lambda: f"roost attach to give up; screen:\n{tmux.capture()}",
    )
    assert not pi_under(cli)
    wait_until(
        lambda: lab.record(job).get("attach") == "",
        30,
        lambda: f"the job back in the background ({lab.record(job)})",
    )

    hold.set()
    wait_request(lab, task("MK-AT3") & last_user_has("REPLY-DURING-ATTACH"))
    assert lab.wait(job, T) == "done"
    assert lab.row(job)["pending"] == {"replies": 0, "agent": 0}
    assert_single_branch(Path(lab.record(job)["session"]))


def test_attach_to_a_job_waiting_on_a_dialog_opens_once_a_reply_answers_it(
    lab: Lab, llm: FakeLLM, tmux: Tmux
) -> None:
    """A job whose run waits on a dialog: `roost attach` waits; `roost reply` still answers
    the dialog (the run can only end that way), and then the TUI opens."""
    (lab.agent_dir / "extensions").mkdir()
    shutil.copy(FIXTURES / "ask.ts", lab.agent_dir / "extensions" / "ask.ts")
    llm.add(after_tool("MK-AT4", "ask_colour"), text("COLOUR-ANSWER-AT4 done"))
    llm.add(fresh("MK-AT4"), tool_call("ask_colour", {}))

    job = lab.run_job("--name", "att-four", "MK-AT4 pick a colour")
    lab.wait_state(job, "needs_input")
    cli = open_attach(lab, tmux, job)
    wait_until(
        lambda: "waiting for the current run" in tmux.capture(),
        30,
        lambda: f"the waiting notice; screen:\n{tmux.capture()}",
    )
    wait_until(lambda: lab.record(job).get("attach"), 30, "the job to be attaching")
    assert lab.cli("reply", job, "green").stdout.strip() in ("queued", "delivered")
    wait_until(
        lambda: "COLOUR-ANSWER-AT4" in tmux.capture(),
        T,
        lambda: f"the TUI with the answer; screen:\n{tmux.capture()}",
    )
    tui = the_pi_under(cli)
    wait_until(
        lambda: holder_pid(lab, lab.record(job)["session"]) == tui.pid, 30, "the TUI pi to hold the lock"
    )
    answered = llm.requests_matching(after_tool("MK-AT4", "ask_colour"))
    assert "picked: green" in json.dumps(answered[0]["messages"][-1])
    quit_tui(tmux, lab, job)
    assert lab.row(job)["pending"] == {"replies": 0, "agent": 0}


# -- hand-off --------------------------------------------------------------------------------
def start_foreground(lab: Lab, session: Path) -> PiRpc:
    """`pi --mode rpc --session FILE -e roost.ts` outside roost (roostd already up: the
    extension connects to it but does not start it)."""
    lab.cli("daemon", "start")
    fg = lab.foreground(session)
    fg.get_state(timeout=T)
    return fg


def assert_exits_by_itself(fg: PiRpc) -> None:
    """The foreground pi ends with no further command and stdin still open (RPC mode's
    graceful shutdown on SIGTERM exits 143), after telling its client where it went."""
    code = fg.proc.wait(timeout=30)
    assert code in (0, 143), (code, fg.stderr_text())
    notes = [e for e in fg.log if e.get("type") == "extension_ui_request" and e.get("method") == "notify"]
    assert any("moved to the background as roost job" in str(e.get("message")) for e in notes), notes


def job_of_session(lab: Lab, session: Path) -> dict:
    rows = [r for r in lab.ls() if r["session"] == str(session)]
    assert len(rows) == 1, rows
    return rows[0]


def test_roost_bg_hands_off_and_the_childs_report_follows(lab: Lab, llm: FakeLLM) -> None:
    """A foreground pi with a running child runs `/roost-bg`: it exits by itself, a job now
    owns its session, and the child's report reaches that job (relation child)."""
    child_hold = threading.Event()
    llm.add(fresh("MK-HP"), tool_call("roost_spawn", {"task": "MK-HC child task", "name": "hc-kid"}))
    llm.add(after_tool("MK-HP", "roost_spawn"), text("PARENT-SPAWNED waiting for the kid"))
    llm.add(task("MK-HP") & last_user_has('kind="report"'), text("PARENT-GOT-REPORT thanks"))
    llm.add(fresh("MK-HC"), text("CHILD-RESULT-HC 42").with_(hold=child_hold))

    session = lab.root / "fg" / "fg.jsonl"
    fg = start_foreground(lab, session)
    watch = LockWatch(str(session), PiSessions(lab.roost_home, {os.getpid(): str(session)})).start()
    try:
        fg.run_prompt("MK-HP parent task: spawn a kid", timeout=T)
        wait_request(lab, fresh("MK-HC"))  # the child runs; its answer is held
        kid = wait_until(
            lambda: [r for r in lab.ls() if r["name"] == "hc-kid" and r["state"] == "running"],
            30,
            "the kid to run",
        )[0]
        assert kid["parentSession"] == str(session), kid
        assert holder_pid(lab, str(session)) == fg.proc.pid

        # /roost-bg: an extension command, sent as a prompt; pi then exits by itself.
        response = fg.send({"type": "prompt", "message": "/roost-bg"}, timeout=30)
        assert response.get("success"), response
        assert_exits_by_itself(fg)
        row = job_of_session(lab, session)
        bg = row["id"]
        assert bg != kid["id"] and row["kind"] == "pi"
        assert lab.record(kid["id"])["links"]["parentSession"] == str(session)
        wait_until(
            lambda: lab.record(bg).get("attach") == "" and lab.record(bg).get("status") != "handing off",
            30,
            lambda: f"the job to own the session ({lab.record(bg)})",
        )
        assert holder_pid(lab, str(session)) is None

        # The child settles: its report goes to the job that now owns the session.
        since = len(llm.requests)
        child_hold.set()
        request = wait_request(lab, task("MK-HP") & last_user_has('kind="report"'), since=since)
        found = [e for m in agent_messages_in(request) for e in envelopes(m)]
        reports = [e for e in found if e.get("kind") == "report"]
        assert len(reports) == 1, found
        assert reports[0]["relation"] == "child" and reports[0]["id"] == kid["id"], reports
        assert "CHILD-RESULT-HC 42" in reports[0]["body"]
        assert lab.wait(bg, T) == "done"
        bg_worker = worker_pid(lab, bg)
        assert bg_worker is not None
        bg_pi = the_pi_under(bg_worker)
        holder = read_holder(session)
        assert holder is not None and holder.pid == bg_pi.pid and holder.peer == bg
        # The job's history is the foreground session's: the parent's first run is in it.
        assert request["messages"][1]["role"] == "user"
        assert "MK-HP parent task" in message_text(request["messages"][1])
    finally:
        watch.stop()
        fg.close()
    seen = watch.check()
    print("lock watch:", seen)
    assert seen["holders"] == [fg.proc.pid, bg_pi.pid], seen
    entries = assert_single_branch(session)
    said = answers(entries)
    assert any("PARENT-SPAWNED" in a for a in said) and "PARENT-GOT-REPORT thanks" in said[-1]


def test_roost_bg_with_a_task_continues_in_the_background(lab: Lab, llm: FakeLLM) -> None:
    """`/roost-bg TASK`: the job that takes the session over goes on with TASK."""
    llm.add(task("MK-HV") & last_user_has("BG-TASK-MARK"), text("BG-TASK-DONE in the bg"))
    llm.add(fresh("MK-HV"), text("FG-FIRST-ANSWER"))

    session = lab.root / "fg2" / "fg.jsonl"
    fg = start_foreground(lab, session)
    watch = LockWatch(str(session), PiSessions(lab.roost_home, {os.getpid(): str(session)})).start()
    try:
        fg.run_prompt("MK-HV first, in the foreground", timeout=T)
        response = fg.send({"type": "prompt", "message": "/roost-bg BG-TASK-MARK carry on"}, timeout=30)
        assert response.get("success"), response
        assert_exits_by_itself(fg)
        bg = job_of_session(lab, session)["id"]
        request = wait_request(lab, task("MK-HV") & last_user_has("BG-TASK-MARK"))
        assert "MK-HV first" in message_text(request["messages"][1])
        assert lab.wait(bg, T) == "done"
        bg_pi = the_pi_under(worker_pid(lab, bg) or 0)
    finally:
        watch.stop()
        fg.close()
    seen = watch.check()
    print("lock watch:", seen)
    assert seen["holders"] == [fg.proc.pid, bg_pi.pid], seen
    entries = assert_single_branch(session)
    said = answers(entries)
    assert said[0] == "FG-FIRST-ANSWER" and said[-1] == "BG-TASK-DONE in the bg", said
    assert read_session(session)[0]["type"] == "session"


def test_roost_bg_job_counts_the_sessions_usage_from_its_start(lab: Lab, llm: FakeLLM) -> None:
    """A job that takes a session over with `/roost-bg` shows what the session cost since its
    start (the foreground pi's requests too), at once and after it runs in the background."""
    prices = {"input": 10.0, "output": 40.0, "cacheRead": 1.0, "cacheWrite": 12.5}
    cost = (6000 * 10.0 + 2000 * 40.0 + 4000 * 1.0) / 1e6  # one request of `spent`, below
    spent = (10000, 2000, 4000)  # prompt (of which cached), completion
    make_agent_dir(lab.agent_dir, llm.base_url, cost=prices)
    llm.add(task("MK-HU") & last_user_has("BG-USAGE-MARK"), text("BG-USAGE-DONE", usage=spent))
    llm.add(fresh("MK-HU"), text("FG-USAGE-ANSWER", usage=spent))

    session = lab.root / "fg3" / "fg.jsonl"
    fg = start_foreground(lab, session)
    try:
        fg.run_prompt("MK-HU first, in the foreground", timeout=T)
        response = fg.send({"type": "prompt", "message": "/roost-bg"}, timeout=30)
        assert response.get("success"), response
        assert_exits_by_itself(fg)
    finally:
        fg.close()
    bg = job_of_session(lab, session)["id"]
    wait_until(
        lambda: lab.record(bg).get("attach") == "",
        30,
        lambda: f"the job to own the session ({lab.record(bg)})",
    )
    # No worker runs yet (nothing to do): the figures are the foreground's request.
    usage = lab.show(bg)["usage"]
    assert usage["requests"] == 1 and usage["cost"] == pytest.approx(cost), usage
    assert (usage["input"], usage["output"], usage["cacheRead"]) == (6000, 2000, 4000), usage
    shown = lab.cli("show", bg).stdout
    assert "no prices" not in shown and f"${cost:.2f}" in shown, shown

    # A run in the background adds to them; nothing is counted twice.
    lab.reply(bg, "BG-USAGE-MARK go on")
    wait_request(lab, task("MK-HU") & last_user_has("BG-USAGE-MARK"))
    assert lab.wait(bg, T) == "done"
    usage = wait_until(
        lambda: (u := lab.show(bg)["usage"])["requests"] == 2 and u,
        30,
        lambda: f"two requests counted ({lab.show(bg)['usage']})",
    )
    assert usage["cost"] == pytest.approx(2 * cost) and usage["output"] == 4000, usage


def test_attach_a_handed_off_job_and_back(lab: Lab, llm: FakeLLM, tmux: Tmux) -> None:
    """The whole way for a session that lives outside ROOST_HOME (where the foreground pi
    kept it): `/roost-bg` gives it to a job, `roost attach` opens it in the TUI (the CLI
    trusts it as the session recorded at the hand-off), a message reaches the TUI, a reply
    sent meanwhile is queued, and after /quit a new worker delivers it. The lock passes
    fg pi → job pi → TUI pi → job pi, never to a second live writer."""
    llm.add(task("MK-HA") & last_user_has("BG-TASK-HA"), text("BG-ANSWER-HA in the bg"))
    llm.add(task("MK-HA") & last_user_has("PING-HA"), text("TUI-ANSWER-HA got it"))
    llm.add(task("MK-HA") & last_user_has("QUEUED-REPLY-HA"), text("WORKER-ANSWER-HA later"))
    llm.add(fresh("MK-HA"), text("FG-ANSWER-HA first"))

    session = lab.root / "fg" / "fg.jsonl"  # outside ROOST_HOME, as pi keeps its sessions
    assert not str(session).startswith(str(lab.roost_home))
    fg = start_foreground(lab, session)
    watch = LockWatch(str(session), PiSessions(lab.roost_home, {os.getpid(): str(session)})).start()
    try:
        fg.run_prompt("MK-HA first, in the foreground", timeout=T)
        response = fg.send({"type": "prompt", "message": "/roost-bg BG-TASK-HA carry on"}, timeout=30)
        assert response.get("success"), response
        assert_exits_by_itself(fg)
        job = job_of_session(lab, session)["id"]
        wait_request(lab, task("MK-HA") & last_user_has("BG-TASK-HA"))
        assert lab.wait(job, T) == "done"
        bg_worker = worker_pid(lab, job)
        assert bg_worker is not None
        bg_pi = the_pi_under(bg_worker)
        assert holder_pid(lab, str(session)) == bg_pi.pid
        logs = lab.cli("logs", job).stdout  # read from the same trusted path
        assert "FG-ANSWER-HA" in logs and "BG-ANSWER-HA" in logs, logs

        # roost attach: the TUI opens the handed-off session (no refusal, no exit).
        cli = open_attach(lab, tmux, job)
        wait_until(
            lambda: "BG-ANSWER-HA" in (s := tmux.capture()) or tmux.exit_status() is not None and s,
            T,
            lambda: f"the session's answers in the TUI; screen:\n{tmux.capture()}",
        )
        screen = tmux.capture()
        assert tmux.exit_status() is None and "refusing" not in screen, screen
        assert "FG-ANSWER-HA" in screen, screen
        tui = the_pi_under(cli)
        wait_until(
            lambda: holder_pid(lab, str(session)) == tui.pid,
            30,
            lambda: f"the TUI pi {tui.pid} to hold the lock (holder {read_holder(session)})",
        )
        assert not alive(bg_pi.pid) and not alive(bg_worker)
        wait_until(lambda: lab.row(job)["status"] == "attached", 30, "status attached")

        # A message to the job while attached reaches the TUI pi at once.
        peer = RawPeer(lab.roost_home, lab.root / "dummy" / "dummy.jsonl", name="tester")
        try:
            wait_until(
                lambda: any(
                    p["id"].startswith("f") and p["id"] != peer.id
                    for p in peer.client.request("peers", timeout=10)["peers"]
                ),
                30,
                "the TUI pi to register as the session's peer",
            )
            since = len(llm.requests)
            sent = peer.send(job, "PING-HA hello from the test")
            assert sent["status"] == "delivered", sent
            wait_request(lab, task("MK-HA") & last_user_has("PING-HA"), since=since)
            wait_until(
                lambda: "TUI-ANSWER-HA" in tmux.capture(),
                30,
                lambda: f"the answer in the TUI:\n{tmux.capture()}",
            )
            assert worker_pid(lab, job) is None and holder_pid(lab, str(session)) == tui.pid
        finally:
            peer.close()

        # A reply while attached waits in the mailbox; the TUI is not prompted with it.
        assert lab.cli("reply", job, "QUEUED-REPLY-HA after you quit").stdout.strip() == "queued"
        assert lab.row(job)["pending"]["replies"] == 1
        assert not llm.requests_matching(task("MK-HA") & last_user_has("QUEUED-REPLY-HA"))

        # /quit: back to the background, and a new worker delivers the queued reply.
        quit_tui(tmux, lab, job)
        assert not alive(tui.pid)
        wait_request(lab, task("MK-HA") & last_user_has("QUEUED-REPLY-HA"))
        assert lab.wait(job, T) == "done"
        assert lab.row(job)["pending"] == {"replies": 0, "agent": 0}
        new_worker = worker_pid(lab, job)
        assert new_worker is not None and new_worker != bg_worker
        new_pi = the_pi_under(new_worker)
        holder = read_holder(session)
        assert holder is not None and holder.pid == new_pi.pid and holder.peer == job
    finally:
        watch.stop()
        fg.close()
    seen = watch.check()
    print("lock watch:", seen)
    assert seen["holders"] == [fg.proc.pid, bg_pi.pid, tui.pid, new_pi.pid], seen
    entries = assert_single_branch(session)
    said = answers(entries)
    order = [
        next(i for i, a in enumerate(said) if key in a)
        for key in ("FG-ANSWER-HA", "BG-ANSWER-HA", "TUI-ANSWER-HA", "WORKER-ANSWER-HA")
    ]
    assert order == sorted(order), said
    assert len([a for a in said if "WORKER-ANSWER-HA" in a]) == 1, said
