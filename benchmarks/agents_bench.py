#!/usr/bin/env python3
"""Agent messaging latencies: roost_send delivery, child report hand-back, roost_spawn.

    .venv/bin/python benchmarks/agents_bench.py [--sends 30] [--reports 5] [--spawns 4]

One isolated roost (overhead_bench.bench_lab, a kit.lab.Lab: FakeLLM in this
process, probe roostd whose workers write phase marks to their worker.log). This process is
a foreground peer: it holds a session writer lock (roost.locks.SessionLock) and registers
with `peer_register`, so it can call `send` and `spawn` like a pi with the roost extension
would. Its tree:

    bench (foreground peer)
     |- R   receiver of the `send` measurements (idle between sends)
     '- P   a parent pi; its model calls roost_spawn when told "DO-SPAWN:..."
         '- C   P's first tool-spawned child; the report measurements use it

1. send: `send` request -> the receiver's pi has the message, for a live idle receiver R;
   interleaved with the mailbox floor (post -> inotify wake-up of a watcher, the same
   filesystem) measured in the same loop.
2. report: C's run settles -> the report is in P's next model request. C's answer is
   held at the FakeLLM until P is idle, then released; C was woken by a user `reply`
   (so every run is report-worthy; parent-message runs stop reporting after 3 in a row).
3. spawn: `spawn` request (from this foreground peer) and a real roost_spawn tool call
   (P's model) -> the child's first model request, interleaved with a bare pi start
   (spawn -> get_state -> prompt -> first model request) in the same loop.

Output: one JSON object (see benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import mailbox_bench  # noqa: E402
from kit.lab import Lab  # noqa: E402
from overhead_bench import (  # noqa: E402
    TIMEOUT,
    bare_trial,
    bench_lab,
    daemon_phases,
    first_after,
    load_average,
    ms,
    percentile,
    pi_label,
    roost_added,
    summary,
    wait_settled,
    worker_overlap,
    worker_phases,
)

from roost.fakellm import (  # noqa: E402
    Reply,
    first_user_contains,
    last_is_tool_result,
    last_user_contains,
    predicate,
    text,
    tool_call,
)
from roost.fakellm.requests import last_user_text, message_text  # noqa: E402
from roost.locks import SessionLock  # noqa: E402
from roost.mailbox import Mailbox  # noqa: E402
from roost.wire.client import Client  # noqa: E402

SETTINGS = {  # the limits would refuse a benchmark's burst of sends and spawns
    "agentMessagesPerMinute": 100000,
    "agentSpawnsPerMinute": 100000,
    "agentMaxChildren": 64,
    "agentMaxTreeSessions": 64,
    "agentMaxSpawned": 64,
}


def last_message_user_contains(s: str) -> Any:
    """The request's last message is a user message (not a tool result) containing `s`."""

    def fn(r: Any) -> bool:
        msgs = r.get("messages") or []
        return bool(msgs) and msgs[-1].get("role") == "user" and s in message_text(msgs[-1])

    return predicate(fn, f"last message is user and contains {s!r}")


def summary99(values: list[float]) -> dict[str, Any]:
    out = summary(values)
    if values:
        out["p99"] = percentile(values, 0.99)
    return out


class Bench:
    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.llm = lab.llm
        fg_dir = lab.root / "fg"
        fg_dir.mkdir()
        self.fg_session = fg_dir / "bench-session.jsonl"
        self.lock = SessionLock(self.fg_session)
        if not self.lock.acquire():
            raise RuntimeError(f"could not lock {self.fg_session}")
        self.fg: Client = lab.client()
        reg = self.fg.request(
            "peer_register", session=str(self.fg_session), pid=os.getpid(), name="bench", cwd=str(lab.work)
        )
        self.peer = reg["id"]
        self.c: Client = lab.client()  # job ops (wait, reply, rm)

    def close(self) -> None:
        for client in (self.fg, self.c):
            client.close()
        self.lock.release()

    def settled(self, *jobs: str) -> None:
        for job in jobs:
            wait_settled(self.c, job)

    def spawn(self, task: str, name: str) -> str:
        return str(self.fg.request("spawn", task=task, name=name, cwd=str(self.lab.work))["id"])

    def job_by_name(self, name: str) -> str:
        rows = [r for r in self.c.request("list")["jobs"] if r["name"] == name]
        if len(rows) != 1:
            raise RuntimeError(f"expected one job named {name}, got {rows}")
        return str(rows[0]["id"])


