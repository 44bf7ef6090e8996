"""Session writer locks across languages: roost/extension/session_lock.ts (run by node through
pi's own TypeScript loader, jiti) against roost.locks, and the relative import in real pi."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from kit.testpi import require_pi

from roost.host import paths
from roost.locks import SessionLock, SessionLocked, lock_path_for
from roost.pi.locate import node_binary

REPO = Path(__file__).resolve().parents[2]
LOCK_TS = REPO / "roost" / "extension" / "session_lock.ts"
NODE_MODULES = paths.pi_prefix() / "node_modules"
JITI = NODE_MODULES / "jiti" / "lib" / "jiti.cjs"
NODE = node_binary()  # the node roost runs pi with (pi 1.x needs a newer one than the system's)

pytestmark = pytest.mark.skipif(
    shutil.which(NODE) is None or not JITI.exists(),
    reason="needs node and the pinned pi install (scripts/setup)",
)

# Both drivers speak one JSON line per command and answer one JSON line.
NODE_DRIVER = r"""
const { createJiti } = require(process.env.JITI_PATH);
const readline = require("node:readline");
const jiti = createJiti(__filename, { moduleCache: false });
(async () => {
  const m = await jiti.import(process.env.SESSION_LOCK_TS);
  const send = (v) => process.stdout.write(JSON.stringify(v) + "\n");
  let lock = null;
  send({ pid: process.pid });
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const c = JSON.parse(line);
    try {
      if (c.at) while (Date.now() / 1000 < c.at) {}
      if (c.op === "new") {
        lock = new m.SessionLock(c.session, c.locks, c.peer ?? null);
        send({ path: lock.path, session: lock.sessionPath });
      } else if (c.op === "acquire") send({ ok: lock.acquire() });
      else if (c.op === "release") { lock.release(); send({ ok: true }); }
      else if (c.op === "holder") send({ holder: lock.holder() });
      else if (c.op === "start_time") send({ value: m.processStartTime(c.pid) });
      else if (c.op === "lock_path") send({ path: m.lockPathFor(c.session, c.locks) });
      else if (c.op === "exit") process.exit(0);
      else send({ error: "unknown op " + c.op });
    } catch (e) {
      send({ error: String((e && e.stack) || e) });
    }
  }
})();
"""

PY_DRIVER = r"""
import json, os, sys, time
from roost.locks import SessionLock
def send(v):
    sys.stdout.write(json.dumps(v) + "\n")
    sys.stdout.flush()
send({"pid": os.getpid()})
lock = None
for line in sys.stdin:
    c = json.loads(line)
    if c.get("at"):
        time.sleep(max(0.0, c["at"] - time.time()))
    if c["op"] == "new":
        os.environ["ROOST_HOME"] = os.path.dirname(c["locks"])
        lock = SessionLock(c["session"], peer=c.get("peer"))
        send({"path": str(lock.path)})
    elif c["op"] == "acquire":
        send({"ok": lock.acquire()})
    elif c["op"] == "release":
        lock.release()
        send({"ok": True})
"""

EXTENSION = r"""
import * as fs from "node:fs";
import { SessionLock, processStartTime } from "./session_lock.ts";

