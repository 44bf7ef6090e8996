"""The queue (README: Queue and limits): maxRunning and named groups cap the jobs running
a turn; past them a job is `queued`, in priority then first-come order, its items in its
mailbox; the queue survives a roostd SIGKILL; a spawn past its tree's caps may queue.

The fake pi holds a turn with `[[hold NAME]]` until the test creates the file NAME."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from kit.jobs import alive, run_job, settle
from kit.lab import Lab
from kit.wait import wait_until

from roost.wire import protocol


def open_gate(env: Lab, name: str) -> None:
    (env.work / name).touch()


def state_events(env: Lab) -> list[dict]:
    """The job.state events, each with `id`: its job's id."""
    path = env.roost_home / "events.jsonl"
    return [
        {**e, "id": e["job"]["id"]}
        for e in map(json.loads, path.read_text().splitlines())
        if e["type"] == "job.state"
    ]


def starts(env: Lab) -> list[str]:
    """The jobs in the order their runs started (job.state -> running)."""
    return [e["id"] for e in state_events(env) if e["to"] == "running"]


def most_at_once(env: Lab, jobs: list[str]) -> int:
    """The most of `jobs` that were starting or running at one time (from the event log)."""
    now, peak, busy = {}, 0, ("starting", "running")
    for event in state_events(env):
        if event["id"] in jobs:
            now[event["id"]] = event["to"] in busy
            peak = max(peak, sum(now.values()))
    return peak


def queue_of(env: Lab) -> dict:
    return json.loads(env.roost_ok("queue", "--json"))


