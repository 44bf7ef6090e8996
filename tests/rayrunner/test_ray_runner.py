"""The Ray runner end to end: the real pi and the scripted model, roostd, and a Ray head on
127.0.0.1 (kit.rayhead) started once for the file and stopped by its own temp dir.

Run by scripts/test-ray (an interpreter with roost[ray], ROOST_RAY_TESTS set: tests/conftest.py
collects tests/rayrunner only then; without Ray this file fails to import, it is never skipped).
Each test bounds its waits; the whole file is bounded by pytest-timeout per test. The model
runs in this process: the tests see every request the job's pi made from the Ray job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import ray  # noqa: F401  (roost[ray]: scripts/test-ray's interpreter has it; a failure without it)
from kit.attach import Tmux, attach_wrapper
from kit.certs import make_cert
from kit.lab import Lab
from kit.matchers import after_tool, fresh, new_user_has, task, user_texts
from kit.pilot import until
from kit.rayhead import RayHead, free_port
from kit.wait import pid_alive, wait_until
from kit.webserver import WebServer
from textual.widgets import DataTable

from roost.fakellm import FakeLLM, last_user_contains, text, tool_call
from roost.locks import holder_is_alive, read_holder
from roost.view.app import TranscriptScreen, ViewApp

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("real_pi")]


@pytest.fixture(scope="module")
def head() -> Iterator[RayHead]:
    with RayHead(sys.executable, num_cpus=4, resources='{"roost-node": 4}') as started:
        yield started
    assert not started.pids(), "the head's processes outlived its stop"


@pytest.fixture
def ray_lab(make_lab: Callable[..., Lab], llm: FakeLLM, head: RayHead) -> Lab:
    lab = make_lab(llm=llm)
    lab.configure(runner=runner_settings(lab, head))
    return lab


def runner_settings(lab: Lab, head: RayHead, **more: object) -> dict[str, object]:
    node_env = {k: v for k, v in lab.env.items() if k != "ROOST_HOME"}
    node_env["ROOST_REMOTE_DIR"] = str(lab.root)  # the node's mirrors: gone with the lab
    return {
        "kind": "ray",
        "address": head.address,
        "python": sys.executable,
        "numCpus": 0.5,
        "resources": {"roost-node": 1},
        "env": node_env,
        **more,
    }


def attempt(lab: Lab, job: str) -> dict[str, object]:
    return json.loads((lab.job_dir(job) / "remote.json").read_text())


def job_client(head: RayHead) -> object:
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(head.address)


def spawned_id(result_text: str) -> str:
    match = re.match(r'^spawned ([0-9a-f]{8}) "', result_text)
    assert match, result_text
    return match.group(1)


def remote_end_pid(job: str) -> int | None:
    """The remote end of `job` on this machine (the head's one node)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if b"roost.worker.remote" in cmdline and f"ROOST_REMOTE_JOB={job}".encode() in environ:
            return int(entry)
    return None


def mirror_of(job: str) -> Path | None:
    """The mirror of `job`'s live remote end: its worker's ROOST_HOME is the mirror's `home`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[-3:-1] == [b"roost.worker", job.encode()]:
            for item in environ:
                if item.startswith(b"ROOST_HOME="):
                    home = Path(item.split(b"=", 1)[1].decode())
                    if (home.parent / "owner.json").exists():  # not roostd's own home
                        return home.parent
    return None


def test_a_ray_job_runs_takes_a_reply_and_roostd_keeps_its_files(
    ray_lab: Lab, llm: FakeLLM, head: RayHead
) -> None:
    llm.add(last_user_contains("RAY-TASK"), text("RAY-ANSWER-1: fine."))
    llm.add(last_user_contains("RAY-REPLY"), text("RAY-ANSWER-2"))
    job = ray_lab.run_job("RAY-TASK please")

    assert ray_lab.wait(job, timeout=150) == "done"
    ray_lab.reply(job, "RAY-REPLY now")
    wait_until(lambda: "RAY-ANSWER-2" in json.dumps(ray_lab.session(job)), timeout=60)
    assert ray_lab.wait(job, timeout=60) == "done"

    # roostd's own copies: the session (each item once), the mailbox acked, the log.
    assert user_texts(ray_lab.session(job)) == ["RAY-TASK please", "RAY-REPLY now"]
    wait_until(lambda: not ray_lab.mailbox_files(job, "new"), timeout=30)
    assert len(ray_lab.mailbox_files(job, "cur")) == 2
    assert "job running -> done" in (ray_lab.job_dir(job) / "worker.log").read_text()
    # The worker ran as a Ray job with the attempt's submission id, not as roostd's child.
    current = attempt(ray_lab, job)
    assert current["submission"] == f"roost-{job}-1"
    client = job_client(head)
    status = str(client.get_job_status(current["submission"]))  # type: ignore[attr-defined]
    assert status.endswith("RUNNING"), status
    assert ray_lab.show(job, cli=True)["worker"]["pid"] in (None, 0)
    # The secret is in no log: roostd's, the worker's, Ray's of the job.
    secret = str(current["secret"])
    logs = client.get_job_logs(current["submission"])  # type: ignore[attr-defined]
    for where in (logs, ray_lab.diagnostics()):
        assert secret not in where

    ray_lab.cli("stop", job)
    assert ray_lab.wait_state(job, "stopped", timeout=60)["state"] == "stopped"
    wait_until(
        lambda: (
            str(client.get_job_status(current["submission"])).split(".")[-1]  # type: ignore[attr-defined]
            in ("SUCCEEDED", "STOPPED")
        ),
        timeout=60,
    )


def test_a_killed_ray_job_is_restarted_and_its_item_reaches_the_model_once(
    ray_lab: Lab, llm: FakeLLM, head: RayHead
) -> None:
    hold = threading.Event()
    llm.add(last_user_contains("KILL-TASK"), text("KILL-ANSWER-1"))
    llm.add(last_user_contains("KILL-REPLY"), text("KILL-ANSWER-2", hold=hold), times=1)
    llm.add(last_user_contains("KILL-AFTER"), text("KILL-ANSWER-AFTER"))
    job = ray_lab.run_job("KILL-TASK please")
    assert ray_lab.wait(job, timeout=150) == "done"
    before = len(llm.requests)

    ray_lab.reply(job, "KILL-REPLY go")
    wait_until(lambda: len(llm.requests) > before, timeout=60)  # pi took it: its run is held
    pid = remote_end_pid(job)
    assert pid is not None
    mirror = mirror_of(job)
    assert mirror is not None and (mirror / "owner.json").exists()
    os.kill(pid, signal.SIGKILL)  # the Ray job's process, as a lost node would
    hold.set()

    # roostd saw the Ray job end and started the next attempt (a new submission id).
    wait_until(lambda: attempt(ray_lab, job)["attempt"] == 2, timeout=90)
    # The next remote end on the node removed the mirror the killed one could not.
    wait_until(lambda: not mirror.exists(), timeout=90, what=f"the killed end's mirror {mirror} removed")
    assert not pid_alive(pid)  # the Ray job's process was the remote end itself (no shell between)
    wait_until(lambda: ray_lab.row(job)["state"] in ("done", "needs_input"), timeout=120)
    # Exactly once to the model: the reply is in roostd's session once (the next attempt
    # continued the run the kill cut short, or found it answered: never delivered twice).
    assert user_texts(ray_lab.session(job)).count("KILL-REPLY go") == 1
    assert not ray_lab.mailbox_files(job, "new")
    # The new attempt works: the next reply is answered.
    ray_lab.reply(job, "KILL-AFTER now")
    wait_until(lambda: "KILL-ANSWER-AFTER" in json.dumps(ray_lab.session(job)), timeout=90)
    assert user_texts(ray_lab.session(job)).count("KILL-REPLY go") == 1
    assert attempt(ray_lab, job)["attempt"] == 2
    ray_lab.cli("stop", job)
    ray_lab.wait_state(job, "stopped", timeout=60)


def test_a_ray_job_stopped_through_ray_is_restarted(ray_lab: Lab, llm: FakeLLM, head: RayHead) -> None:
    """`ray job stop` (not roost's): roostd sees the Ray job end and starts the next attempt."""
    llm.add(last_user_contains("RAYSTOP-TASK"), text("RAYSTOP-ANSWER-1"))
    llm.add(last_user_contains("RAYSTOP-AFTER"), text("RAYSTOP-ANSWER-2"))
    job = ray_lab.run_job("RAYSTOP-TASK please")
    assert ray_lab.wait(job, timeout=150) == "done"
    client = job_client(head)
    client.stop_job(f"roost-{job}-1")  # type: ignore[attr-defined]

    wait_until(lambda: attempt(ray_lab, job)["attempt"] == 2, timeout=90)
    ray_lab.reply(job, "RAYSTOP-AFTER now")
    wait_until(lambda: "RAYSTOP-ANSWER-2" in json.dumps(ray_lab.session(job)), timeout=90)
    assert user_texts(ray_lab.session(job)) == ["RAYSTOP-TASK please", "RAYSTOP-AFTER now"]
    ray_lab.cli("stop", job)
    ray_lab.wait_state(job, "stopped", timeout=60)


def test_a_ray_job_is_not_restarted_after_a_pi_outside_roost_wrote_its_session(
    make_lab: Callable[..., Lab], llm: FakeLLM, head: RayHead
) -> None:
    """A remote worker's pi cannot see this machine's other writers of the session: roostd
    notes the session as it lets go of it (the attempt's end) and, before each start (a
    restart after a crash included), refuses while a pi outside roost that started since
    has written it (pi's resume hint: no roost extension, no lock, its title "pi"), as a
    local worker refuses before its pi starts. The job fails saying who; once that pi has
    quit, `roost start` runs it, the other pi's entries kept."""
    lab = make_lab(llm=llm)
    lab.configure(runner=runner_settings(lab, head), restartBackoffSeconds=10)
    llm.add(last_user_contains("HELD-TASK"), text("HELD-ANSWER-1"))
    llm.add(last_user_contains("HELD-OUTSIDE"), text("HELD-OUTSIDE-ANSWER"))
    llm.add(last_user_contains("HELD-AFTER"), text("HELD-ANSWER-2"))
    job = lab.run_job("HELD-TASK please")
    assert lab.wait(job, timeout=150) == "done"
    session = Path(str(lab.record(job)["session"]))

    job_client(head).stop_job(f"roost-{job}-1")  # type: ignore[attr-defined]
    wait_until(lambda: attempt(lab, job).get("ended"), timeout=60, what="the attempt's end")
    wait_until(lambda: lab.record(job).get("process", {}).get("crashes"), timeout=60, what="roostd's backoff")
    # The other pi writes during the backoff. Under load its start and answer can take longer
    # than the backoff, so roostd is held still meanwhile: its restart timer (monotonic) falls
    # due while it is stopped and runs once it continues, after the write, as it would have
    # run on a quiet machine.
    daemon = lab.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGSTOP)
    try:
        other = lab.spawn_pi(session=session)
        other.prompt("HELD-OUTSIDE write")
        wait_until(lambda: "HELD-OUTSIDE" in session.read_text(), timeout=60, what="the other pi's write")
    finally:
        os.kill(daemon, signal.SIGCONT)
    lab.wait_state(job, "failed", timeout=90)
    error = str(lab.row(job)["summary"])  # what `roost ls` shows of a failed job
    assert re.search(rf"held by pid {other.proc.pid} \(pi, not under roost\)", error), error
    assert attempt(lab, job)["attempt"] == 1  # no second writer was started

    other.close()
    lab.cli("start", job)
    wait_until(lambda: attempt(lab, job)["attempt"] == 2, timeout=90)
    lab.reply(job, "HELD-AFTER now")
    wait_until(lambda: "HELD-ANSWER-2" in json.dumps(lab.session(job)), timeout=90)
    assert user_texts(lab.session(job)) == ["HELD-TASK please", "HELD-OUTSIDE write", "HELD-AFTER now"]
    lab.cli("stop", job)
    lab.wait_state(job, "stopped", timeout=60)


def test_roostd_killed_while_a_ray_job_runs_the_job_reconnects(ray_lab: Lab, llm: FakeLLM) -> None:
    llm.add(last_user_contains("RECONNECT-TASK"), text("RECONNECT-ANSWER-1"))
    llm.add(last_user_contains("RECONNECT-REPLY"), text("RECONNECT-ANSWER-2"))
    job = ray_lab.run_job("RECONNECT-TASK please")
    assert ray_lab.wait(job, timeout=150) == "done"
    remote = remote_end_pid(job)

    daemon = ray_lab.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not pid_alive(daemon), timeout=30)
    ray_lab.reply(job, "RECONNECT-REPLY now")  # the CLI starts the next roostd
    wait_until(lambda: "RECONNECT-ANSWER-2" in json.dumps(ray_lab.session(job)), timeout=90)
    assert ray_lab.wait(job, timeout=60) == "done"
    assert attempt(ray_lab, job)["attempt"] == 1  # the same Ray job, adopted
    assert remote_end_pid(job) == remote
    ray_lab.cli("stop", job)
    ray_lab.wait_state(job, "stopped", timeout=60)