export default function (pi: unknown) {
	const env = process.env as Record<string, string>;
	const lock = new SessionLock(env.ROOST_TEST_SESSION, env.ROOST_TEST_LOCKS, "pi-ext");
	const ok = lock.acquire();
	const startTime = processStartTime(process.pid);
	fs.writeFileSync(env.ROOST_TEST_MARKER, JSON.stringify({ ok, pid: process.pid, startTime }));
}
"""


class Driver:
    """A lock driver process (node or python) answering JSON lines."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        pipe = subprocess.PIPE
        self.proc = subprocess.Popen(argv, stdin=pipe, stdout=pipe, text=True, env=env, cwd=cwd)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.pid: int = self.recv()["pid"]

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = 15.0) -> dict[str, Any]:
        reply = json.loads(self.lines.get(timeout=timeout))
        assert "error" not in reply, reply["error"]
        return reply

    def call(self, **cmd: Any) -> dict[str, Any]:
        self.send(**cmd)
        return self.recv()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def drivers(tmp_path: Path) -> Iterator[Callable[[str], Driver]]:
    started: list[Driver] = []
    script = tmp_path / "driver.cjs"
    script.write_text(NODE_DRIVER)

    def start(kind: str) -> Driver:
        env = {
            **os.environ,
            "JITI_PATH": str(JITI),
            "SESSION_LOCK_TS": str(LOCK_TS),
            "PYTHONPATH": str(REPO),
        }
        argv = [NODE, str(script)] if kind == "node" else [sys.executable, "-c", PY_DRIVER]
        d = Driver(argv, env, tmp_path)
        started.append(d)
        return d

    yield start
    for d in started:
        d.close()


def node_lock(d: Driver, home: Path, session: Path, peer: str | None = None) -> None:
    reply = d.call(op="new", session=str(session), locks=str(home / "locks"), peer=peer)
    assert reply == {"path": str(lock_path_for(session)), "session": str(session)}


def test_start_times_agree(drivers, tmp_path: Path) -> None:
    node = drivers("node")
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        for pid in (node.pid, os.getpid(), sleeper.pid, 1):
            assert node.call(op="start_time", pid=pid)["value"] == psutil.Process(pid).create_time()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert node.call(op="start_time", pid=sleeper.pid)["value"] is None


def test_lock_paths_agree(drivers, home: Path, tmp_path: Path) -> None:
    node = drivers("node")  # its cwd is tmp_path
    for given, absolute in [
        ("s.jsonl", tmp_path / "s.jsonl"),
        ("a/../b/./s.jsonl", tmp_path / "b" / "s.jsonl"),
        (f"/{tmp_path}/s.jsonl", tmp_path / "s.jsonl"),
        (f"{tmp_path}/dir/", tmp_path / "dir"),
        (f"{tmp_path}/ünï cödé.jsonl", tmp_path / "ünï cödé.jsonl"),
    ]:
        reply = node.call(op="lock_path", session=given, locks=str(home / "locks"))
        assert reply["path"] == str(lock_path_for(absolute)), given