# ---- 1. send -> delivered, and the mailbox floor -----------------------------------------------
class Floors:
    """The mailbox floor, three ways, on the file system of ROOST_HOME:

    - raw: mailbox_bench's bare publish (create + write + fsync + rename + fsync dir) -> a
      raw inotify reader in another process has the name (mailbox_bench.start_consumer);
    - roost: `Mailbox.post()` -> the on_change callback of `Mailbox.watch()` here;
    - roost_fresh: the same with a fresh `Mailbox(path)` per post, as roostd does.
    """

    def __init__(self, root: Path) -> None:
        self.path = root / "floor-mailbox"
        self.box = Mailbox(self.path, max_replies=10**6, max_agent=10**6)
        self.woke = threading.Event()
        self.t_wake = 0.0
        self.watcher = self.box.watch(on_change=self._changed)
        self.raw = mailbox_bench.Floor(root / "floor-raw")
        self.raw_consumer = mailbox_bench.start_consumer("floor", self.raw.new)

    def _changed(self) -> None:
        if not self.woke.is_set():
            self.t_wake = time.monotonic()
            self.woke.set()

    def trial_raw(self) -> float:
        t0 = time.monotonic()
        seq = self.raw.publish()
        got, received = self.raw_consumer.stdout.readline().split()  # type: ignore[union-attr]
        assert int(got) == seq, (got, seq)
        return ms(float(received) - t0)

    def trial(self, fresh_open: bool) -> dict[str, float]:
        self.woke.clear()
        t0 = time.monotonic()
        box = Mailbox(self.path, max_replies=10**6, max_agent=10**6) if fresh_open else self.box
        t_open = time.monotonic()
        item = box.post(
            kind="message", text="floor", sender={"id": "f0000000", "name": "b", "relation": "external"}
        )
        t_posted = time.monotonic()
        if not self.woke.wait(10):
            raise TimeoutError("the floor watcher never woke")
        self.box.ack(item.seq)
        return {"open_ms": ms(t_open - t0), "post_ms": ms(t_posted - t0), "wake_ms": ms(self.t_wake - t0)}

    def close(self) -> None:
        self.watcher.close()
        self.raw_consumer.kill()
        self.raw_consumer.wait()


def send_trial(b: Bench, receiver: str, i: int) -> dict[str, Any]:
    token = f"MSG-{i:03d}"
    since = len(b.llm.requests)
    t0 = time.monotonic()
    res = b.fg.request("send", to=receiver, message=f"{token} from the bench")
    t_resp = time.monotonic()
    req = b.llm.wait_for_request(last_user_contains(token), TIMEOUT, since=since)
    b.settled(receiver)  # then every mark of this delivery is in the logs
    marks = worker_phases(b.lab, receiver)
    out = {"status": res.get("status"), "send_response": ms(t_resp - t0)}
    for name in ("inotify", "pump", "inject", "inject_sent", "pi_custom_end"):
        t = first_after(marks, name, t0)
        out[name] = ms(t - t0) if t is not None else None
    out["model_request"] = ms(req.t - t0)
    dm = daemon_phases(b.lab)
    for name in ("d_send", "d_post_begin", "d_post_end"):
        t = first_after(dm, name, t0)
        out[name] = ms(t - t0) if t is not None else None
    return out


