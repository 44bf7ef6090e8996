"""`roost web` over a made-up world, for layout tests and the docs' screenshots: 24 jobs in
four folders (worktree jobs, waiting, failed, scheduled, budgeted ones), a transcript with
Markdown, an agent message, a report and hostile text, a worktree with a diff, an event log
and inbox entries; no roostd (its requests answered from the table), a real HTTP server
(uvicorn, in a thread) that a real browser can open.

```python
with Showcase(tmp_path) as show:
    driver.get(show.pair_url())        # paired: the cookie set
    driver.get(show.url + "/")
```
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from roost.wire.protocol import CUSTOM_TYPE, RequestError

SHOWN_REPO = "/home/dev/src/parser"
"""Where the worktree job's repository is said to be (the real one is in a temp dir: the
screenshots show no path of the machine that took them)."""
LONG = "roost/fix-the-very-long-branch-name-that-a-model-chose-for-its-worktree-9f3c2a1b"
MARKDOWN = """# Review

The change is **mostly fine**; two notes:

| file | verdict |
|------|---------|
| `parser.py` | ok |
| `render.py` | *needs a test* |

```python
def greet(name: str) -> str:
    return f"hello {name}"
```

See [the docs](https://example.org/docs) and [this](javascript:alert(1)).
![a chart](https://tracker.example.net/pixel.png)

<div onclick="alert(1)">an HTML block</div>
<script>alert("x")</script>
"""


def _row(n: int, **over: Any) -> dict[str, Any]:
    base = {
        "id": f"{n:08x}"[-8:],
        "name": f"job-{n}",
        "kind": "pi",
        "state": "done",
        "dir": "/nonexistent",
        "status": "",
        "summary": "wrote the tests and they pass",
        "question": None,
        "dialog": False,
        "options": None,
        "cwd": "/home/dev/src/roost",
        "session": None,
        "parent": None,
        "agent": None,
        "parentSession": None,
        "rootSession": None,
        "worktree": None,
        "pending": {"replies": 0, "agent": 0},
        "schedule": None,
        "result": None,
        "usage": {"cost": 0.0123 * (n % 64), "budget": None},
        "created": f"2026-12-06T0{n // 10}:{n % 10}0:00.000Z",
        "updated": "2026-12-06T09:00:00.000Z",
        "error": None,
    }
    return {**base, **over}


def rows(session: str, worktree: dict[str, Any]) -> list[dict[str, Any]]:
    """The world's jobs (ids `1a2b3c01`..): the first is the one with the transcript."""
    folders = [
        "/home/dev/src/roost",
        "/home/dev/src/website",
        "/home/dev/work/infra/terraform",
        "/home/dev/notes",
    ]
    out = [
        _row(
            0x1A2B3C01,
            name="review-parser",
            session=session,
            state="needs_input",
            question="Should I also rename the old entry points, or keep them as aliases?",
            worktree={**worktree, "origin": SHOWN_REPO},
            cwd=SHOWN_REPO,
            usage={"cost": 0.4213, "budget": 2.0},
        )
    ]
    states = ["done", "running", "failed", "needs_input", "done", "stopped", "reaped", "queued"]
    for i in range(2, 25):
        state = states[i % len(states)]
        over: dict[str, Any] = {
            "state": state,
            "cwd": folders[i % len(folders)],
            "name": f"{['tests', 'docs', 'lint', 'deps', 'bench', 'triage'][i % 6]}-{i}",
        }
        if state == "failed":
            over["error"] = "budget exhausted: $1.01 of $1.00" if i % 2 else "pi exited 1: model overloaded"
        if state == "needs_input":
            over["question"] = "Which of the two migrations should run first?"
        if state == "running":
            over["status"], over["summary"] = "running tool bash", ""
        if i % 5 == 0:
            over["schedule"] = {"name": "nightly", "cause": "cron", "due": "2026-12-06T03:00:00Z"}
        if i % 7 == 0:
            over["result"] = {"ok": True}
            over["usage"] = {"cost": 0.05, "budget": 1.0}
        out.append(_row(0x1A2B3C00 + i, **over))
    # A worktree job of the first folder, and a child under the first job.
    out.append(
        _row(
            0x1A2B3C40,
            name="wt-refactor",
            state="done",
            cwd="/tmp/rh/worktrees/1a2b3c40",
            worktree={
                "path": "/tmp/rh/worktrees/1a2b3c40",
                "branch": "roost/wt-refactor",
                "base": "0" * 40,
                "origin": folders[0],
            },
        )
    )
    out.append(
        _row(
            0x1A2B3C41,
            name="child-of-review",
            state="running",
            status="writing",
            summary="",
            parentSession=session,
            cwd=SHOWN_REPO,
        )
    )
    return out


def transcript() -> list[dict[str, Any]]:
    def at(n: int) -> str:
        return f"2026-12-06T09:{n:02d}:00.000Z"

    def message(n: int, role: str, content: Any, **more: Any) -> dict[str, Any]:
        return {"type": "message", "timestamp": at(n), "message": {"role": role, "content": content, **more}}

    body = "Found 3 call sites; `parse()` is the only public one.\n\n- a.py: 2\n- b.py: 1"
    envelope = (
        '<agent-message from="scout" id="5e5e5e5e" relation="child" kind="message">\n'
        f"{body}\n</agent-message>\nThis comes from another agent session, not from the user."
    )
    report = "state: done\n\nAll **12** tests pass."
    return [
        {"type": "session", "version": 3, "id": "s", "timestamp": at(0), "cwd": "/tmp"},
        message(1, "user", "Review the parser change and say what you think."),
        message(
            2,
            "assistant",
            [
                {
                    "type": "toolCall",
                    "id": "t1",
                    "name": "bash",
                    "arguments": {"command": "git diff --stat HEAD~1"},
                }
            ],
        ),
        message(
            3,
            "toolResult",
            [{"type": "text", "text": " parser.py | 12 ++++++------\n 1 file changed"}],
            toolName="bash",
            toolCallId="t1",
        ),
        {
            "type": "custom_message",
            "customType": CUSTOM_TYPE,
            "timestamp": at(4),
            "display": True,
            "content": envelope,
            "details": {
                "kind": "message",
                "relation": "child",
                "from": {"id": "5e5e5e5e", "name": "scout"},
                "title": "✉ message from scout (child)",
                "body": body,
            },
        },
        {
            "type": "custom_message",
            "customType": CUSTOM_TYPE,
            "timestamp": at(5),
            "display": True,
            "content": report,
            "details": {
                "kind": "report",
                "relation": "child",
                "from": {"id": "6f6f6f6f", "name": "tester"},
                "title": "✉ report from tester (child)",
                "body": report,
            },
        },
        message(6, "assistant", [{"type": "text", "text": MARKDOWN}]),
    ]


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_worktree(root: Path) -> dict[str, Any]:
    """A repository and a worktree on a long branch with one commit: the diff page's."""
    repo, path = root / "repo", root / "worktrees" / "1a2b3c01"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "parser.py").write_text("def parse(text):\n    return text.split()\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    base = _git(repo, "rev-parse", "HEAD")
    _git(repo, "worktree", "add", "-q", "-b", LONG, str(path))
    (path / "parser.py").write_text(
        "def parse(text: str) -> list[str]:\n"
        '    """Split `text` into words (a very long line to see how the '
        "page wraps it on a phone: " + "x" * 60 + ')."""\n'
        "    return text.split()\n"
    )
    _git(path, "commit", "-q", "-am", "type the parser")
    return {"path": str(path), "branch": LONG, "base": base, "origin": str(repo)}


def events() -> list[dict[str, Any]]:
    out = []
    for seq in range(1, 30):
        out.append(
            {
                "seq": seq,
                "time": f"2026-12-06T09:{seq:02d}:00.000Z",
                "type": ["job.state", "job.created", "job.failed"][seq % 3],
                "job": {"id": "1a2b3c01", "name": "review-parser"},
                "state": "needs_input",
                "dialog": False,
                "cwd": "/home/dev/src/roost/packages/parser",
                "reason": "asked: Should I also rename the old entry points, or keep them?",
            }
        )
    return out


class Showcase:
    """The made-up world, served on 127.0.0.1 (a free port) until the block ends."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = 0
        self.url = ""
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> Showcase:
        import uvicorn

        from roost.web import bridge
        from roost.web.app import create_app
        from roost.web.devices import Store
        from roost.web.guard import Settings

        home = self.root / "rh"
        home.mkdir(parents=True, exist_ok=True)
        self._saved["ROOST_HOME"] = os.environ.get("ROOST_HOME")
        os.environ["ROOST_HOME"] = str(home)
        session = self.root / "session.jsonl"
        session.write_text("".join(json.dumps(e) + "\n" for e in transcript()))
        (home / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events()))
        table = {r["id"]: r for r in rows(str(session), make_worktree(self.root))}
        self.rows = table

        async def request(op: str, **args: Any) -> dict[str, Any]:
            if op == "show":
                wanted = str(args.get("job"))
                for row in table.values():
                    if wanted in (row["id"], row["name"]):
                        return {"job": row}
                raise RequestError("not_found", f"no job {wanted}")
            if op == "list":
                return {"jobs": list(table.values())}
            if op == "inbox":
                return {"entries": self.inbox()}
            return {}

        class Hub(bridge.Hub):
            def start(self) -> None:
                import asyncio

                self._loop = asyncio.get_running_loop()  # `touch` posts to it
                self.rows, self.connected = table, True

            def stop(self) -> None:
                pass

        self._saved["request"] = bridge.request
        bridge.request = request
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.store = Store()
        settings = Settings(hosts=frozenset({f"127.0.0.1:{self.port}"}), store=self.store)
        hub = self.hub = Hub()
        hub.rows, hub.connected = table, True
        config = uvicorn.Config(
            create_app(settings, hub), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline:
                raise TimeoutError("the showcase server did not start")
            time.sleep(0.05)
        return self

    def inbox(self) -> list[dict[str, Any]]:
        waiting = [r for r in self.rows.values() if r["state"] == "needs_input"]
        out = [
            {
                "id": f"q-{r['id']}",
                "kind": "question",
                "text": r["question"],
                "job": {"id": r["id"], "name": r["name"]},
            }
            for r in waiting
        ]
        failed = [r for r in self.rows.values() if r["state"] == "failed"]
        out += [
            {
                "id": f"b-{failed[0]['id']}",
                "kind": "budget",
                "text": "budget exhausted: $1.01 of $1.00",
                "job": {"id": failed[0]["id"], "name": failed[0]["name"]},
            },
            {
                "id": "c-1a2b3c01",
                "kind": "conflict",
                "text": "merging the branch into main conflicts in parser.py",
                "job": {"id": "1a2b3c01", "name": "review-parser"},
            },
        ]
        return out

    def touch(self) -> None:
        """The rows changed (edit `rows` first): every live page is told, as by roostd."""
        self.hub._post(list(self.rows.values()), True)

    def pair_url(self) -> str:
        return f"{self.url}/pair?code={self.store.new_code()}"

    def __exit__(self, *exc: object) -> None:
        from roost.web import bridge

        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        bridge.request = self._saved["request"]
        if self._saved.get("ROOST_HOME") is None:
            os.environ.pop("ROOST_HOME", None)
        else:
            os.environ["ROOST_HOME"] = self._saved["ROOST_HOME"]