def test_an_unreachable_cluster_keeps_the_job_queued_with_its_items_until_it_answers(
    make_lab: Callable[..., Lab], llm: FakeLLM, head: RayHead
) -> None:
    lab = make_lab(llm=llm)
    port = free_port()  # nothing listens there yet: the cluster is away
    lab.configure(runner=runner_settings(lab, head, address=f"http://127.0.0.1:{port}"))
    llm.add(last_user_contains("NOWHERE-TASK"), text("NOWHERE-ANSWER"))
    job = lab.run_job("NOWHERE-TASK please")

    row = wait_until(
        lambda: (r := lab.row(job))["status"].startswith("waiting: ray cluster unreachable") and r, timeout=90
    )
    assert row["state"] == "queued"
    assert len(lab.mailbox_files(job, "new")) == 1  # its task waits in its mailbox
    with Forward(port, head.dashboard_port):  # the cluster answers at that address now
        assert lab.wait(job, timeout=150) == "done"
        assert user_texts(lab.session(job)) == ["NOWHERE-TASK please"]
        lab.cli("stop", job)
        lab.wait_state(job, "stopped", timeout=60)


def test_a_job_waiting_for_its_cluster_is_stopped_at_once(
    make_lab: Callable[..., Lab], llm: FakeLLM, head: RayHead
) -> None:
    lab = make_lab(llm=llm)
    lab.configure(runner=runner_settings(lab, head, address=f"http://127.0.0.1:{free_port()}"))
    job = lab.run_job("NEVER-TASK please")
    wait_until(lambda: lab.row(job)["state"] == "queued", timeout=90)
    lab.cli("stop", job)
    assert lab.wait_state(job, "stopped", timeout=30)["state"] == "stopped"
    assert len(lab.mailbox_files(job, "new")) == 1
    assert not attempt(lab, job)["submitted"]


