"""`roost demo`: the whole story on the real pi and roost's scripted local model.

Everything runs in a temporary ROOST_HOME and pi agent dir (no API key, no network but
127.0.0.1): a job answers and asks the user, a reply round trip, a message between two
jobs arriving mid-turn, and a parent that spawns two children — one asks the parent a
question and gets its answer by roost_send, both report back — with the tree shown as it
changes; then costs (the scripted model has prices) and a child stopped by its budget, whose
`ended:` report reaches its parent; then two children in their own git worktrees change one
line two ways: one branch merges, the other conflicts and is reported (nothing changed); then
a fan-in: two reviewers answer in a JSON schema (one is repaired after roost's note), and a
summary waits for both, gets their results, and gives its own. The demo's own roost.json
allows external reach (so two unrelated jobs can talk) and lets the model choose worktrees
for children.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from roost.cli.demomodel import BUILDER, last_user, play_answer, script
from roost.fakellm import FakeLLM, first_user_contains
from roost.fakellm.requests import envelopes, message_text, messages
from roost.fakellm.sandbox import Sandbox
from roost.pi.locate import PiNotFound, find_pi
from roost.wire.client import Client, connect

T = TypeVar("T")

DEMO_SETTINGS = {"agentExternalMessages": True, "reapAfterSeconds": 600, "agentChildWorktrees": "ask"}
# The scripted model's prices (per million tokens, as a models.json `cost`), so the demo
# shows costs; every request reports usage (estimated from the sizes unless a rule says).
DEMO_PRICES = {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}
WAIT_NOTICE = 5.0
"""Seconds: a part that waits longer than this says what it waits for (then every
WAIT_NOTICE_EVERY s), so the demo never looks hung."""
WAIT_NOTICE_EVERY = 15.0
SANDBOX_FILE = "roost-demo.json"
"""In a kept sandbox's root: what `roost demo --end` needs (and the mark that it is one)."""
SOCKET_ROOM = 60
"""The longest TMPDIR a sandbox goes under: a job's ext.sock, ROOT/rh/jobs/ID/ext.sock, must
fit a Unix socket path (107 bytes); a longer TMPDIR falls back to /tmp."""


def say(line: str = "") -> None:
    print(line, flush=True)


def step(title: str) -> None:
    say()
    say(f"━━ {title}")


def reporters(requests: Iterable[Any], marker: str) -> set[str]:
    """Who the job whose task has `marker` got a report from, in any of its model requests:
    every report of every user message (two reports arriving in one turn are one message
    with two envelopes, or two messages; either way both count)."""
    found: set[str] = set()
    for request in requests:
        if not first_user_contains(marker)(request):
            continue
        for message in messages(request):
            if message.get("role") == "user":
                found.update(
                    env.get("from", "?")
                    for env in envelopes(message_text(message))
                    if env.get("kind") == "report"
                )
    return found


def until(what: str, check: Callable[[], T], timeout: float, interval: float = 0.3) -> T:
    """Poll `check` until it returns something truthy, and return that. A wait longer than
    WAIT_NOTICE says so (`… waiting for WHAT (N s)`), then every WAIT_NOTICE_EVERY s; at
    `timeout` it says it gives up and returns the last (falsy) value: the story goes on."""
    start = time.monotonic()
    notice = start + WAIT_NOTICE
    while True:
        value = check()
        if value:
            return value
        now = time.monotonic()
        if now - start >= timeout:
            say(f"  … gave up waiting for {what} after {now - start:.0f} s; going on")
            return value
        if now >= notice:
            say(f"  … waiting for {what} ({now - start:.0f} s)")
            notice = now + WAIT_NOTICE_EVERY
        time.sleep(interval)


def table(client: Client, tree: bool = False) -> None:
    from roost.display import views

    views.print_table(client.request("list")["jobs"], tree=tree)


