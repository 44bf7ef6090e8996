"""What roost.ts does with each event pushed to it (protocol.PUSHED_EVENTS, receiver
"extension"): the extension, loaded by node through pi's TypeScript loader (jiti) with a
recording `pi`, connects to a stand-in worker socket, which pushes every event; each must
become exactly the pi.sendMessage call pi's steering needs. Real pi runs it in the e2e tests;
this pins each event's call, `kick` included (no e2e run can time a stranded steer)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from roost.host import paths
from roost.pi.locate import node_binary
from roost.wire import protocol
from roost.wire.protocol import CUSTOM_TYPE, EXTENSION, NOTE_TYPE

REPO = Path(__file__).resolve().parents[2]
JITI = paths.pi_prefix() / "node_modules" / "jiti" / "lib" / "jiti.cjs"
NODE = node_binary()

pytestmark = pytest.mark.skipif(
    shutil.which(NODE) is None or not JITI.exists(),
    reason="needs node and the pinned pi install (scripts/setup)",
)

# The extension's imports pi provides, stubbed: these tests only push events.
STUBS = {
    "stub_typebox.cjs": "const any = new Proxy(function () {}, { get: () => any, apply: () => ({}) });\n"
    "module.exports = { Type: any };\n",
    "stub_tui.cjs": "class Text { constructor(text) { this.text = text; } }\nmodule.exports = { Text };\n",
}
DRIVER = r"""
const { createJiti } = require(process.env.JITI_PATH);
const jiti = createJiti(__filename, { moduleCache: false, alias: {
  "typebox": process.env.STUB_TYPEBOX, "@mariozechner/pi-tui": process.env.STUB_TUI } });
(async () => {
  const m = await jiti.import(process.env.ROOST_TS);
  const on = {};
  const pi = {
    on: (name, fn) => { on[name] = fn; },
    registerCommand() {}, registerMessageRenderer() {}, registerTool() {},
    sendMessage: (message, options) => {
      process.stdout.write(JSON.stringify({ message, options }) + "\n");
      return Promise.resolve();
    },
  };
  m.default(pi);
  await on.session_start({}, { sessionManager: { getSessionFile: () => undefined } });
})();
"""

DETAILS = {"seq": 7, "kind": "message", "title": "✉ from a", "body": "hi"}
# Each event pushed, and the pi.sendMessage call it must make (message, options).
CASES: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
    (
        protocol.event("inject", content="<envelope>", details=DETAILS),
        {
            "message": {
                "customType": CUSTOM_TYPE,
                "content": "<envelope>",
                "display": True,
                "details": DETAILS,
            },
            "options": {"deliverAs": "steer", "triggerTurn": True},
        },
    ),
    (
        protocol.event("deliver", content="<fg envelope>", details=DETAILS),
        {
            "message": {
                "customType": CUSTOM_TYPE,
                "content": "<fg envelope>",
                "display": True,
                "details": DETAILS,
            },
            "options": {"deliverAs": "steer", "triggerTurn": True},
        },
    ),
    (
        protocol.event("note", content="continue"),
        {
            "message": {"customType": NOTE_TYPE, "content": "continue", "display": True, "details": {}},
            "options": {"triggerTurn": True},
        },
    ),
    (
        protocol.event("budget_note", content="80% used", steer=True),
        {
            "message": {"customType": NOTE_TYPE, "content": "80% used", "display": True, "details": {}},
            "options": {"deliverAs": "steer", "triggerTurn": True},
        },
    ),
    (
        protocol.event("budget_note", content="90% used", steer=False),
        {
            "message": {"customType": NOTE_TYPE, "content": "90% used", "display": True, "details": {}},
            "options": {"triggerTurn": False},
        },
    ),
    (
        protocol.event("kick"),
        {
            "message": {
                "customType": "pi-roost-kick",
                "content": "(queued input follows)",
                "display": False,
                "details": {},
            },
            "options": {"triggerTurn": True},
        },
    ),
    # Not declared for the extension: ignored (an object's own keys only, no prototype's).
    ({"type": "event", "event": "constructor"}, None),
    ({"type": "event", "event": "stop", "reason": "x"}, None),
    (
        protocol.event("note", content="last"),  # the next call is this one's
        {
            "message": {"customType": NOTE_TYPE, "content": "last", "display": True, "details": {}},
            "options": {"triggerTurn": True},
        },
    ),
]


def test_each_event_pushed_to_the_extension_becomes_its_send_message(tmp_path: Path) -> None:
    assert {f["event"] for f, call in CASES if call} == protocol.events_to(EXTENSION)
    roost_ts = REPO / "roost" / "extension" / "roost.ts"
    for name, text in STUBS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "driver.cjs").write_text(DRIVER, encoding="utf-8")
    (tmp_path / "agent").mkdir()
    sock_path = tmp_path / "ext.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    server.listen(1)
    server.settimeout(60)

    def worker() -> None:  # the worker's side: greet, accept ext_hello, push every event
        conn, _ = server.accept()
        with conn, conn.makefile("rwb") as stream:
            stream.write(protocol.encode(protocol.greeting("roost-worker")))
            stream.flush()
            hello = protocol.decode(stream.readline())
            assert hello["op"] == "ext_hello"
            stream.write(protocol.encode(protocol.ok(hello["id"], {"job": "j1"})))
            for frame, _call in CASES:
                stream.write(protocol.encode(frame))
            stream.flush()
            stream.readline()  # until node exits

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "JITI_PATH": str(JITI),
        "ROOST_TS": str(roost_ts),
        "STUB_TYPEBOX": str(tmp_path / "stub_typebox.cjs"),
        "STUB_TUI": str(tmp_path / "stub_tui.cjs"),
        "ROOST_EXT_SOCK": str(sock_path),
        "ROOST_HOME": str(tmp_path / "home"),
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
    }
    node = subprocess.Popen(
        [NODE, str(tmp_path / "driver.cjs")],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert node.stdout is not None
        expected = [call for _frame, call in CASES if call is not None]
        calls = [json.loads(node.stdout.readline() or "null") for _ in expected]
        assert calls == expected, node.stderr.read() if None in calls else calls
    finally:
        node.kill()
        node.wait()
        server.close()
        thread.join(5)