class Forward:
    """A TCP forwarder on 127.0.0.1:`port` to 127.0.0.1:`target` while in its `with`."""

    def __init__(self, port: int, target: int) -> None:
        self.port, self.target = port, target
        self.server = socket.create_server(("127.0.0.1", port))
        self.server.settimeout(0.2)
        self.done = threading.Event()

    def __enter__(self) -> Forward:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.server.close()

    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                near, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            far = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def test_a_local_parent_spawns_a_ray_child_whose_report_reaches_it(ray_lab: Lab, llm: FakeLLM) -> None:
    """roost.json sends jobs to Ray; the parent is pinned here (`--runner local`): its child
    runs on Ray, and its report comes back to the parent as from a local child."""
    llm.add(fresh("MK-RAYPARENT"), tool_call("roost_spawn", {"task": "MK-RAYKID work", "name": "kid"}))
    llm.add(after_tool("MK-RAYPARENT", "roost_spawn"), text("spawned"))
    llm.add(task("MK-RAYPARENT") & last_user_contains("RAYKID-RESULT-7"), text("PARENT-GOT-IT"))
    llm.add(fresh("MK-RAYKID"), text("RAYKID-RESULT-7"))
    parent = ray_lab.run_job("--runner", "local", "MK-RAYPARENT start")
    kid = spawned_id(ray_lab.wait_tool_results("MK-RAYPARENT", "roost_spawn")[0]["text"])

    wait_until(lambda: "PARENT-GOT-IT" in json.dumps(ray_lab.session(parent)), timeout=150)
    assert attempt(ray_lab, kid)["submission"] == f"roost-{kid}-1"  # the kid ran on Ray
    assert not (ray_lab.job_dir(parent) / "remote.json").exists()  # the parent here
    assert ray_lab.show(parent, cli=True)["worker"]["pid"]
    for job in (kid, parent):
        ray_lab.cli("stop", job)


