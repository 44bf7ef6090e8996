#!/usr/bin/env python3
"""Crash torture: a storm of tagged items while workers, pis and roostd are SIGKILLed.

    .venv/bin/python benchmarks/torture.py [--duration 600] [--rate 3] [--kill-every 3]
                                           [--seed 1] [--ci]

One isolated roost + real pi + FakeLLM (`kit.lab.Lab`), with roostd
managed as supervisord would (ROOST_NO_AUTOSTART=1; after a kill this script runs
`roost daemon start`). The load:

- 4 receiver jobs; their model answers "noted", or runs `bash sleep 1` when a new user
  item says SLOW (two of them get SLOW items, so items also arrive inside a tool);
- 2 sender jobs; when a reply says `SEND TAG TO ID` their model calls
  `roost_send {to: ID, message: TAG}` (the receivers are outside their tree:
  `agentExternalMessages: true`);
- 1 parent job; when told `SPAWN TAG` its model calls `roost_spawn {task: "... TAG ..."}`;
  the child's model answers `RESULT:TAG`, so its report (which reaches the parent's model
  by itself) carries the tag. At most `--children` spawns are outstanding at a time.

Items are uniquely tagged (`TQ<kind><n>Z`) and issued at `--rate` per second from a few
threads, all at once. Meanwhile, every `--kill-every` seconds (jittered), a random process
is SIGKILLed by pid: a job's worker (`process.workerPid` in job.json), its pi (the worker's
child), or roostd (its pid file; restarted with `roost daemon start` after a short pause);
or a fault of `roost/faults.py` is armed (`ROOST_FAULTS`: the first item passing a
chosen point of the delivery path in a chosen job kills its worker or pi there). On
`--replay-share` of the ticks an already delivered item is also replayed: a tagged file of a
receiver's (or the parent's) `mailbox/cur/` is copied into its `mailbox/new/` under a seq
the counter never handed out, its "seq" field rewritten to agree, mode 0644
(docs/reference/mailbox.md: it must be quarantined).

Counted, after the storm stops and everything settles: every item whose sender was told
`delivered` / `queued` / `started` (the CLI's word for a reply; the roost_send tool result
for a message, read from the sender's model requests and session file; the roost_spawn
result `spawned <id>` for a report) is *accepted*; of those, *lost* = no model request of
the receiving job contains it; *duplicated* = it shows in more than one message of one
request, or in more than one entry of the receiver's session file. A replay is counted
`replays_quarantined` when it lies in bad/ with a `.why` that says replay; every file of
every mailbox (its `seq`, new/, cur/, bad/) must be 0600 (`mailbox_files_not_0600`). The
figures are printed as one JSON object; the exit status is 1 if anything was lost or
duplicated, a replay was not quarantined or a mailbox file is not 0600.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from kit.lab import Lab  # noqa: E402

from roost.fakellm import Reply, first_user_contains, text, tool_calls  # noqa: E402
from roost.fakellm.requests import (  # noqa: E402
    content_text,
    message_text,
    messages,
    new_user_texts,
)
from roost.faults import POINTS, TARGETS  # noqa: E402

SETTINGS = {
    "agentExternalMessages": True,
    "agentMessagesPerMinute": 100000,
    "agentSpawnsPerMinute": 100000,
    "agentMaxChildren": 64,
    "agentMaxTreeSessions": 128,
    "agentMaxSpawned": 128,
    "restartBackoffSeconds": 0.05,
    "restartWindowSeconds": 1.0,
    "restartMaxCrashes": 100000,
    "resumeMaxInRow": 100,
    "reapAfterSeconds": 8.0,  # idle children (and receivers) are reaped, then woken again
}
ACCEPTED = ("delivered", "queued", "started")
RECEIVERS, SENDERS = 4, 2
TAG = re.compile(r"TQ[RMS]\d{6}Z")
ORDER = re.compile(r"SEND (TQ[RMS]\d{6}Z) TO ([0-9a-f]{8})")
SPAWN = re.compile(r"SPAWN (TQ[RMS]\d{6}Z)")
MARK = re.compile(r"\b(TRCV\d|TSND\d|TPAR|TCHD)\b")
CI = {"duration": 75.0, "rate": 3.0, "kill_every": 1.5}
SETTLED_STATES = ("done", "needs_input", "failed", "reaped", "stopped")


# -- what the model sees ----------------------------------------------------------------
def called_args(request: Mapping[str, Any]) -> str:
    """Every tool call's arguments in the request's history, as one string."""
    out = []
    for message in messages(request):
        for call in message.get("tool_calls") or []:
            out.append(str((call.get("function") or {}).get("arguments", "")))
    return "\n".join(out)


def receiver_model(request: Mapping[str, Any]) -> Reply:
    if any("SLOW" in line for line in new_user_texts(request)):
        return tool_calls(("bash", {"command": "sleep 1; echo slept"}))
    return text("noted")


def sender_model(request: Mapping[str, Any]) -> Reply:
    done = called_args(request)
    orders = [o for line in new_user_texts(request) for o in ORDER.findall(line) if o[0] not in done]
    if orders:
        return tool_calls(*[("roost_send", {"to": to, "message": tag}) for tag, to in orders])
    return text("sent")


def parent_model(request: Mapping[str, Any]) -> Reply:
    done = called_args(request)
    tags = [
        t
        for line in new_user_texts(request)
        if not line.startswith("<agent-message")
        for t in SPAWN.findall(line)
        if t not in done
    ]
    if tags:
        return tool_calls(*[("roost_spawn", {"task": f"TCHD {t}: answer with the tag"}) for t in tags])
    return text("ok")


def child_model(request: Mapping[str, Any]) -> Reply:
    first = next((message_text(m) for m in messages(request) if m.get("role") == "user"), "")
    found = TAG.search(first)
    return text(f"RESULT:{found.group(0) if found else 'none'}")


NOTE = "[roost] Your previous run was interrupted"


def asked(request: Mapping[str, Any]) -> list[Any]:
    """What the model was asked, without roost's continuation notes and the empty aborted
    answers a killed run leaves: two requests alike here are one model call made twice."""
    out = []
    for m in messages(request):
        if message_text(m).startswith(NOTE):
            continue
        if m.get("role") == "assistant" and not message_text(m).strip() and not m.get("tool_calls"):
            continue
        out.append(m)
    return out


def marker_of(request: Mapping[str, Any]) -> str | None:
    first = next((message_text(m) for m in messages(request) if m.get("role") == "user"), "")
    found = MARK.search(first[:40])
    return found.group(1) if found else None


def tool_outcomes(requests: list[Any], entries: list[dict[str, Any]], tool: str) -> dict[str, str]:
    """tag -> the first line of the `tool` result for the call that carried it, from the
    model requests (OpenAI form) and the session file (pi's form)."""
    out: dict[str, str] = {}
    for request in requests:
        calls = {}
        for message in messages(request):
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                if fn.get("name") == tool:
                    calls[call.get("id")] = str(fn.get("arguments", ""))
            if message.get("role") == "tool" and message.get("tool_call_id") in calls:
                for tag in TAG.findall(calls[message["tool_call_id"]]):
                    out.setdefault(tag, content_text(message.get("content")).strip())
    calls = {}
    for entry in entries:
        message = entry.get("message") or {}
        if entry.get("type") != "message":
            continue
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            for part in message["content"]:
                if isinstance(part, dict) and part.get("type") == "toolCall" and part.get("name") == tool:
                    calls[part.get("id")] = json.dumps(part.get("arguments"))
        if message.get("role") == "toolResult" and message.get("toolCallId") in calls:
            for tag in TAG.findall(calls[message["toolCallId"]]):
                out.setdefault(tag, content_text(message.get("content")).strip())
    return out


# -- the run ------------------------------------------------------------------------------
class Torture:
    def __init__(
        self,
        duration: float,
        rate: float,
        kill_every: float,
        seed: int,
        children: int = 3,
        fault_share: float = 0.3,
        settle: float = 240.0,
        log: Any = None,
        replay_share: float = 0.3,
    ) -> None:
        self.duration, self.rate, self.kill_every = duration, rate, kill_every
        self.children, self.fault_share, self.settle_limit = children, fault_share, settle
        self.replay_share = replay_share
        self.replay_rng = random.Random(seed + 1)  # apart, so the kills follow the seed as before
        self.replays: list[tuple[str, int]] = []  # (job, seq) of each replayed copy
        self.rng = random.Random(seed)
        self.log = log or (lambda *a: print(*a, file=sys.stderr, flush=True))
        self.lab = Lab(llm=True, settings=SETTINGS)
        self.fault = self.lab.root / "fault.json"
        self.lab.env["ROOST_FAULTS"] = str(self.fault)
        self.lab.env["ROOST_NO_AUTOSTART"] = "1"
        self.lab.env["PYTHONPYCACHEPREFIX"] = "/tmp/roost-bench-pycache"
        self.items: Counter[str] = Counter()
        self.kills: Counter[str] = Counter()
        self.replies: dict[str, tuple[str, str]] = {}  # tag -> (receiver, CLI word)
        self.orders: dict[str, tuple[str, str]] = {}  # tag -> (sender, receiver)
        self.spawns: set[str] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.counter = 0
        self.daemon_down = threading.Event()
        self.errors: Counter[str] = Counter()

    # -- set-up ---------------------------------------------------------------------------
    def start(self) -> None:
        lab, llm = self.lab, self.lab.llm
        for i in range(RECEIVERS):
            llm.add(first_user_contains(f"TRCV{i}"), receiver_model)
        for i in range(SENDERS):
            llm.add(first_user_contains(f"TSND{i}"), sender_model)
        llm.add(first_user_contains("TPAR"), parent_model)
        llm.add(first_user_contains("TCHD"), child_model)
        self.start_daemon()
        self.receivers = [
            lab.run(f"TRCV{i} receiver: answer every item", name=f"recv{i}") for i in range(RECEIVERS)
        ]
        self.senders = [
            lab.run(f"TSND{i} sender: send what you are told", name=f"send{i}") for i in range(SENDERS)
        ]
        self.parent = lab.run("TPAR parent: spawn what you are told", name="parent")
        for job in [*self.receivers, *self.senders, self.parent]:
            lab.wait(job, timeout=120)

    # -- the storm ------------------------------------------------------------------------
    def next_tag(self, kind: str) -> str:
        with self.lock:
            self.counter += 1
            return f"TQ{kind}{self.counter:06d}Z"

    def cli_reply(self, job: str, body: str) -> str:
        proc = self.lab.cli("reply", job, body, check=False, timeout=60)
        if proc.returncode != 0:
            self.errors[(proc.stderr.strip().splitlines() or ["?"])[-1][:80]] += 1
            return "error"
        return proc.stdout.strip()

    def outstanding_spawns(self) -> int:
        seen = "\n".join(message_text(m) for r in self.lab.requests_of("TPAR")[-3:] for m in messages(r))
        return sum(1 for t in self.spawns if f"RESULT:{t}" not in seen)

    def issue(self, kind: str) -> None:
        rng = self.rng
        if kind == "reply":
            tag = self.next_tag("R")
            i = rng.randrange(RECEIVERS)
            body = f"SLOW {tag}" if i < 2 and rng.random() < 0.5 else f"note {tag}"
            word = self.cli_reply(self.receivers[i], body)
            with self.lock:
                self.items["reply"] += 1
                self.replies[tag] = (self.receivers[i], word)
        elif kind == "message":
            tag = self.next_tag("M")
            sender = rng.choice(self.senders)
            receiver = rng.choice(self.receivers)
            with self.lock:
                self.items["message"] += 1
                self.orders[tag] = (sender, receiver)
            self.cli_reply(sender, f"SEND {tag} TO {receiver}")
        else:
            tag = self.next_tag("S")
            with self.lock:
                self.items["report"] += 1
                self.spawns.add(tag)
            self.cli_reply(self.parent, f"SPAWN {tag}")

    def storm(self) -> None:
        end = time.monotonic() + self.duration
        pool = ThreadPoolExecutor(max_workers=6)
        last_spawn_check, spawn_ok = 0.0, True
        while time.monotonic() < end:
            roll = self.rng.random()
            kind = "reply" if roll < 0.5 else "message" if roll < 0.8 else "report"
            if kind == "report":
                if time.monotonic() - last_spawn_check > 2:
                    spawn_ok = self.outstanding_spawns() < self.children
                    last_spawn_check = time.monotonic()
                if not spawn_ok:
                    kind = "reply"
                else:
                    spawn_ok = False  # one spawn per check
            pool.submit(self._guard, kind)
            time.sleep(self.rng.expovariate(self.rate))
        pool.shutdown(wait=True)

    def _guard(self, kind: str) -> None:
        try:
            self.issue(kind)
        except Exception as exc:  # a CLI timeout while roostd is down, …
            self.errors[f"{kind}: {type(exc).__name__}"] += 1

    # -- the killer -----------------------------------------------------------------------
    def jobs(self) -> list[dict[str, Any]]:
        out = []
        for path in (self.lab.roost_home / "jobs").glob("*/job.json"):
            with contextlib.suppress(OSError, ValueError):
                out.append(json.loads(path.read_text()))
        return out

    def worker_procs(self) -> list[psutil.Process]:
        procs = []
        for record in self.jobs():
            pid = (record.get("process") or {}).get("workerPid")
            if isinstance(pid, int):
                with contextlib.suppress(psutil.Error):
                    proc = psutil.Process(pid)
                    if "roost.worker" in " ".join(proc.cmdline()):
                        procs.append(proc)
        return procs

    def kill_one(self) -> None:
        self.check_fault()
        if self.fault_armed is None and self.rng.random() < self.fault_share:
            self.arm_fault()
            return
        roll = self.rng.random()
        if roll < 0.12:
            self.kill_roostd()
            return
        workers = self.worker_procs()
        if not workers:
            return
        worker = self.rng.choice(workers)
        if roll < 0.56:
            with contextlib.suppress(psutil.Error):
                worker.send_signal(signal.SIGKILL)
                self.kills["worker"] += 1
            return
        with contextlib.suppress(psutil.Error):
            pis = [c for c in worker.children() if "roost.worker" not in " ".join(c.cmdline())]
            if pis:
                pis[0].send_signal(signal.SIGKILL)
                self.kills["pi"] += 1

    def kill_roostd(self) -> None:
        try:
            pid = int((self.lab.roost_home / "roostd.pid").read_text().split()[0])
            proc = psutil.Process(pid)
            if "roost" not in " ".join(proc.cmdline()):
                return
            proc.send_signal(signal.SIGKILL)
            proc.wait(5)
        except (OSError, ValueError, psutil.Error):
            return
        self.kills["roostd"] += 1
        self.daemon_down.set()
        time.sleep(self.rng.uniform(0.1, 1.0))  # supervisord's restart delay
        self.start_daemon()

    def start_daemon(self) -> None:
        # as a service manager would: this start is the only one (the CLI's autostart is off)
        env = {k: v for k, v in self.lab.env.items() if k != "ROOST_NO_AUTOSTART"}
        for _ in range(20):
            proc = subprocess.run(
                [sys.executable, "-m", "roost.cli.main", "daemon", "start"],
                env=env,
                cwd=self.lab.work,
                capture_output=True,
                text=True,
                timeout=60,
            )
            if proc.returncode == 0:
                self.daemon_down.clear()
                return
            time.sleep(0.5)
        raise RuntimeError(f"roostd does not start again: {proc.stderr}")

    def replay_one(self) -> None:
        """Copy a delivered (acknowledged), tagged item of a receiver or the parent back
        into its new/ under a seq the counter never handed out, as a forger would."""
        rng = self.replay_rng
        job = rng.choice([*self.receivers, self.parent])
        # Only into a job that has a worker (it scans new/ at once, or at its restart): in a
        # reaped job's new/ a forged file waits, unread, for the job's next run, which the
        # settled storm never gives it (found by a run that replayed into a reaped job).
        states = {record.get("id"): record.get("state") for record in self.jobs()}
        if states.get(job) in ("reaped", "stopped", "failed"):
            return
        box = self.lab.roost_home / "jobs" / job / "mailbox"
        sources = []
        for path in sorted((box / "cur").glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                item = json.loads(path.read_text())
                if TAG.search(json.dumps(item)):
                    sources.append(item)
        if not sources:
            return
        item = rng.choice(sources)
        try:
            found = re.search(r"last=(\d+)", (box / "seq").read_text())
        except OSError:
            return
        if found is None:
            return
        seq = int(found.group(1)) + rng.randint(500, 5000)  # never handed out
        staged = self.lab.root / "replay.tmp"
        staged.write_text(json.dumps({**item, "seq": seq}) + "\n")
        os.chmod(staged, 0o644)
        os.rename(staged, box / "new" / f"{seq:012d}.json")
        self.replays.append((job, seq))

    def replay_outcome(self) -> dict[str, Any]:
        """How the replays ended, and every mailbox file whose mode is not 0600."""
        quarantined, left = 0, []
        for job, seq in self.replays:
            why = self.lab.roost_home / "jobs" / job / "mailbox" / "bad" / f"{seq:012d}.json.why"
            with contextlib.suppress(OSError):
                if why.read_text().startswith("replay:"):
                    quarantined += 1
                    continue
            left.append(f"{job}/{seq}")
        loose = []
        for box in (self.lab.roost_home / "jobs").glob("*/mailbox"):
            files = [box / "seq"] + [
                p for sub in ("new", "cur", "bad") if (box / sub).is_dir() for p in (box / sub).iterdir()
            ]
            for path in files:
                with contextlib.suppress(OSError):
                    if stat.S_ISREG(path.lstat().st_mode) and stat.S_IMODE(path.lstat().st_mode) != 0o600:
                        loose.append(
                            f"{path.relative_to(self.lab.roost_home)} {stat.S_IMODE(path.lstat().st_mode):o}"
                        )
        return {
            "replayed": len(self.replays),
            "replays_quarantined": quarantined,
            "replays_not_quarantined": left,
            "mailbox_files_not_0600": loose,
        }

    fault_armed: tuple[str, float] | None = None

    def check_fault(self) -> None:
        """Count the armed fault if it fired; drop it if nothing passed there in time."""
        if self.fault_armed is None:
            return
        fired = Path(f"{self.fault}.fired")
        what, since = self.fault_armed
        if not fired.exists() and time.monotonic() - since > 15:
            with contextlib.suppress(OSError):
                os.unlink(self.fault)
                self.fault_armed = None
        if fired.exists():
            fired.unlink()
            self.kills[f"fault_{what}"] += 1
            self.fault_armed = None

    def arm_fault(self) -> None:
        point, target = self.rng.choice(POINTS), self.rng.choice(TARGETS)
        job = self.rng.choice([*self.receivers, *self.receivers, self.parent, *self.senders])
        self.fault.write_text(json.dumps({"point": point, "target": target, "text": "TQ", "job": job}))
        self.fault_armed = (f"{point}_{target}", time.monotonic())

    def killer(self) -> None:
        while not self.stop.wait(self.rng.uniform(0.5, 1.5) * self.kill_every):
            try:
                self.kill_one()
                if self.replay_rng.random() < self.replay_share:
                    self.replay_one()
            except Exception as exc:
                self.errors[f"killer: {type(exc).__name__}: {exc}"[:100]] += 1
        # disarm whatever is left
        with contextlib.suppress(OSError):
            os.unlink(self.fault)
        self.check_fault()

    # -- settling -------------------------------------------------------------------------
    def settled(self) -> bool:
        for record in self.jobs():
            if record.get("kind", "pi") == "shell":
                continue
            if record.get("state") not in SETTLED_STATES:
                return False
            if self.lab.mailbox_files(record["id"], "new"):
                return False
        return True

    def settle(self) -> list[str]:
        """Wait until every job is settled with an empty mailbox and the model has been
        quiet for a while; jobs left in needs_input get one `FLUSH` reply (listed)."""
        flushed: list[str] = []
        deadline = time.monotonic() + self.settle_limit
        quiet_since, count = time.monotonic(), len(self.lab.llm.requests)
        while time.monotonic() < deadline:
            time.sleep(1.0)
            n = len(self.lab.llm.requests)
            if n != count or not self.settled():
                quiet_since, count = time.monotonic(), n
                continue
            if time.monotonic() - quiet_since < 6.0:
                continue
            waiting = [
                r["id"] for r in self.jobs() if r.get("state") == "needs_input" and r["id"] not in flushed
            ]
            if not waiting:
                return flushed
            for job in waiting:
                self.cli_reply(job, "FLUSH")
                flushed.append(job)
            quiet_since = time.monotonic()
        self.errors["did not settle"] += 1
        self.log_unsettled()
        return flushed

    def log_unsettled(self) -> None:
        """What kept the lab from settling: each unsettled job's record, mailbox and log tail."""
        for record in self.jobs():
            mailbox = self.lab.mailbox_files(record["id"], "new")
            if record.get("state") in SETTLED_STATES and not mailbox:
                continue
            self.log(
                f"torture: unsettled {record['id']}: state={record.get('state')} "
                f"status={record.get('status')} queue={record.get('queue')} "
                f"process={record.get('process')} mailbox.new={len(mailbox)}"
            )
            worker_log = self.lab.roost_home / "jobs" / record["id"] / "worker.log"
            with contextlib.suppress(OSError):
                for line in worker_log.read_text(errors="replace").splitlines()[-15:]:
                    self.log(f"  worker.log: {line[:200]}")
        with contextlib.suppress(OSError):
            lines = (self.lab.roost_home / "roostd.log").read_text(errors="replace").splitlines()
            for line in lines[-30:]:
                self.log(f"  roostd.log: {line[:200]}")

    # -- counting -------------------------------------------------------------------------
    def count(self) -> dict[str, Any]:
        lab = self.lab
        by_job: dict[str, list[Any]] = {}
        requests = lab.llm.requests
        for request in requests:
            mark = marker_of(request)
            if mark:
                by_job.setdefault(mark, []).append(request)
        marks = {job: f"TRCV{i}" for i, job in enumerate(self.receivers)}
        marks |= {job: f"TSND{i}" for i, job in enumerate(self.senders)}
        marks[self.parent] = "TPAR"

        accepted: list[tuple[str, str, str]] = []  # (kind, tag, receiver job)
        for tag, (job, word) in self.replies.items():
            if word in ACCEPTED:
                accepted.append(("reply", tag, job))
        for sender in self.senders:
            outcomes = tool_outcomes(by_job.get(marks[sender], []), lab.session(sender), "roost_send")
            for tag, result in outcomes.items():
                if tag in self.orders and result.split()[:1] and result.split()[0] in ACCEPTED:
                    accepted.append(("message", tag, self.orders[tag][1]))
        spawned = tool_outcomes(by_job.get("TPAR", []), lab.session(self.parent), "roost_spawn")
        for tag, result in spawned.items():
            if result.startswith("spawned "):
                accepted.append(("report", tag, self.parent))

        lost, duplicated = [], []
        sessions = {job: lab.session(job) for job in {a[2] for a in accepted}}
        texts = {
            job: [[message_text(m) for m in messages(r)] for r in by_job.get(marks[job], [])]
            for job in sessions
        }
        for kind, tag, job in accepted:
            needle = f"RESULT:{tag}" if kind == "report" else tag
            seen = [sum(needle in t for t in msgs) for msgs in texts[job]]
            in_session = sum(
                needle in json.dumps(e)
                for e in sessions[job]
                if e.get("type") in ("message", "custom_message")
            )
            if not any(seen):
                lost.append({"kind": kind, "tag": tag, "job": job, "in_session": in_session})
            elif max(seen) > 1 or in_session > 1:
                duplicated.append(
                    {
                        "kind": kind,
                        "tag": tag,
                        "job": job,
                        "max_in_request": max(seen),
                        "in_session": in_session,
                    }
                )
        repeated = continued = 0
        for reqs in by_job.values():
            keys = Counter(json.dumps(asked(r), sort_keys=True) for r in reqs)
            repeated += sum(n - 1 for n in keys.values())
            notes = {
                (i, message_text(m))
                for r in reqs
                for i, m in enumerate(messages(r))
                if message_text(m).startswith(NOTE)
            }
            continued += len(notes)
        self.accepted_by_kind = Counter(a[0] for a in accepted)
        return {
            "accepted": len(accepted),
            "lost": len(lost),
            "duplicated": len(duplicated),
            "lost_items": lost,
            "duplicated_items": duplicated,
            "accepted_by_kind": dict(self.accepted_by_kind),
            "model_calls": len(requests),
            "model_calls_repeated": repeated,
            "runs_continued": continued,
        }

    def run(self) -> dict[str, Any]:
        from roost.pi.compat import features_of
        from roost.pi.locate import find_pi

        t0 = time.monotonic()
        self.start()
        self.log(f"torture: jobs up after {time.monotonic() - t0:.1f}s; storm {self.duration}s")
        killer = threading.Thread(target=self.killer, daemon=True)
        t1 = time.monotonic()
        killer.start()
        self.storm()
        self.stop.set()
        killer.join()
        storm_s = time.monotonic() - t1
        with contextlib.suppress(Exception):
            self.start_daemon()  # whatever the killer left, roostd runs now
        self.log(f"torture: storm over ({dict(self.items)}, kills {dict(self.kills)}); settling")
        flushed = self.settle()
        counts = self.count()
        replays = self.replay_outcome()
        states = Counter(r.get("state") for r in self.jobs())
        return {
            "pi": features_of(find_pi()).label,
            "duration_s": round(time.monotonic() - t0, 1),
            "storm_s": round(storm_s, 1),
            "items": dict(self.items),
            "accepted": counts.pop("accepted"),
            "kills": dict(sorted(self.kills.items())),
            "kills_total": sum(self.kills.values()),
            "lost": counts.pop("lost"),
            "duplicated": counts.pop("duplicated"),
            **replays,
            **counts,
            "flushed": flushed,
            "job_states": dict(states),
            "errors": dict(self.errors),
        }

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.start_daemon()
        self.lab.close()


def failed(result: dict[str, Any]) -> bool:
    """Something was lost or doubled, a replay got past, or a mailbox file is not 0600."""
    return bool(
        result["lost"]
        or result["duplicated"]
        or result["replays_not_quarantined"]
        or result["mailbox_files_not_0600"]
    )


def torture(
    duration: float, rate: float, kill_every: float, seed: int = 1, keep: bool = False, **options: Any
) -> dict[str, Any]:
    """Run one torture and return its figures (the printed JSON)."""
    run = Torture(duration, rate, kill_every, seed, **options)
    try:
        result = run.run()
        if keep or failed(result):
            result["lab"] = str(run.lab.root)
            result["diagnostics"] = "kept in " + str(run.lab.root)
        return result
    finally:
        # Keep the evidence (the files; the processes are stopped) when asked or when it failed.
        broken = not locals().get("result") or failed(result)
        run.lab.keep = keep or bool(broken)
        run.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="storm seconds")
    parser.add_argument("--rate", type=float, default=3.0, help="items per second")
    parser.add_argument("--kill-every", type=float, default=3.0, help="mean seconds between kills")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--children", type=int, default=3, help="outstanding spawns at most")
    parser.add_argument(
        "--fault-share",
        type=float,
        default=0.3,
        help="share of kill ticks that arm a delivery-path fault instead",
    )
    parser.add_argument(
        "--replay-share",
        type=float,
        default=0.3,
        help="share of kill ticks that also replay a delivered item",
    )
    parser.add_argument("--keep", action="store_true", help="keep the lab's files")
    parser.add_argument("--ci", action="store_true", help=f"the short preset {CI} (~2 min in all)")
    args = parser.parse_args(argv)
    if args.ci:
        args.duration, args.rate, args.kill_every = CI["duration"], CI["rate"], CI["kill_every"]
    result = torture(
        args.duration,
        args.rate,
        args.kill_every,
        args.seed,
        keep=args.keep,
        children=args.children,
        fault_share=args.fault_share,
        replay_share=args.replay_share,
    )
    print(json.dumps(result, indent=1))
    return 1 if failed(result) else 0


if __name__ == "__main__":
    sys.exit(main())