# ---- 2. child settles -> report in the parent's next model request ------------------------------
def report_trial(b: Bench, parent: str, child: str, k: int) -> dict[str, Any]:
    ask, answer = f"ASK-{k:03d}", f"ANSWER-{k:03d}"
    hold = threading.Event()
    b.llm.add(
        last_message_user_contains(ask), text(f"{answer}: the child's result", hold=hold), times=1, first=True
    )
    since = len(b.llm.requests)
    r = b.c.request("reply", job=child, text=f"{ask} please")
    b.llm.wait_for_request(last_user_contains(ask), TIMEOUT, since=since)
    b.settled(parent)  # the report must start a fresh run of an idle parent
    since = len(b.llm.requests)
    t_release = time.monotonic()
    hold.set()
    req = b.llm.wait_for_request(
        predicate(
            lambda q: answer in last_user_text(q) and "agent-message" in last_user_text(q), f"report {answer}"
        ),
        TIMEOUT,
        since=since,
    )
    b.settled(child, parent)  # then every mark of this hand-back is in the logs
    cm, pm = worker_phases(b.lab, child), worker_phases(b.lab, parent)
    t_end = first_after(cm, "pi_agent_end", t_release)
    t_hand = first_after(cm, "handback", t_release)
    out: dict[str, Any] = {"reply_status": r.get("status"), "release_to_request": ms(req.t - t_release)}
    if t_end is not None:
        out["child_agent_end_to_request"] = ms(req.t - t_end)
        out["child_agent_end_to_handback"] = ms(t_hand - t_end) if t_hand else None
    if t_hand is not None:
        out["handback_to_request"] = ms(req.t - t_hand)
        for name in ("inotify", "inject", "pi_custom_end"):
            t = first_after(pm, name, t_hand)
            out[f"handback_to_parent_{name}"] = ms(t - t_hand) if t is not None else None
        dm = daemon_phases(b.lab)
        t_d = first_after(dm, "d_handback", t_hand)
        if t_d is not None:
            out["handback_to_daemon_handback"] = ms(t_d - t_hand)
            t_post = first_after(dm, "d_post_begin", t_d)
            t_posted = first_after(dm, "d_post_end", t_d)
            out["daemon_handback_to_post_begin"] = ms(t_post - t_d) if t_post else None
            out["daemon_post_duration"] = ms(t_posted - t_post) if t_post and t_posted else None
    if t_end is not None:
        # Everything roostd did from the child's agent_end to the parent's model request.
        dm = daemon_phases(b.lab)
        out["daemon_timeline"] = [(n, ms(t - t_end)) for n, t in dm if t_end <= t <= req.t]
    return out


# ---- 3. spawn -> the child's first model request -----------------------------------------------
def fg_spawn_trial(b: Bench, i: int) -> dict[str, Any]:
    token = f"FGSPAWN-{i:03d}"
    since = len(b.llm.requests)
    t0 = time.monotonic()
    job = b.spawn(f"{token} start", token.lower())
    t_resp = time.monotonic()
    req = b.llm.wait_for_request(first_user_contains(token), TIMEOUT, since=since)
    marks = worker_phases(b.lab, job)
    out: dict[str, Any] = {"start_ms": ms(req.t - t0), "spawn_response": ms(t_resp - t0)}
    for name in (
        "pi_spawn",
        "pi_spawned",
        "launched",
        "imported",
        "ext_serving",
        "get_state_sent",
        "ext_connect",
        "ext_hello",
        "get_state_ok",
        "prompt_sent",
    ):
        t = first_after(marks, name, t0)
        if t is not None:
            out[name] = ms(t - t0)
    out["added_ms"] = roost_added(out)
    out.update({f"overlap_{k}": v for k, v in worker_overlap(out).items()})
    b.settled(job)
    b.c.request("rm", job=job)
    return out


