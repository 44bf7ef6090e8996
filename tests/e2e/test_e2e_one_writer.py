"""End to end: one writer per session, even when a person follows pi's own resume hint.

pi 1.x prints "To resume this session: pi --session-dir DIR --session ID" when its TUI
quits (after `roost attach` too). A pi started that way without roost's extension takes no
writer lock; roostd (when an item would wake the job) and the worker (before it starts pi)
find it by its command line and refuse: the job fails with who holds the session, the item
waits in the mailbox, and `roost start` delivers it once that pi has quit. No second pi
ever writes the session: its file stays one branch.

The real roost CLI, roostd, workers and pi against the FakeLLM in this process.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kit.attach import Tmux, assert_single_branch, attach_wrapper
from kit.lab import EXTENSION, Lab
from kit.matchers import last_user_has, task
from kit.testpi import PiRpc, require_pi
from kit.wait import is_pi, pid_alive, wait_until

from roost.fakellm import FakeLLM, text

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("real_pi")]

T = 90.0  # seconds: pi start-up is slow on a loaded 2-core machine


def worker_pid(lab: Lab, job: str) -> int | None:
    pid = (lab.show(job, cli=True).get("worker") or {}).get("pid")
    return int(pid) if pid and pid_alive(int(pid)) else None


def pis_of(lab: Lab) -> set[int]:
    """The lab's live pi processes (a pi's command line reads `pi`: it retitles itself)."""
    return {p.pid for p in lab.processes() if is_pi(p)}


def open_fds_to(pid: int, path: str) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                out.append(fd)
        except OSError:
            continue
    return out


HELD = re.compile(
    r"held by pid (\d+) \(pi, not under roost\)(?: or by pid ([\d, ]+))?: "
    r"quit it or run roost attach (\w+)"
)


def names_holder(text: str, pid: int, job: str) -> bool:
    """`text` says the session is held, by pid `pid` among others: other helpers' pis on a
    shared test machine may count too (roost.locks.writers, part 2 names every candidate)."""
    found = HELD.search(text or "")
    if found is None or found.group(3) != job:
        return False
    pids = [int(found.group(1))] + [int(p) for p in (found.group(2) or "").split(", ") if p]
    return pid in pids


def start_when_free(lab: Lab, job: str) -> None:
    """`roost start`, again while unrelated pis (other tests' on this machine) are counted."""

    def started() -> bool:
        done = lab.cli("start", job, check=False)
        assert done.returncode == 0 or "held by pid" in done.stderr, done
        return done.returncode == 0

    wait_until(started, 60, "roost start to be accepted")


def test_reply_while_a_pi_from_the_resume_hint_holds_the_session(
    make_lab: Callable[..., Lab],
    llm: FakeLLM,
) -> None:
    """The issue's case: the job is idle without a worker (reaped, as after `roost attach`),
    a pi without roost's extension runs `pi --session-dir DIR --session ID` (pi's hint),
    then `roost reply`: `queued`, the reason on stderr, the job `failed` with it; no second
    pi; after that pi quits, `roost start` delivers the reply."""
    lab = make_lab(llm=llm, reapAfterSeconds=1)
    hold = threading.Event()
    llm.add(task("MK-OW1") & last_user_has("FOREIGN-OW1"), text("FOREIGN-ANSWER-OW1", hold=hold))
    llm.add(task("MK-OW1") & last_user_has("PING-OW1"), text("WORKER-ANSWER-OW1 pong"))
    llm.add(task("MK-OW1"), text("FIRST-ANSWER-OW1 hello"))
    try:
        job = lab.run_job("MK-OW1 say hello")
        first_worker = wait_until(lambda: worker_pid(lab, job), T, "the job's worker")
        lab.wait_state(job, "reaped", timeout=T)
        # Gone for good, with its note of the session written (at its exit).
        wait_until(lambda: not pid_alive(first_worker), 30, "the reaped worker to exit")
        session = lab.record(job)["session"]
        sid = json.loads(Path(session).read_text().splitlines()[0])["id"]

        # pi's own hint, followed with a pi that has no roost extension.
        foreign = lab.spawn_pi(session=Path(sid), args=["--session-dir", str(Path(session).parent)])
        assert foreign.get_state(timeout=T)["sessionFile"] == session

        # A fact the rule rests on: pi keeps no descriptor of the session file open, idle or
        # in the middle of a run (it appends each entry with open-write-close).
        assert open_fds_to(foreign.proc.pid, session) == []
        since = foreign.mark()
        assert foreign.prompt("FOREIGN-OW1 are you there")["success"]
        lab.llm.wait_for_request(task("MK-OW1") & last_user_has("FOREIGN-OW1"), timeout=T)
        assert open_fds_to(foreign.proc.pid, session) == []
        hold.set()
        foreign.wait_event("agent_end", timeout=T, since=since)
        assert open_fds_to(foreign.proc.pid, session) == []

        reply = lab.cli("reply", job, "PING-OW1 are you back")
        assert reply.stdout.strip() == "queued", reply
        assert names_holder(reply.stderr, foreign.proc.pid, job), reply.stderr
        assert f"roost start {job}" in reply.stderr, reply.stderr
        assert lab.row(job)["state"] == "failed"
        shown = lab.show(job)
        assert names_holder(shown.get("error"), foreign.proc.pid, job), shown
        # (`roost show` in a pipe cuts long lines today: issue 19 section 3)
        assert f"held by pid {foreign.proc.pid}" in lab.cli("show", job).stdout
        assert lab.cli("wait", job, "--timeout", "10", check=False).returncode in (0, 1)
        assert lab.wait(job, 10) == "failed"
        # The item waits; no worker and no second pi was started.
        assert [i["text"] for i in lab.mailbox_files(job)] == ["PING-OW1 are you back"]
        assert worker_pid(lab, job) is None
        assert pis_of(lab) == {foreign.proc.pid}
        assert not [r for r in llm.requests if "PING-OW1" in json.dumps(r)]

        # While that pi runs, `roost start` is refused the same way and changes nothing.
        start = lab.cli("start", job, check=False)
        assert start.returncode != 0, start  # (1 for a refusal once section 6 lands)
        assert names_holder(start.stderr, foreign.proc.pid, job), start.stderr
        assert lab.row(job)["state"] == "failed"
        # And `roost attach` does not open it in a second pi.
        attach = lab.cli("attach", job, check=False, timeout=30)
        assert attach.returncode != 0 and "quit it first" in attach.stderr, attach
        assert f"pid {foreign.proc.pid}" in attach.stderr, attach

        # It quits: `roost start` delivers the kept reply.
        assert foreign.close() == 0
        start_when_free(lab, job)
        lab.llm.wait_for_request(task("MK-OW1") & last_user_has("PING-OW1"), timeout=T)
        assert lab.wait(job, T) in ("done", "reaped")
        assert lab.mailbox_files(job) == []
        assert lab.row(job)["summary"] == "WORKER-ANSWER-OW1 pong"
    finally:
        hold.set()
    entries = assert_single_branch(Path(session))
    said = [str(e) for e in entries]
    order = [
        next(i for i, s in enumerate(said) if key in s)
        for key in ("FIRST-ANSWER-OW1", "FOREIGN-ANSWER-OW1", "WORKER-ANSWER-OW1")
    ]
    assert order == sorted(order)


def test_restarted_worker_refuses_a_pi_that_names_the_session(
    make_lab: Callable[..., Lab],
    llm: FakeLLM,
) -> None:
    """The worker's own check (roostd's restart after a crash does not pass through an
    item): a pi without roost's extension runs `pi --session FILE`; the job's worker dies;
    the restarted worker waits its grace, then fails the job with who holds the session
    (once: no crash loop), starting no pi. After that pi quits, `roost start` runs on."""
    lab = make_lab(llm=llm)
    llm.add(task("MK-OW2") & last_user_has("PING-OW2"), text("WORKER-ANSWER-OW2 pong"))
    llm.add(task("MK-OW2"), text("FIRST-ANSWER-OW2 hello"))
    job = lab.run_job("MK-OW2 say hello")
    assert lab.wait(job, T) == "done"
    session = lab.record(job)["session"]
    worker = worker_pid(lab, job)
    assert worker is not None

    foreign: PiRpc = lab.spawn_pi(session=Path(session))
    assert foreign.get_state(timeout=T)["sessionFile"] == session
    os.kill(worker, 9)  # its pi follows it (PR_SET_PDEATHSIG); roostd restarts the worker

    lab.wait_state(job, "failed", timeout=T)
    shown = lab.show(job)
    assert names_holder(shown.get("error"), foreign.proc.pid, job), shown
    assert pis_of(lab) == {foreign.proc.pid}
    assert worker_pid(lab, job) is None
    assert len(lab.record(job).get("process", {}).get("crashes") or []) <= 1  # refused once, not restarted

    reply = lab.cli("reply", job, "PING-OW2 are you back")
    assert reply.stdout.strip() == "queued"
    assert names_holder(reply.stderr, foreign.proc.pid, job), reply.stderr
    assert foreign.close() == 0
    start_when_free(lab, job)
    lab.llm.wait_for_request(task("MK-OW2") & last_user_has("PING-OW2"), timeout=T)
    assert lab.wait(job, T) == "done"
    assert lab.mailbox_files(job) == []
    assert_single_branch(Path(session))


@pytest.fixture
def tmux(request: pytest.FixtureRequest) -> Iterator[Tmux]:
    session = Tmux(f"roost-{request.node.name[:20]}")
    try:
        yield session
    finally:
        print("--- tmux screen ---\n" + session.capture()[-4000:])
        session.close()


def test_quitting_roost_attach_names_roost_attach_not_pi(
    make_lab: Callable[..., Lab],
    llm: FakeLLM,
    tmux: Tmux,
) -> None:
    """The hint at the source: the TUI of `roost attach` quits with "To resume this
    session: roost attach ID" and not pi's own `pi --session-dir … --session …` (pi 1.x
    prints that; 0.73 prints none), so a person is not led to a second writer."""
    lab = make_lab(llm=llm)
    llm.add(task("MK-OW3"), text("FIRST-ANSWER-OW3 hello"))
    job = lab.run_job("MK-OW3 say hello")
    assert lab.wait(job, T) == "done"

    tmux.start(str(attach_wrapper(lab.root / "attach.sh", lab.env, job, lab.work)))
    wait_until(
        lambda: "FIRST-ANSWER-OW3" in tmux.capture(),
        T,
        lambda: f"the earlier answer in the TUI; screen:\n{tmux.capture()}",
    )
    tmux.type_text("/quit")
    wait_until(lambda: "/quit" in tmux.capture(), 10, "the TUI's editor to show /quit")
    tmux.send_keys("Enter")
    wait_until(
        lambda: tmux.exit_status() is not None, 30, lambda: f"roost attach to end; screen:\n{tmux.capture()}"
    )
    screen = tmux.capture()
    assert f"To resume this session: roost attach {job}" in screen, screen
    assert "--session" not in screen, screen
    assert f"{job} is back in the background" in screen, screen


def submit_once_started(tmux: Tmux, text: str) -> None:
    """Enter on the editor's `text`, again while it stays in the editor: pi 1.x answers an
    Enter before its start-up is over with "Startup is still in progress" and puts the
    text back (on a loaded machine the footer shows seconds before pi takes a submit)."""

    def editor() -> str | None:  # between the editor's two rules; None: none drawn
        lines = tmux.capture().splitlines()
        rules = [i for i, line in enumerate(lines) if line.strip() and not line.strip("\u2500 ")]
        return "\n".join(lines[rules[-2] + 1 : rules[-1]]) if len(rules) >= 2 else None

    wait_until(lambda: text in (editor() or text), T, f"the TUI's editor to show {text}")
    tmux.send_keys("Enter")
    pressed = [time.monotonic()]

    def taken() -> bool:
        if text not in (editor() or ""):
            return True  # submitted: the editor is empty again
        if time.monotonic() - pressed[0] > 1.0:
            tmux.send_keys("Enter")
            pressed[0] = time.monotonic()
        return False

    wait_until(taken, T, lambda: f"pi to take the prompt; screen:\n{tmux.capture()}")


def test_roost_bg_in_the_tui_names_roost_attach_not_pi(
    make_lab: Callable[..., Lab],
    llm: FakeLLM,
    tmux: Tmux,
) -> None:
    """The other way in: `/roost-bg` in a person's own TUI pi (roost's extension loaded)
    hands the session to a job and quits with "To resume this session: roost attach ID"."""
    lab = make_lab(llm=llm)
    llm.add(task("MK-OW4"), text("FG-ANSWER-OW4 hello"))
    session = lab.root / "fg" / "fg.jsonl"
    argv = [*require_pi(), "--offline", "--session", str(session), "-e", str(EXTENSION)]
    wrapper = attach_wrapper(lab.root / "fg.sh", lab.env, "unused", lab.work)
    lines = wrapper.read_text().splitlines()[:-1]  # its environment, not its `roost attach`
    wrapper.write_text("\n".join([*lines, "exec " + shlex.join(argv)]) + "\n")
    assert lab.ls() == []  # roostd runs (the extension connects to it; no `roost install` here)
    tmux.start(str(wrapper))
    wait_until(lambda: "fake-model" in tmux.capture(), T, "the TUI's footer to come up")
    tmux.type_text("MK-OW4 say hello")
    submit_once_started(tmux, "MK-OW4 say hello")
    wait_until(
        lambda: "FG-ANSWER-OW4" in tmux.capture(),
        T,
        lambda: f"the answer in the TUI; screen:\n{tmux.capture()}",
    )
    tmux.type_text("/roost-bg")
    wait_until(lambda: "/roost-bg" in tmux.capture(), 10, "the TUI's editor to show /roost-bg")
    tmux.send_keys("Enter")
    wait_until(
        lambda: tmux.exit_status() is not None, 60, lambda: f"the TUI to quit; screen:\n{tmux.capture()}"
    )
    jobs = [r for r in lab.ls() if r["session"] == str(session)]
    assert len(jobs) == 1, lab.ls()
    screen = tmux.capture()
    assert f"To resume this session: roost attach {jobs[0]['id']}" in screen, screen
    assert "--session" not in screen, screen