def test_a_local_job_and_a_ray_job_message_each_other_and_the_web_shows_the_ray_job(
    ray_lab: Lab, llm: FakeLLM
) -> None:
    """roost_send both ways between a local parent and its Ray child (each envelope framed as
    between local jobs), and `roost web` lists the Ray job and shows its transcript from
    roostd's copy of its session. (`roost view` has no snapshot mode: not tested here.)"""
    llm.add(fresh("MK-MSGP"), tool_call("roost_spawn", {"task": "MK-MSGK wait", "name": "farkid"}))
    llm.add(after_tool("MK-MSGP", "roost_spawn"), text("spawned"))
    llm.add(
        task("MK-MSGP") & new_user_has("SEND-DOWN"),
        tool_call("roost_send", {"to": "farkid", "message": "DOWN-HELLO from here"}),
    )
    llm.add(after_tool("MK-MSGP", "roost_send"), text("sent down"))
    llm.add(task("MK-MSGP") & new_user_has("UP-HELLO"), text("PARENT-GOT-UP"))
    llm.add(task("MK-MSGP"), text("parent ok"))
    llm.add(fresh("MK-MSGK"), text("KID-READY"))
    llm.add(
        task("MK-MSGK") & new_user_has("DOWN-HELLO"),
        tool_call("roost_send", {"to": "boss", "message": "UP-HELLO from ray"}),
    )
    llm.add(after_tool("MK-MSGK", "roost_send"), text("KID-SENT-UP"))
    parent = ray_lab.run_job("--runner", "local", "--name", "boss", "MK-MSGP start")
    kid = spawned_id(ray_lab.wait_tool_results("MK-MSGP", "roost_spawn")[0]["text"])
    assert ray_lab.wait(kid, timeout=150) == "done"
    assert attempt(ray_lab, kid)["submission"] == f"roost-{kid}-1"  # the kid runs on Ray
    assert not (ray_lab.job_dir(parent) / "remote.json").exists()  # the parent here

    ray_lab.wait(parent, timeout=60)
    ray_lab.reply(parent, "SEND-DOWN now")
    wait_until(lambda: "PARENT-GOT-UP" in json.dumps(ray_lab.session(parent)), timeout=150)
    down = [m for m in ray_lab.messages_seen("MK-MSGK") if "DOWN-HELLO from here" in m["body"]]
    assert len(down) == 1 and down[0]["relation"] == "parent" and down[0]["id"] == parent, down
    up = [m for m in ray_lab.messages_seen("MK-MSGP") if "UP-HELLO from ray" in m["body"]]
    assert len(up) == 1 and up[0]["relation"] == "child" and up[0]["id"] == kid, up
    wait_until(lambda: "KID-SENT-UP" in json.dumps(ray_lab.session(kid)), timeout=60)

    with WebServer(ray_lab) as web:
        http = web.paired()
        listing = http.get(web.url + "/")
        assert listing.status_code == 200 and kid in listing.text and "farkid" in listing.text
        page = http.get(f"{web.url}/job/{kid}")
        assert page.status_code == 200
        for seen in ("MK-MSGK wait", "KID-READY", "DOWN-HELLO from here", "KID-SENT-UP"):
            assert seen in page.text, seen
    for job in (kid, parent):
        ray_lab.cli("stop", job)