def test_node_holds_python_is_refused(drivers, home: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    node = drivers("node")
    node_lock(node, home, session, peer="fg-1")
    assert node.call(op="acquire")["ok"]
    assert node.call(op="acquire")["ok"]  # idempotent
    lock = SessionLock(session)
    h = lock.holder()
    assert h is not None and (h.pid, h.peer, h.session) == (node.pid, "fg-1", str(session))
    assert h.start_time == psutil.Process(node.pid).create_time()
    assert not lock.acquire()
    with pytest.raises(SessionLocked, match=f"pid {node.pid} \\(peer fg-1\\)"), lock:
        pass
    assert node.call(op="holder")["holder"]["pid"] == node.pid
    node.call(op="release")
    assert lock.holder() is None
    assert lock.acquire()
    lock.release()


def test_python_holds_node_is_refused(drivers, home: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    node = drivers("node")
    node_lock(node, home, session)
    with SessionLock(session, peer="job-9"):
        assert not node.call(op="acquire")["ok"]
        holder = node.call(op="holder")["holder"]
        assert (holder["pid"], holder["peer"]) == (os.getpid(), "job-9")
        node.call(op="release")  # not its lock: must not remove it
        assert SessionLock(session).holder() is not None
    assert node.call(op="acquire")["ok"]


def test_node_takes_over_killed_python_lock(drivers, home: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    py = drivers("python")
    py.call(op="new", session=str(session), locks=str(home / "locks"))
    assert py.call(op="acquire")["ok"]
    node = drivers("node")
    node_lock(node, home, session)
    assert not node.call(op="acquire")["ok"]
    py.proc.send_signal(signal.SIGKILL)
    py.proc.wait()
    assert node.call(op="holder")["holder"] is None
    assert node.call(op="acquire")["ok"]
    h = SessionLock(session).holder()
    assert h is not None and h.pid == node.pid
    assert sorted(os.listdir(home / "locks")) == [lock_path_for(session).name]


def test_python_takes_over_killed_node_lock(drivers, home: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    node = drivers("node")
    node_lock(node, home, session)
    assert node.call(op="acquire")["ok"]
    node.proc.send_signal(signal.SIGKILL)  # no exit handlers run
    node.proc.wait()
    lock = SessionLock(session)
    assert lock.path.exists() and lock.holder() is None
    assert lock.acquire()


def test_node_releases_on_exit(drivers, home: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    node = drivers("node")
    node_lock(node, home, session)
    assert node.call(op="acquire")["ok"]
    assert lock_path_for(session).exists()
    node.send(op="exit")
    assert node.proc.wait(10) == 0
    assert not lock_path_for(session).exists()


def test_cross_language_race(drivers, home: Path, tmp_path: Path) -> None:
    """Two node and two python contenders, fresh and stale locks: one winner per round."""
    contenders = [drivers("node"), drivers("python"), drivers("node"), drivers("python")]
    dead = subprocess.Popen(["true"])
    dead.wait()
    for r in range(20):
        session = tmp_path / f"race-{r}.jsonl"
        for d in contenders:
            d.call(op="new", session=str(session), locks=str(home / "locks"))
        path = lock_path_for(session)
        if r % 2:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"pid": dead.pid, "startTime": 1.0, "peer": None}))
        at = time.time() + 0.1
        for d in contenders:
            d.send(op="acquire", at=at)
        won = [d.recv()["ok"] for d in contenders]
        assert sorted(won) == [False, False, False, True], f"round {r}: {won}"
        winner = contenders[won.index(True)]
        h = SessionLock(session).holder()
        assert h is not None and h.pid == winner.pid
        for d in contenders:
            d.call(op="release")
        assert sorted(os.listdir(home / "locks")) == []


def test_pi_extension_imports_session_lock_relatively(home: Path, tmp_path: Path) -> None:
    """A pi extension beside session_lock.ts imports it as "./session_lock.ts" in real pi."""
    ext_dir = tmp_path / "ext"
    ext_dir.mkdir()
    shutil.copy(LOCK_TS, ext_dir / "session_lock.ts")
    (ext_dir / "probe.ts").write_text(EXTENSION)
    session, marker = tmp_path / "s.jsonl", tmp_path / "marker.json"
    env = {
        **os.environ,
        "HOME": str(tmp_path / "pihome"),
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
        "PI_OFFLINE": "1",
        "ROOST_TEST_SESSION": str(session),
        "ROOST_TEST_LOCKS": str(home / "locks"),
        "ROOST_TEST_MARKER": str(marker),
    }
    argv = [*require_pi(), "--mode", "rpc", "--no-session", "--offline", "-e", str(ext_dir / "probe.ts")]
    pipe = subprocess.PIPE
    pi = subprocess.Popen(argv, stdin=pipe, stdout=pipe, stderr=pipe, text=True, env=env, cwd=tmp_path)
    try:
        assert pi.stdin is not None and pi.stdout is not None
        pi.stdin.write(json.dumps({"type": "get_state"}) + "\n")
        pi.stdin.flush()
        response = json.loads(pi.stdout.readline())
        assert response["type"] == "response" and response["success"], response
        probe = json.loads(marker.read_text())
        assert probe["ok"] and probe["pid"] == pi.pid
        assert probe["startTime"] == psutil.Process(pi.pid).create_time()
        h = SessionLock(session).holder()
        assert h is not None and (h.pid, h.peer) == (pi.pid, "pi-ext")
        assert not SessionLock(session).acquire()
        pi.stdin.close()  # pi exits 0 on EOF, and its exit handler releases the lock
        assert pi.wait(20) == 0
        assert not lock_path_for(session).exists()
    finally:
        if pi.poll() is None:
            pi.kill()
        pi.wait()