def run_demo(keep: bool = False, scenes: bool = True) -> int:
    """The story (`scenes`), in a sandbox deleted after it, or (`keep`) left running to play
    in: its roostd, its jobs and the scripted model (a process of its own); `--end` ends it."""
    try:
        find_pi()
    except PiNotFound as exc:
        say(f"roost demo: {exc}")
        return 1
    tmp = tempfile.gettempdir()
    if len(tmp) > SOCKET_ROOM:
        say(f"roost demo: TMPDIR {tmp} is too long for the sandbox's sockets; using /tmp")
        tmp = "/tmp"
    box = Sandbox(
        llm=True,
        settings=DEMO_SETTINGS,
        prices=DEMO_PRICES,
        prefix="roost-demo-",
        hold_timeout=300.0,
        tmp=tmp,
    )
    work = box.work
    (work / "src").mkdir(parents=True)
    (work / "README").write_text("A demo project.\n")
    script(box.llm)
    box.llm.set_default(play_answer)
    box.env.pop("NO_COLOR", None)  # the demo's own tables keep their colours
    box.activate()  # roostd, started by connect() below, and its jobs run in the box
    say(
        f"roost demo: state in {box.root} (ROOST_HOME, pi agent dir); model: scripted, "
        f"local ({box.llm.base_url})"
    )
    if scenes:
        say(
            "this demo's roost.json allows external reach (agentExternalMessages: true) so "
            "two unrelated jobs can talk"
        )
    client = connect()
    kept = False
    try:
        code = _story(client, work, box.llm) if scenes else 0
        if keep:
            client.close()
            kept = _keep(box)
            return code if kept else 1
        return code
    finally:
        if not kept:
            with contextlib.suppress(Exception):
                client.request("shutdown", jobs=True)
            client.close()
            box.close()


# -- play mode: a kept sandbox ----------------------------------------------------------------
def _keep(box: Sandbox) -> bool:
    """Hand the model over to a process of its own (on the same port, so pi's models.json
    stays true) and leave the sandbox: its file, then the lines to use it and end it."""
    port, url = box.llm.port, box.llm.base_url
    box.llm.stop()
    log = open(box.root / "model.log", "ab")  # noqa: SIM115 - the child's, from here on
    with log:
        model = subprocess.Popen(
            [sys.executable, "-m", "roost.cli.demomodel", str(box.root), str(port)],
            env=box.env,
            cwd=box.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    from roost.host import procid

    start = procid.live_start_time(model.pid)
    try:
        _connectable(port, model)
    except OSError as exc:
        say(f"roost demo: the scripted model did not start ({exc}); see {box.root / 'model.log'}")
        with contextlib.suppress(ProcessLookupError):
            model.kill()
        return False
    (box.root / SANDBOX_FILE).write_text(
        json.dumps(
            {
                "roostHome": str(box.roost_home),
                "agentDir": str(box.agent_dir),
                "model": {"pid": model.pid, "start": start, "port": port},
            }
        )
        + "\n"
    )
    exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in sandbox_env(box).items())
    say()
    say(
        "━━ the sandbox keeps running: its roostd, its jobs and the scripted model (pid "
        f"{model.pid}, {url}). To use it, in a shell:"
    )
    say(f"  export {exports}")
    say("  roost view")
    say(
        "new jobs and replies there (roost run '…', roost reply JOB '…') get the scripted "
        "model's answers; no API key, nothing leaves 127.0.0.1. End it (its jobs, roostd, the "
        "model, and the directory) with:"
    )
    say(f"  roost demo --end          (or: roost demo --end {shlex.quote(str(box.root))})")
    return True