def test_past_max_running_jobs_queue_in_order_and_start_as_slots_free(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(maxRunning=1)
    a = run_job(env, "[[hold ga]] a")
    b = run_job(env, "[[hold gb]] b")
    c = run_job(env, "c")
    rows = {r["id"]: r for r in env.ls()}
    assert rows[a]["state"] in ("starting", "running")
    assert (rows[b]["state"], rows[b]["queue"]["position"]) == ("queued", 1)
    assert (rows[c]["state"], rows[c]["queue"]["position"]) == ("queued", 2)
    assert rows[c]["status"] == "queued (position 2)"
    table = env.roost_ok("ls", "--wide")
    # The STATE column is as wide as its widest cell: `starting` while a's worker starts.
    assert f"{c}  c" in table and re.search(r"queued {3,4}queued \(position 2\)", table)
    assert rows[a]["queue"] == {"position": None, "group": None, "priority": 0}
    assert [r["id"] for r in queue_of(env)["jobs"]] == [b, c]

    open_gate(env, "ga")
    assert settle(env, a) == "done"
    wait_until(lambda: env.row(b)["state"] == "running", 30, what="b to leave the queue")
    assert env.row(c)["queue"]["position"] == 1 and env.row(c)["state"] == "queued"
    open_gate(env, "gb")
    for job in (b, c):
        assert settle(env, job) == "done"
    assert starts(env) == [a, b, c]
    assert most_at_once(env, [a, b, c]) == 1


def test_priority_orders_the_queue_and_queue_move_reorders_it(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(maxRunning=1)
    a = run_job(env, "[[hold ga]] a")
    low = run_job(env, "low")
    high = run_job(env, "high", "--priority", "5")
    mid = run_job(env, "mid", "--priority", "2")
    assert [r["id"] for r in queue_of(env)["jobs"]] == [high, mid, low]
    assert env.row(high)["queue"] == {"position": 1, "group": None, "priority": 5}

    env.roost_ok("queue", "move", low, "--first")
    assert [r["id"] for r in queue_of(env)["jobs"]] == [low, high, mid]
    env.roost_ok("queue", "move", mid, "--priority", "100")
    assert [r["id"] for r in queue_of(env)["jobs"]] == [mid, low, high]
    moved = env.roost("queue", "move", a, "--priority", "1")
    assert moved.returncode == 1 and "not queued" in moved.stderr

    open_gate(env, "ga")
    for job in (mid, low, high):
        assert settle(env, job) == "done"
    assert starts(env) == [a, mid, low, high]


def test_a_group_has_its_own_limit_beside_max_running(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(maxRunning=3)
    env.roost_ok("group", "add", "ci", "--parallel", "1")
    refused = env.roost("run", "--group", "nope", "x")
    assert refused.returncode == 2 and "no group 'nope'" in refused.stderr
    g1 = run_job(env, "[[hold g1]] one", "--group", "ci")
    g2 = run_job(env, "two", "--group", "ci")
    free = run_job(env, "[[hold gf]] free")
    assert env.row(g2)["state"] == "queued"
    assert env.row(g2)["queue"] == {"position": 1, "group": "ci", "priority": 0}
    wait_until(lambda: env.row(free)["state"] == "running", 30, what="the job outside the group")
    groups = json.loads(env.roost_ok("group", "ls", "--json"))
    assert groups == [{"name": "ci", "parallel": 1, "running": 1, "queued": 1}]
    assert json.loads((env.roost_home / "groups.json").read_text()) == {"groups": {"ci": {"parallel": 1}}}

    open_gate(env, "g1")
    assert settle(env, g2) == "done"
    assert most_at_once(env, [g1, g2]) == 1
    env.roost_ok("group", "rm", "ci")
    assert json.loads(env.roost_ok("group", "ls", "--json")) == []
    open_gate(env, "gf")
    assert settle(env, free) == "done"


def test_an_item_for_a_queued_job_waits_in_its_mailbox_and_a_reply_to_an_idle_job_queues(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    env.configure(maxRunning=1, reapAfterSeconds=0.5)
    idle = run_job(env, "first")
    assert settle(env, idle) == "done"
    wait_until(lambda: env.row(idle)["state"] == "reaped", 30, what="the idle job's reaping")
    a = run_job(env, "[[hold ga]] a")
    queued = run_job(env, "queued task")
    assert env.roost_ok("reply", queued, "more for you").strip() == "queued"
    assert env.roost_ok("reply", idle, "wake up").strip() == "queued"  # no slot: it waits
    row = env.row(idle)
    assert row["state"] == "queued" and row["pending"]["replies"] == 1
    assert row["queue"]["position"] == 2
    assert env.row(queued)["pending"]["replies"] == 2  # its task and the reply

    open_gate(env, "ga")
    for job in (queued, idle):
        assert settle(env, job) == "done"
    assert env.show(idle)["summary"] == "echo: wake up"
    assert starts(env) == [idle, a, queued, idle]
    assert most_at_once(env, [a, queued, idle]) == 1


def test_the_queue_survives_a_roostd_sigkill_in_order_and_nothing_starts_twice(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    env.configure(maxRunning=1)
    a = run_job(env, "[[hold ga]] a")
    b = run_job(env, "b")
    c = run_job(env, "c", "--priority", "3")
    d = run_job(env, "d")
    env.roost_ok("reply", b, "and this")
    wait_until(lambda: env.row(a)["state"] == "running", 30, what="a's run to start")
    before = [r["id"] for r in queue_of(env)["jobs"]]
    assert before == [c, b, d]
    daemon = env.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not alive(daemon), 10, what="roostd to die")

    after = queue_of(env)  # a new roostd
    assert env.daemon_pid() not in (None, daemon)
    assert [r["id"] for r in after["jobs"]] == before
    assert [r["queue"]["position"] for r in after["jobs"]] == [1, 2, 3]
    # Adopted: its worker reconnects (after a back-off) and it holds its slot again.
    wait_until(lambda: env.row(a)["state"] == "running", 30, what="a's worker to reconnect")
    assert [r["id"] for r in queue_of(env)["jobs"]] == before
    time.sleep(0)  # nothing timed: the gate decides when the queue moves
    open_gate(env, "ga")
    for job in (c, b, d):
        assert settle(env, job) == "done"
    assert starts(env) == [a, c, b, d]  # each once, in order
    assert most_at_once(env, [a, b, c, d]) == 1
    assert env.show(b)["summary"] == "echo: and this"
    assert all(env.show(j)["worker"]["crashes"] == 0 for j in (a, b, c, d))


def test_run_each_submits_many_jobs_in_one_request(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(maxRunning=2)
    tasks = env.work / "tasks.txt"
    tasks.write_text("".join(f"task {n}\n" for n in range(20)) + "\n")
    started = time.monotonic()
    ids = env.roost_ok("run", "--each", str(tasks)).split()
    took = time.monotonic() - started
    assert len(ids) == 20 and len(set(ids)) == 20
    assert took < 10, took
    listed = json.dumps([{"task": "json one", "name": "j1", "priority": 9}, "json two"])
    (env.work / "tasks.json").write_text(listed)
    more = env.roost_ok("run", "--each", str(env.work / "tasks.json")).split()
    assert env.row(more[0])["name"] == "j1"
    bad = env.work / "bad.json"
    bad.write_text(json.dumps(["ok", {"task": "x", "what": 1}]))
    refused = env.roost("run", "--each", str(bad))
    assert refused.returncode == 2 and "task 2: unknown keys" in refused.stderr
    assert len(env.ls()) == 22  # the refused request started nothing
    for job in ids + more:
        assert settle(env, job) == "done"
    assert most_at_once(env, ids + more) <= 2


def spawn(boss, task: str, cwd: Path, **args) -> dict:
    return boss.request("spawn", task=task, cwd=str(cwd), **args)


def test_a_spawn_past_the_tree_caps_queues_when_asked_and_starts_when_there_is_room(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    env.configure(agentMaxChildren=1, reapAfterSeconds=0.5)
    env.roost_ok("ls")  # starts roostd
    with env.client() as boss:
        boss.request("peer_register", pid=os.getpid(), name="boss")
        first = spawn(boss, "[[hold g1]] child one", env.work)
        with pytest.raises(protocol.RequestError, match="children limit"):
            spawn(boss, "refused", env.work)
        second = spawn(boss, "child two", env.work, queue=True)
        assert second["text"].startswith("queued (position 1): spawned ")
        assert env.row(second["id"])["state"] == "queued"
        open_gate(env, "g1")
        # The first child ends its turn, then is reaped: its tree has room, the second runs.
        assert settle(env, second["id"]) == "done"
        assert starts(env) == [first["id"], second["id"]]
        first_reaped = next(
            i for i, e in enumerate(state_events(env)) if e["id"] == first["id"] and e["to"] == "reaped"
        )
        second_started = next(
            i for i, e in enumerate(state_events(env)) if e["id"] == second["id"] and e["to"] == "starting"
        )
        assert first_reaped < second_started


def test_the_agent_spawn_queue_setting_queues_every_spawn_past_the_caps(
    fake_pi_env: Lab,
) -> None:
    env = fake_pi_env
    env.configure(agentMaxChildren=1, agentSpawnQueue=True)
    env.roost_ok("ls")  # starts roostd
    with env.client() as boss:
        boss.request("peer_register", pid=os.getpid(), name="boss")
        spawn(boss, "[[hold g1]] child one", env.work)
        queued = spawn(boss, "child two", env.work)
        assert queued["position"] == 1 and "queued (position 1)" in queued["text"]
        assert env.row(queued["id"])["state"] == "queued"
        open_gate(env, "g1")


def test_a_raised_max_running_starts_queued_jobs(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(maxRunning=1)
    a = run_job(env, "[[hold ga]] a")
    b = run_job(env, "[[hold gb]] b")
    assert env.row(b)["state"] == "queued"
    assert queue_of(env)["maxRunning"] == 1
    env.configure(maxRunning=2)
    env.ls()  # roostd reads roost.json again; the queue goes on
    wait_until(lambda: env.row(b)["state"] == "running", 30, what="b to start beside a")
    assert env.row(a)["state"] == "running"
    open_gate(env, "ga")
    open_gate(env, "gb")
    for job in (a, b):
        assert settle(env, job) == "done"


def test_a_reply_to_an_idle_job_with_a_live_worker_waits_for_a_slot(fake_pi_env: Lab) -> None:
    """Its worker is up (not reaped), so nothing has to start: still, its next run takes a
    slot, and with none free the reply waits in the mailbox and the job is queued."""
    env = fake_pi_env
    env.configure(maxRunning=1)
    idle = run_job(env, "first")
    assert settle(env, idle) == "done"
    worker = env.show(idle)["worker"]["pid"]
    assert worker is not None and alive(worker)
    a = run_job(env, "[[hold ga]] a")
    wait_until(lambda: env.row(a)["state"] == "running", 30, what="a to run")
    assert env.roost_ok("reply", idle, "wake up").strip() == "queued"
    row = env.row(idle)
    assert row["state"] == "queued" and row["queue"]["position"] == 1
    assert row["pending"]["replies"] == 1
    assert env.show(idle)["worker"]["pid"] == worker  # kept, waiting for its turn

    open_gate(env, "ga")
    assert settle(env, a) == "done"
    assert settle(env, idle) == "done"
    assert env.show(idle)["summary"] == "echo: wake up"
    assert env.show(idle)["worker"]["pid"] == worker
    assert starts(env) == [idle, a, idle]
    assert most_at_once(env, [a, idle]) == 1


def test_a_queued_job_with_a_live_worker_survives_a_roostd_sigkill(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(maxRunning=1)
    idle = run_job(env, "first")
    assert settle(env, idle) == "done"
    worker = env.show(idle)["worker"]["pid"]
    a = run_job(env, "[[hold ga]] a")
    wait_until(lambda: env.row(a)["state"] == "running", 30, what="a to run")
    assert env.roost_ok("reply", idle, "after the kill").strip() == "queued"
    daemon = env.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not alive(daemon), 10, what="roostd to die")

    assert [r["id"] for r in queue_of(env)["jobs"]] == [idle]  # a new roostd
    wait_until(
        lambda: env.show(idle)["worker"]["state"] == "running", 30, what="the idle job's worker to reconnect"
    )
    assert env.row(idle)["state"] == "queued" and env.row(a)["state"] == "running"
    open_gate(env, "ga")
    assert settle(env, a) == "done"
    assert settle(env, idle) == "done"
    assert env.show(idle)["summary"] == "echo: after the kill"
    assert env.show(idle)["worker"]["pid"] == worker
    assert starts(env) == [idle, a, idle]
    assert most_at_once(env, [a, idle]) == 1