def live_holder(session: str) -> tuple[int, str | None] | None:
    holder = read_holder(session)
    return (holder.pid, holder.peer) if holder is not None and holder_is_alive(holder) else None


def test_roostd_holds_a_ray_jobs_session_lock_for_it_until_attach_takes_it(
    ray_lab: Lab, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Ray job's pi locks its node's copy of the session only: roostd holds this
    machine's writer lock for it (peer: the job) while its attempt runs. A foreground pi on
    the session is refused as beside a local job's pi; `roost attach` stops the Ray job, and
    its TUI pi takes the lock roostd let go of."""
    monkeypatch.setenv("ROOST_HOME", str(ray_lab.roost_home))  # read_holder: the lab's locks
    llm.add(fresh("MK-LOCK"), text("LOCK-EARLIER-ANSWER"))
    job = ray_lab.run_job("MK-LOCK please")
    assert ray_lab.wait(job, timeout=150) == "done"
    session = str(ray_lab.record(job)["session"])
    assert live_holder(session) == (ray_lab.daemon_pid(), job)

    fg = ray_lab.foreground(Path(session))
    code = fg.proc.wait(timeout=90)
    assert code != 0 and "refusing to open it twice" in fg.stderr_text(), (code, fg.stderr_text())
    assert live_holder(session) == (ray_lab.daemon_pid(), job)

    tmux = Tmux(f"roost-raylock-{job}")
    try:
        tmux.start(str(attach_wrapper(ray_lab.root / "attach.sh", ray_lab.env, job, ray_lab.work)))
        cli = tmux.pane_pid()
        wait_until(lambda: ray_lab.record(job).get("status") == "attached", timeout=120)
        wait_until(lambda: "LOCK-EARLIER-ANSWER" in tmux.capture(), timeout=90, what="the session in the TUI")
        wait_until(  # the TUI pi, under roost attach, holds it
            lambda: (
                (h := live_holder(session)) is not None
                and h[0] in {p.pid for p in psutil.Process(cli).children(recursive=True)}
            ),
            timeout=60,
            what=lambda: f"the TUI pi to hold the lock (holder {live_holder(session)})",
        )
        assert attempt(ray_lab, job)["ended"]  # the Ray job let go of it first
    finally:
        print("--- tmux screen ---\n" + tmux.capture()[-4000:])
        tmux.close()
    ray_lab.cli("stop", job)


def test_a_definition_sends_its_jobs_to_ray(
    make_lab: Callable[..., Lab], llm: FakeLLM, head: RayHead
) -> None:
    """roost.json keeps jobs here; an agent definition with `runner = "ray"` sends its own."""
    lab = make_lab(llm=llm)
    lab.configure(runner=runner_settings(lab, head, kind="local"))
    agents = lab.agent_dir / "roost" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "far.toml").write_text('description = "runs on the cluster"\nrunner = "ray"\n')
    llm.add(last_user_contains("DEF-TASK"), text("DEF-ANSWER"))
    llm.add(last_user_contains("HERE-TASK"), text("HERE-ANSWER"))
    far = lab.run_job("--agent", "far", "DEF-TASK please")
    here = lab.run_job("HERE-TASK please")

    for job in (far, here):
        assert lab.wait(job, timeout=150) == "done"
    assert attempt(lab, far)["submission"] == f"roost-{far}-1"
    assert not (lab.job_dir(here) / "remote.json").exists()
    for job in (far, here):
        lab.cli("stop", job)


def test_a_ray_job_reaches_roostd_over_tls(
    make_lab: Callable[..., Lab], llm: FakeLLM, head: RayHead, tmp_path: Path
) -> None:
    """runner.tls: the hub speaks TLS 1.3; the remote end trusts only roostd's certificate
    (handed in the submission), and everything still goes through."""
    cert, key = make_cert(tmp_path, "roostd")
    lab = make_lab(llm=llm)
    lab.configure(runner=runner_settings(lab, head, tls={"cert": str(cert), "key": str(key)}))
    llm.add(last_user_contains("TLS-TASK"), text("TLS-ANSWER"))
    job = lab.run_job("TLS-TASK please")

    assert lab.wait(job, timeout=150) == "done"
    assert "(TLS)" in (lab.roost_home / "roostd.log").read_text()
    assert user_texts(lab.session(job)) == ["TLS-TASK please"]
    lab.cli("stop", job)


def test_the_ray_runner_never_imports_ray_for_a_local_job() -> None:
    code = (
        "import sys; from roost.supervise import daemon, placement, rayrunner, remotehub; "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def sh_git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def repo_with_remote(tmp_path: Path) -> tuple[Path, Path]:
    """A repository on main with one commit, and its `origin`: a bare repository."""
    remote, repo = tmp_path / "remote.git", tmp_path / "proj"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    repo.mkdir()
    sh_git(repo, "init", "-q", "-b", "main")
    sh_git(repo, "config", "user.email", "test@example.invalid")
    sh_git(repo, "config", "user.name", "roost test")
    (repo / "README").write_text("base\n")
    sh_git(repo, "add", "-A")
    sh_git(repo, "commit", "-q", "-m", "base")
    sh_git(repo, "remote", "add", "origin", str(remote))
    sh_git(repo, "push", "-q", "origin", "main")
    return repo, remote


COMMIT_WHERE = (
    "pwd > where.txt && git add where.txt && "
    "git -c user.email=node@example.invalid -c user.name=node commit -qm 'from the node' && echo ok"
)


@pytest.mark.parametrize("worktrees", ["shared", "node"])
def test_a_ray_jobs_worktree_commits_reach_diff_and_merge(
    make_lab: Callable[..., Lab], llm: FakeLLM, head: RayHead, tmp_path: Path, worktrees: str
) -> None:
    """`roost run --worktree` on Ray. "shared" (the default): the node has roostd's worktree
    at the same path (here, the same machine). "node": the node clones the job's branch from
    the repository's remote (roostd pushed it there), the job commits in that clone, and its
    branch comes back through the remote into roostd's worktree. Either way `roost diff` and
    `roost merge` work as for a local job."""
    lab = make_lab(llm=llm)
    lab.configure(runner=runner_settings(lab, head, worktrees=worktrees))
    repo, remote = repo_with_remote(tmp_path)
    llm.add(fresh("WT-RAY"), tool_call("bash", {"command": COMMIT_WHERE}))
    llm.add(after_tool("WT-RAY", "bash"), text("WT-RAY-DONE"))
    job = lab.run_job("--worktree", "WT-RAY commit where you are", cwd=repo)

    assert lab.wait(job, timeout=150) == "done"
    assert attempt(lab, job)["submission"] == f"roost-{job}-1"
    local = Path(lab.record(job)["worktree"]["path"])
    branch = str(lab.record(job)["worktree"]["branch"])
    wait_until(lambda: (local / "where.txt").exists(), timeout=60)
    where = (local / "where.txt").read_text().strip()
    if worktrees == "node":
        assert where != str(local) and where.endswith("/worktree")  # it ran in the node's clone
        assert sh_git(remote, "log", "-1", "--format=%s", branch).strip() == "from the node"
    else:
        assert where == str(local)  # it ran in roostd's worktree, through the shared filesystem
    assert sh_git(local, "log", "-1", "--format=%s").strip() == "from the node"
    assert "where.txt" in lab.cli("diff", job).stdout
    lab.cli("merge", job)
    assert sh_git(repo, "show", "main:where.txt").strip() == where
    lab.cli("stop", job)


def test_a_ray_jobs_budgets_stop_its_run_and_its_row_shows_its_usage(ray_lab: Lab, llm: FakeLLM) -> None:
    """Budgets with a Ray job: `--budget-tokens` and `--max-turns` stop its run as a local
    job's (the worker's budget guard runs on the node), and `roost ls` shows its figures
    (from roostd's copy of its session)."""
    usage = (10000, 2000, 4000)  # prompt tokens (4000 of them cached), completion tokens
    llm.add(task("RB-"), lambda request: tool_call("bash", {"command": "echo t"}, usage=usage))
    tokens = ray_lab.run_job("--budget-tokens", "30000", "RB-1 tokens")
    turns = ray_lab.run_job("--max-turns", "2", "RB-2 turns")

    record = ray_lab.wait_state(tokens, "failed", timeout=150)
    assert record["error"] == "token budget exhausted: 36000 of 30000 tokens", record
    record = ray_lab.wait_state(turns, "failed", timeout=150)
    assert record["error"] == "turn limit reached: 2 of 2 model requests", record
    for job in (tokens, turns):
        assert attempt(ray_lab, job)["submission"] == f"roost-{job}-1"  # each ran on Ray
    row = next(r for r in ray_lab.ls() if r["id"] == tokens)
    assert row["usage"]["requests"] >= 3 and row["usage"]["input"] >= 3 * 6000, row["usage"]


def test_roost_view_shows_a_ray_job_and_its_transcript(
    ray_lab: Lab, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`roost view` (its pilot, in this process, on the lab's roostd): a Ray job's row, its
    state followed live, and enter opening its transcript from roostd's copy of the session."""
    llm.add(last_user_contains("VIEW-TASK"), text("VIEW-ANSWER-1 from afar"))
    llm.add(last_user_contains("VIEW-REPLY"), text("VIEW-ANSWER-2 again"))
    job = ray_lab.run_job("VIEW-TASK go")
    assert ray_lab.wait(job, timeout=150) == "done"
    for key in ("ROOST_HOME", "PI_CODING_AGENT_DIR", "HOME"):
        monkeypatch.setenv(key, ray_lab.env[key])
    monkeypatch.chdir(ray_lab.work)

    def cell(app: ViewApp, column: str) -> str | None:
        try:
            return str(app.query_one(DataTable).get_cell(job, column).plain)
        except Exception:
            return None

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: cell(app, "state") == "done", "the Ray job's row", timeout=30)
            table = app.query_one(DataTable)
            table.move_cursor(row=table.get_row_index(job))
            await pilot.pause()
            await pilot.press("enter")
            screen = await until(
                pilot, lambda: isinstance(app.screen, TranscriptScreen) and app.screen, "its transcript"
            )
            assert screen.row["id"] == job
            await until(pilot, lambda: any("VIEW-ANSWER-1" in line for line in screen.lines), "its answer")
            # A reply runs it again on the node; the open transcript and the row follow.
            await asyncio.to_thread(ray_lab.reply, job, "VIEW-REPLY now")
            await until(
                pilot, lambda: any("VIEW-ANSWER-2" in line for line in screen.lines), "the new answer", 90
            )
            await until(pilot, lambda: screen.row["state"] == "done", "the row followed", 60)

    asyncio.run(scenario())