def sandbox_env(box: Sandbox) -> dict[str, str]:
    """What a shell needs to use a kept sandbox: its ROOST_HOME, its pi agent dir (the
    scripted model's models.json, the demo's roost.json), pi offline."""
    return {
        "ROOST_HOME": str(box.roost_home),
        "PI_CODING_AGENT_DIR": str(box.agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
    }


def _connectable(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise OSError(f"it exited with {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # start-up only


def end_sandbox(directory: str | None) -> int:
    """`roost demo --end [DIR]`: stop a kept sandbox's jobs, roostd and model, and delete it.
    DIR is the sandbox or its ROOST_HOME (default: ROOST_HOME); a directory without the
    sandbox file is refused, never deleted."""
    from roost.cli.commands.daemon import live_workers, stop_workers
    from roost.host.procid import alive, same_process, stop_exact
    from roost.wire.client import DaemonUnavailable, connect

    given = directory or os.environ.get("ROOST_HOME")
    if not given:
        say(
            "roost demo --end: no sandbox named: give its DIR, or set ROOST_HOME to its "
            "ROOST_HOME (the export line `roost demo --keep` printed)"
        )
        return 2
    path = Path(given).expanduser().absolute()
    root = next((p for p in (path, path.parent) if (p / SANDBOX_FILE).is_file()), None)
    if root is None:
        say(
            f"roost demo --end: {path} is not a sandbox of `roost demo --keep` (no "
            f"{SANDBOX_FILE}); nothing done"
        )
        return 1
    try:
        info = json.loads((root / SANDBOX_FILE).read_text())
        home = Path(info["roostHome"])
        model = info["model"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        say(f"roost demo --end: {root / SANDBOX_FILE} is unreadable ({exc}); nothing done")
        return 1
    if home.parent != root:
        say(f"roost demo --end: {root / SANDBOX_FILE} names a ROOST_HOME outside it; nothing done")
        return 1
    os.environ["ROOST_HOME"] = str(home)
    os.environ["PI_CODING_AGENT_DIR"] = str(info.get("agentDir") or os.environ.get("PI_CODING_AGENT_DIR", ""))
    try:
        client = connect(autostart=False)
    except DaemonUnavailable:
        client = None
    if client is not None:
        with client:
            pid = client.request("status")["pid"]
            client.request("shutdown", timeout=120, jobs=True)
        deadline = time.monotonic() + 20
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    stop_workers(live_workers())  # a worker roostd did not know of, or no roostd
    if same_process(model.get("pid"), model.get("start")):
        stop_exact(model["pid"], model["start"], 5.0)
    shutil.rmtree(root, ignore_errors=True)
    if root.exists():
        say(f"roost demo --end: could not delete all of {root}")
        return 1
    say(f"sandbox {root} ended: its jobs, roostd and scripted model stopped, and deleted")
    return 0


def _story(client: Client, work: Path, llm: FakeLLM) -> int:
    cwd = str(work)
    step("1. a background job: it looks around, answers, and asks you something")
    greeter = client.request("run", task="[greeter] Look at this project.", name="greeter", cwd=cwd)
    say(f"$ roost run --name greeter '…'   → {greeter['id']}")
    _wait(client, greeter["id"], "greeter")
    table(client)
    step("2. a reply round trip")
    outcome = client.request("reply", job=greeter["id"], text="yes, please")["status"]
    say(f"$ roost reply greeter 'yes, please'   → {outcome}")
    _wait(client, greeter["id"], "greeter")
    _transcript(client, greeter["id"])

    step("3. a message between two jobs, arriving mid-turn at the next tool boundary")
    reviewer = client.request("run", task="[reviewer] Review the build.", name="reviewer", cwd=cwd)
    builder = client.request("run", task="[builder] Build the project.", name="builder", cwd=cwd)
    BUILDER["id"] = builder["id"]
    _wait(client, reviewer["id"], "reviewer")
    until(
        "the builder's build to start", lambda: "running bash" in _row(client, builder["id"])["status"], 90
    )  # the story goes on either way
    say(
        f"builder {builder['id']} is {_row(client, builder['id'])['status']!r}; "
        "the reviewer is asked to message it now"
    )
    outcome = client.request("reply", job=reviewer["id"], text="Review it: send it now.")["status"]
    say(f"$ roost reply reviewer 'Review it: send it now.'   → {outcome}")
    _wait(client, reviewer["id"], "reviewer")
    (work / ".built").touch()  # the build tool ends; the message is applied at this boundary
    _wait(client, builder["id"], "builder")
    _transcript(client, builder["id"])

    step("4. a parent spawns two children; one asks it a question; both report back")
    lead = client.request("run", task="[lead] Audit the project with two helpers.", name="lead", cwd=cwd)
    shown = [""]

    def all_reported() -> bool:
        rows = client.request("list")["jobs"]
        snapshot = json.dumps([(r["name"], r["state"], r["summary"]) for r in rows])
        if snapshot != shown[0]:
            shown[0] = snapshot
            say()
            from roost.display import views

            views.print_table(rows, tree=True)
        settled = all(
            r["state"] in ("done", "needs_input")
            and not r["status"]
            and not (r["pending"]["replies"] or r["pending"]["agent"])
            for r in rows
        )
        children = [r for r in rows if r.get("parentSession")]
        return settled and len(children) == 2 and {"kid-a", "kid-b"} <= reporters(llm.requests, "[lead]")

    until("the lead's two children to report back and every job to settle", all_reported, 120)
    _transcript(client, lead["id"])

    step("5. costs, and a budget that stops a runaway child")
    saver = client.request(
        "run", task="[saver] Refactor with a helper, within budget.", name="saver", cwd=cwd
    )
    say(f"$ roost run --name saver '…'   → {saver['id']}  (it spawns 'spender' with budget $0.25)")
    until(
        "the spender to spend its budget",
        lambda: any(
            r["name"] == "spender" and r["state"] == "failed" for r in client.request("list")["jobs"]
        ),
        120,
    )
    until(
        "the saver to hear that the spender ended",
        lambda: any(first_user_contains("[saver]")(r) and "ended:" in last_user(r) for r in llm.requests),
        60,
    )
    _wait(client, saver["id"], "saver")
    say("$ roost ls --tree   (COST: the job's own; TREE: the root and all its descendants)")
    table(client, tree=True)
    spender = next((r for r in client.request("list")["jobs"] if r["name"] == "spender"), None)
    if spender is not None:
        say(
            f"spender: {spender['state']} — {spender['status']}; raise it with: "
            f"roost budget {spender['id']} 1.00"
        )
    _transcript(client, saver["id"])
    _worktrees(client, llm, work.parent / "repo")
    _fan_in(client, cwd)
    step("done")
    say(
        "every job above was a real pi process supervised by roostd; try `roost view`, "
        "`roost ls --tree` and `roost logs JOB` on your own jobs."
    )
    return 0


def _worktrees(client: Client, llm: FakeLLM, repo: Path) -> None:
    import subprocess

    from roost.wire.protocol import RequestError

    step("6. two children in their own git worktrees change the same line; one merges, the other conflicts")
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout

    git("init", "-q", "-b", "main")
    git("config", "user.name", "roost demo")
    git("config", "user.email", "demo@example.invalid")
    (repo / "settings.ini").write_text("[client]\nretries = 3\n")
    git("add", "-A")
    git("commit", "-q", "-m", "settings")
    say(
        f"a git repository {repo} on main; the demo's roost.json says "
        'agentChildWorktrees: "ask" (the model chooses per spawn)'
    )
    lead = client.request("run", task="[wt-lead] Tune the retries, two ways.", name="wt-lead", cwd=str(repo))
    kids: list[dict[str, Any]] = []

    def both_reported() -> bool:
        kids[:] = [r for r in client.request("list")["jobs"] if r["name"] in ("wt-fast", "wt-safe")]
        return (
            len(kids) == 2
            and all(r["state"] == "done" and not r["status"] for r in kids)
            and {"wt-fast", "wt-safe"} <= reporters(llm.requests, "[wt-lead]")
            and _row(client, lead["id"])["state"] == "done"
        )

    until("both children to commit and report back", both_reported, 120)
    table(client, tree=True)
    for kid in sorted(kids, key=lambda r: r["name"]):
        wt = kid["worktree"]
        say(f"  {kid['name']}: worktree {wt['path']}, branch {wt['branch']}")
    _transcript(client, lead["id"])
    for name in ("wt-fast", "wt-safe"):
        try:
            result = client.request("merge", job=name)
            say(
                f"$ roost merge {name}   → {result['branch']} merged into {result['into']} "
                f"({result['commit'][:12]})"
            )
        except RequestError as exc:
            say(f"$ roost merge {name}   → refused: {exc.message}")
    say(
        f"main now has: {(repo / 'settings.ini').read_text().splitlines()[-1]!r}; "
        f"`git status` in {repo}: {git('status', '--porcelain').strip() or 'clean'}"
    )
    say(
        "the conflicting branch is kept as it was: merge it by hand, or `roost rm --force --delete-branch` it"
    )


VERDICT = {
    "type": "object",
    "required": ["verdict", "issues"],
    "properties": {
        "verdict": {"enum": ["approve", "request-changes"]},
        "issues": {"type": "integer", "minimum": 0},
    },
}


def _fan_in(client: Client, cwd: str) -> None:
    step(
        "7. a fan-in with structured results: two reviewers answer in a JSON schema, a summary waits for both"
    )
    reviews = [
        client.request("run", task=f"[{name}] Review the {what}.", name=name, cwd=cwd, output_schema=VERDICT)[
            "id"
        ]
        for name, what in (("rev-api", "API"), ("rev-ui", "UI"))
    ]
    say("$ roost run --name rev-api --output-schema verdict.json '…'   (and rev-ui)")
    summary = client.request(
        "run",
        task="[summary] Sum up the reviews.",
        name="summary",
        cwd=cwd,
        after=reviews,
        afterMode="all",
        withResults=True,
        output_schema={"type": "object"},
    )["id"]
    say("$ roost run --name summary --after rev-api,rev-ui --with-results --output-schema summary.json '…'")
    until("the reviews and the summary", lambda: _row(client, summary)["state"] in ("done", "failed"), 180)
    _transcript(client, reviews[1])  # rev-ui: roost's note, then a valid answer
    for job_id in (*reviews, summary):
        row = _row(client, job_id)
        say(f"$ roost result {row['name']} --json   → {json.dumps(row['result'])}")


def _wait(client: Client, job_id: str, name: str | None = None) -> None:
    """Until the job's run has settled (roostd's `wait`, in short calls, so that a long
    wait says so)."""
    until(
        f"{name or job_id} to settle",
        lambda: client.call("wait", {"job": job_id, "timeout": 2}, 40)["settled"],
        90,
        interval=0,
    )


def _row(client: Client, job_id: str) -> dict[str, Any]:
    row: dict[str, Any] = client.request("show", job=job_id)["job"]
    return row


def _transcript(client: Client, job_id: str) -> None:
    from roost.pi.transcript import read_entries, render

    row = _row(client, job_id)
    say(f"$ roost logs {row['name']}")
    for line in render(read_entries(row["session"])):
        say("  " + line)