def tool_spawn_trial(b: Bench, parent: str, i: int, keep: bool) -> tuple[dict[str, Any], str]:
    """The parent's model calls roost_spawn; t0 = the parent worker forwarding the call."""
    token = f"TOOLSPAWN-{i:03d}"
    since = len(b.llm.requests)
    b.fg.request("send", to=parent, message=f"DO-SPAWN:{token}")
    req = b.llm.wait_for_request(first_user_contains(f"{token} start"), TIMEOUT, since=since)
    asked = b.llm.wait_for_request(last_user_contains(f"DO-SPAWN:{token}"), TIMEOUT, since=since)
    t_fwd = first_after(worker_phases(b.lab, parent), "ext_spawn", asked.t)
    job = b.job_by_name(token.lower())
    out = {
        "start_ms": ms(req.t - t_fwd) if t_fwd is not None else None,
        "model_tool_call_to_child_request": ms(req.t - asked.t),
    }
    b.settled(job, parent)
    if not keep:
        b.c.request("rm", job=job)
    return out, job


def spawn_reply(request: Any) -> Reply:
    tag = last_user_text(request).split("DO-SPAWN:", 1)[1].split()[0].split("<")[0]
    return tool_call("roost_spawn", {"task": f"{tag} start", "name": tag.lower()})


# ---- the run -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sends", type=int, default=30)
    ap.add_argument("--reports", type=int, default=5)
    ap.add_argument("--spawns", type=int, default=4, help="trials of (bare, fg spawn, tool spawn)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args(argv)

    started = time.monotonic()
    load_before = load_average()
    out: dict[str, Any] = {"bench": "agents", "pi": pi_label(), "cpus": os.cpu_count()}
    with bench_lab(roost_settings=SETTINGS, keep=args.keep) as lab:
        llm = lab.llm
        # Rules checked first to last: a tool result ends P's turn; "DO-SPAWN:" makes P spawn.
        llm.add(last_is_tool_result("roost_spawn"), text("spawned; waiting for the report"))
        llm.add(last_message_user_contains("DO-SPAWN:"), spawn_reply)
        b = Bench(lab)
        floor = Floors(lab.root)
        try:
            receiver = b.spawn("RECEIVER start", "receiver")
            parent = b.spawn("PARENT start", "parent")
            b.settled(receiver, parent)
            bare_trial(lab, "WARM-bare", False, 0)  # warm caches like the others had

            # 1. send -> delivered, interleaved with the floor
            sends, floors, floors_fresh, floors_raw = [], [], [], []
            for _ in range(5):  # warm both floor paths up
                floor.trial_raw()
                floor.trial(fresh_open=False)
            for i in range(args.sends):
                floors_raw.append(floor.trial_raw())
                floors.append(floor.trial(fresh_open=False))
                sends.append(send_trial(b, receiver, i))
                floors_fresh.append(floor.trial(fresh_open=True))

            # 3. spawn -> first model request, interleaved with a bare pi start
            spawn_rows: dict[str, list[dict[str, Any]]] = {"bare": [], "fg_spawn": [], "tool_spawn": []}
            child = None
            for i in range(args.spawns):
                order = ["bare", "fg_spawn", "tool_spawn"]
                order = order[i % 3 :] + order[: i % 3]
                for name in order:
                    if name == "bare":
                        spawn_rows["bare"].append(bare_trial(lab, f"SPB-{i}", False, 0))
                    elif name == "fg_spawn":
                        spawn_rows["fg_spawn"].append(fg_spawn_trial(b, i))
                    else:
                        row, job = tool_spawn_trial(b, parent, i, keep=child is None)
                        spawn_rows["tool_spawn"].append(row)
                        child = child or job
            if child is None:
                row, child = tool_spawn_trial(b, parent, 99, keep=True)

            # 2. child settles -> report in the parent's next model request
            reports = [report_trial(b, parent, child, k) for k in range(args.reports)]
        finally:
            floor.close()
            b.close()

    def col(rows: list[dict[str, Any]], key: str) -> list[float]:
        return [r[key] for r in rows if r.get(key) is not None]

    send_keys = (
        "d_send",
        "d_post_begin",
        "d_post_end",
        "inotify",
        "inject",
        "send_response",
        "pi_custom_end",
        "model_request",
    )
    out.update(
        {
            "elapsed_s": round(time.monotonic() - started, 1),
            "loadavg_before": load_before,
            "loadavg_after": load_average(),
            "send_ms": {k: summary99(col(sends, k)) for k in send_keys},
            "send_status": sorted({s["status"] for s in sends}),
            "mailbox_floor_ms": {
                "raw publish -> inotify in another process (mailbox_bench floor)": summary99(floors_raw),
                "post_to_wake (open mailbox)": summary99(col(floors, "wake_ms")),
                "post_duration (open mailbox)": summary99(col(floors, "post_ms")),
                "open_post_to_wake (fresh Mailbox() per post, as roostd does)": summary99(
                    col(floors_fresh, "wake_ms")
                ),
                "open_duration (fresh Mailbox())": summary99(col(floors_fresh, "open_ms")),
            },
            "report_ms": {
                k: summary(col(reports, k))
                for k in (
                    "child_agent_end_to_request",
                    "handback_to_request",
                    "release_to_request",
                    "child_agent_end_to_handback",
                    "handback_to_daemon_handback",
                    "daemon_handback_to_post_begin",
                    "daemon_post_duration",
                    "handback_to_parent_inotify",
                    "handback_to_parent_inject",
                    "handback_to_parent_pi_custom_end",
                )
            },
            "spawn_ms": {
                "bare pi start -> first model request": summary(col(spawn_rows["bare"], "start_ms")),
                "fg spawn request -> child's first model request": summary(
                    col(spawn_rows["fg_spawn"], "start_ms")
                ),
                "roost_spawn tool (worker forwards) -> child's first model request": summary(
                    col(spawn_rows["tool_spawn"], "start_ms")
                ),
                "parent's tool-call model request -> child's first model request": summary(
                    col(spawn_rows["tool_spawn"], "model_tool_call_to_child_request")
                ),
                "fg spawn: request -> child's pi spawned": summary(col(spawn_rows["fg_spawn"], "pi_spawned")),
                "fg spawn: added by roost, serial (before pi spawn + ready -> prompt)": summary(
                    col(spawn_rows["fg_spawn"], "added_ms")
                ),
                "fg spawn: worker set-up while pi boots (pi spawned -> get_state sent)": summary(
                    col(spawn_rows["fg_spawn"], "overlap_setup")
                ),
                "fg spawn: worker waits for pi (get_state sent -> answered)": summary(
                    col(spawn_rows["fg_spawn"], "overlap_pi_wait")
                ),
                "fg spawn: ext server up -> extension connected": summary(
                    col(spawn_rows["fg_spawn"], "overlap_ext_wait")
                ),
            },
        }
    )
    fl = out["mailbox_floor_ms"]["post_to_wake (open mailbox)"].get("median")
    raw = out["mailbox_floor_ms"]["raw publish -> inotify in another process (mailbox_bench floor)"].get(
        "median"
    )
    inotify = out["send_ms"]["inotify"].get("median")
    bare = out["spawn_ms"]["bare pi start -> first model request"].get("median")
    fg = out["spawn_ms"]["fg spawn request -> child's first model request"].get("median")
    out["overhead_ms"] = {
        "send -> receiver woken, minus Mailbox post->wake (medians)": round(inotify - fl, 2)
        if inotify is not None and fl is not None
        else None,
        "send -> receiver woken, minus the raw floor (medians)": round(inotify - raw, 2)
        if inotify is not None and raw is not None
        else None,
        "fg spawn - bare start (medians)": round(fg - bare, 2) if fg and bare else None,
        "fg spawn - bare start (median of paired trials)": round(
            statistics.median(
                [
                    s["start_ms"] - a["start_ms"]
                    for s, a in zip(spawn_rows["fg_spawn"], spawn_rows["bare"], strict=False)
                ]
            ),
            2,
        )
        if spawn_rows["bare"]
        else None,
    }
    out["raw"] = {"sends": sends, "reports": reports, "spawn": spawn_rows}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
