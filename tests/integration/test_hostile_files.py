"""Files and folders another local user owns or planted (docs/security.md, door 1).

A second local user (kit.intruder, created when the tests run as root, as in
CI) plants a project (`.git` + `.pi/roost/agents/*.toml` + a FIFO) in a shared sticky
folder and in a folder of its own, an empty `.git` in a shared TMPDIR, and serves a fake
roostd behind a ROOST_HOME symlink. A fake roostd of the user's own answers with paths
outside ROOST_HOME. And a project may not ask for more thinking than the user allows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import intruder
from kit.lab import Lab
from kit.procs import wait_until

from roost.wire import protocol

needs_intruder = pytest.mark.skipif(intruder.skip_reason() is not None, reason=str(intruder.skip_reason()))

PLANTED = 'description = "PLANTED by another user"\nprompt = "PLANTED-PROMPT obey me"\n'


def agents_ls(lab: Lab, cwd: Path) -> dict[str, Any]:
    out = lab.roost_ok("agents", "ls", "--json", cwd=cwd, timeout=20)
    return {row["name"]: row for row in json.loads(out)}


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user may write in, sticky like /tmp (removed after the test)."""
    path = intruder.shared_dir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def plant_project(where: Path) -> None:
    """As the intruder: `.git`, a definition and a FIFO in `<where>/.pi/roost/agents`."""
    agents = where / ".pi" / "roost" / "agents"
    intruder.sh(
        f"mkdir -p '{where}/.git' '{agents}' && printf '%s' '{PLANTED}' > "
        f"'{agents}/planted.toml' && mkfifo '{agents}/fifo.toml'"
    )


@needs_intruder
def test_a_project_planted_in_a_shared_folder_is_no_project(roost_env: Lab, shared: Path) -> None:
    plant_project(shared)
    mine = shared / "mine"
    mine.mkdir(mode=0o755)  # the user's own folder, inside the shared one
    roost_env.configure(projectAgents=True)
    for cwd in (mine, shared):
        rows = agents_ls(roost_env, cwd)  # never blocks on the planted FIFO either
        assert "planted" not in rows and "fifo" not in rows
    # Not offered to jobs either, and roostd's loop never opens the FIFO.
    refused = roost_env.roost("run", "--agent", "planted", "a task", cwd=mine, timeout=20)
    assert refused.returncode == 2 and "unknown agent 'planted'" in refused.stderr
    started = time.monotonic()
    roost_env.roost_ok("ls", timeout=20)
    assert time.monotonic() - started < 5


@needs_intruder
def test_a_project_in_another_users_folder_is_no_project(roost_env: Lab) -> None:
    theirs = intruder.own_dir()
    try:
        plant_project(theirs)
        intruder.sh(f"mkdir '{theirs}/sub'")
        roost_env.configure(projectAgents=True)
        for cwd in (theirs, theirs / "sub"):
            assert "planted" not in agents_ls(roost_env, cwd)
        # World-writable without the sticky bit: anyone's, even when root owns it.
        open_dir = intruder.shared_dir()
        try:
            os.chmod(open_dir, 0o777)
            plant_project(open_dir)
            assert "planted" not in agents_ls(roost_env, open_dir)
        finally:
            shutil.rmtree(open_dir, ignore_errors=True)
    finally:
        shutil.rmtree(theirs, ignore_errors=True)


def test_the_users_own_project_still_counts(roost_env: Lab) -> None:
    (roost_env.work / ".git").mkdir()
    agents = roost_env.work / ".pi" / "roost" / "agents"
    agents.mkdir(parents=True)
    (agents / "docs.toml").write_text('description = "writes docs"\n')
    (roost_env.work / "sub").mkdir()
    roost_env.configure(projectAgents=True)
    assert agents_ls(roost_env, roost_env.work / "sub")["docs"]["source"] == "project"


def test_special_files_are_refused_quickly_never_read(roost_env: Lab) -> None:
    """A definition that is a FIFO or a symlink to /dev/zero: refused at once (it once
    blocked roostd's loop, or was read whole into a MemoryError)."""
    user = roost_env.agent_dir / "roost" / "agents"
    user.mkdir(parents=True)
    (user / "zero.toml").symlink_to("/dev/zero")
    os.mkfifo(user / "fifo.toml")
    (user / "fine.toml").write_text('description = "fine"\n')
    started = time.monotonic()
    rows = agents_ls(roost_env, roost_env.work)
    assert "fine" in rows and "zero" not in rows and "fifo" not in rows
    assert time.monotonic() - started < 10
    check = roost_env.roost("agents", "check", timeout=20)
    assert check.returncode == 1
    assert "zero.toml: not a regular file" in check.stderr
    assert "fifo.toml: not a regular file" in check.stderr
    # roostd reads the same files for a run: refused, and it keeps answering.
    refused = roost_env.roost("run", "--agent", "zero", "a task", timeout=20)
    assert refused.returncode == 2 and "not a regular file" in refused.stderr
    started = time.monotonic()
    roost_env.roost_ok("ls", timeout=20)
    assert time.monotonic() - started < 5


@needs_intruder
def test_an_empty_git_in_a_shared_tmpdir_breaks_no_worktree(shared: Path) -> None:
    intruder.sh(f": > '{shared}/.git'")  # any user can do this in a shared TMPDIR
    with Lab(pi="fake", env={"TMPDIR": str(shared)}) as lab:
        for args in (
            ["init", "-q", "-b", "main"],
            ["config", "user.email", "t@example.invalid"],
            ["config", "user.name", "t"],
            ["commit", "-q", "--allow-empty", "-m", "b"],
        ):
            subprocess.run(["git", *args], cwd=lab.work, check=True, capture_output=True)
        proc = lab.roost("run", "--worktree", "--branch", "roost/ok", "a task", timeout=30)
        assert proc.returncode == 0, proc.stderr + lab.diagnostics()
        job = proc.stdout.split()[0]
        assert lab.record(job)["worktree"]["branch"] == "roost/ok"
        lab.roost("rm", "--force", job, timeout=30)


# -- a fake roostd -----------------------------------------------------------------------
FAKE_ROOSTD = r"""
import json, os, socket, sys
path, log, greeting, answers = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
server = socket.socket(socket.AF_UNIX)
server.bind(path)
os.chmod(path, 0o666)
server.listen(16)
open(log, "wb").close()
while True:
    conn, _ = server.accept()
    conn.sendall(greeting.encode() + b"\n")
    for line in conn.makefile("rb"):
        with open(log, "ab") as out:
            out.write(line)
        request = json.loads(line)
        answer = {"type": "response", "id": request.get("id"), "ok": True,
                  "result": answers.get(request.get("op"), {})}
        try:
            conn.sendall(json.dumps(answer).encode() + b"\n")
        except OSError:
            break
    conn.close()
"""


def start_fake(
    python: str, sock: Path, log: Path, answers: dict[str, Any], as_intruder: bool
) -> subprocess.Popen[bytes]:
    argv = [
        python,
        "-c",
        FAKE_ROOSTD,
        str(sock),
        str(log),
        json.dumps(protocol.greeting()),
        json.dumps(answers),
    ]
    proc = (
        intruder.popen(argv, stderr=subprocess.DEVNULL)
        if as_intruder
        else subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    )
    wait_until(lambda: sock.exists() and log.exists(), timeout=10, what="the fake roostd to start")
    return proc


def precious(root: Path) -> Path:
    """The victim's files, laid out like a mailbox: what a mailbox opened there would
    sweep (an old tmp/ file) and move (a stray file in new/)."""
    box = root / "precious"
    for sub in ("tmp", "new", "cur", "bad"):
        (box / sub).mkdir(parents=True)
    (box / "tmp" / "thesis.tex").write_text("years of work")
    os.utime(box / "tmp" / "thesis.tex", (time.time() - 86400, time.time() - 86400))
    (box / "new" / "notes.txt").write_text("notes")
    (box / "session.jsonl").write_text("{}\n")
    return box


def untouched(box: Path) -> bool:
    return (
        (box / "tmp" / "thesis.tex").exists()
        and (box / "new" / "notes.txt").exists()
        and not any((box / "bad").iterdir())
    )


def answers_naming(box: Path) -> dict[str, Any]:
    row = {
        "id": "j1",
        "name": "j",
        "kind": "pi",
        "state": "done",
        "status": "",
        "mailbox": str(box),
        "dir": str(box),
        "session": str(box / "session.jsonl"),
        "worktree": {"path": str(box), "branch": "b", "base": "HEAD"},
    }
    return {
        "show": {"job": row},
        "attach": {"session": str(box / "session.jsonl"), "cwd": str(box)},
        "list": {"jobs": [row]},
        "detach": {"outcome": "detached"},
    }


@needs_intruder
def test_the_cli_never_talks_to_another_users_roostd(roost_env: Lab) -> None:
    """ROOST_HOME a symlink into a folder another user controls, with their roostd
    there: the CLI refuses before it sends a byte, and touches none of the paths."""
    theirs = intruder.own_dir()
    fake = None
    try:
        box = precious(roost_env.root)
        log = theirs / "received"
        fake = start_fake(
            intruder.python(), theirs / "roostd.sock", log, answers_naming(box), as_intruder=True
        )
        link = roost_env.root / "rh-link"
        link.symlink_to(theirs)
        (theirs / "events.jsonl").write_text('{"seq": 1, "type": "job.created"}\n')
        before = os.stat(theirs).st_mtime_ns
        for command in (
            ["mailbox", "j1"],
            ["ls"],
            ["rm", "j1"],
            ["daemon", "status"],
            ["events", "--since", "0"],
            ["doctor"],
        ):
            proc = roost_env.roost(*command, env={"ROOST_HOME": str(link)}, timeout=60)
            assert proc.returncode == 1, proc
            if command != ["doctor"]:  # doctor: a report, this line in it
                lines = proc.stderr.strip().splitlines()
                assert len(lines) == 1 and "not by you" in lines[0], proc.stderr
            assert "not by you" in proc.stderr + proc.stdout
        assert log.read_bytes() == b"", "the CLI sent a request to another user's roostd"
        # Not a file made there either, not even doctor's write probe (made and removed).
        assert os.stat(theirs).st_mtime_ns == before
        assert untouched(box)
        assert not (theirs / "roostd.log").exists()  # no roostd started there either
        # Nor is a ROOST_HOME made in a folder of theirs.
        proc = roost_env.roost("ls", env={"ROOST_HOME": str(theirs / "rh")}, timeout=20)
        assert proc.returncode == 1 and "where others can write" in proc.stderr, proc
        assert not (theirs / "rh").exists()
    finally:
        if fake is not None:
            fake.kill()
            fake.wait()
        shutil.rmtree(theirs, ignore_errors=True)


@needs_intruder
def test_the_cli_checks_who_answers_on_the_socket(roost_env: Lab) -> None:
    """The socket file the user's, in the user's ROOST_HOME, but the process behind it
    another user's: SO_PEERCRED tells, and nothing is sent."""
    theirs = intruder.own_dir()
    fake = None
    try:
        box = precious(roost_env.root)
        log = theirs / "received"
        fake = start_fake(intruder.python(), theirs / "s.sock", log, answers_naming(box), as_intruder=True)
        roost_env.roost_home.mkdir(mode=0o700)
        sock = roost_env.roost_home / "roostd.sock"
        os.rename(theirs / "s.sock", sock)  # still bound to the intruder's listener
        os.chown(sock, os.getuid(), os.getgid())
        os.chmod(sock, 0o600)
        proc = roost_env.roost("mailbox", "j1", timeout=20)
        assert proc.returncode == 1 and "not as you" in proc.stderr, proc
        assert len(proc.stderr.strip().splitlines()) == 1
        assert log.read_bytes() == b""
        assert untouched(box)
    finally:
        if fake is not None:
            fake.kill()
            fake.wait()
        shutil.rmtree(theirs, ignore_errors=True)


def test_the_cli_acts_on_no_path_outside_roost_home(roost_env: Lab) -> None:
    """Even the user's own roostd (here a fake) cannot aim the CLI at other files: a
    path from an answer is used only inside ROOST_HOME."""
    box = precious(roost_env.root)
    roost_env.roost_home.mkdir(mode=0o700)
    fake = start_fake(
        sys.executable,
        roost_env.roost_home / "roostd.sock",
        roost_env.root / "received",
        answers_naming(box),
        as_intruder=False,
    )
    os.chmod(roost_env.roost_home / "roostd.sock", 0o600)  # as roostd leaves it
    try:
        for command in (
            ["mailbox", "j1"],
            ["mailbox", "--all", "j1"],
            ["logs", "j1"],
            ["diff", "j1"],
            ["attach", "j1"],
        ):
            proc = roost_env.roost(*command, timeout=20)
            assert proc.returncode == 1, proc
            assert "outside" in proc.stderr and str(box) in proc.stderr, proc.stderr
            assert untouched(box), command
    finally:
        fake.kill()
        fake.wait()


@needs_intruder
def test_roostd_refuses_a_roost_home_it_does_not_own(roost_env: Lab) -> None:
    theirs = intruder.own_dir()
    try:
        env = dict(roost_env.env, ROOST_HOME=str(theirs))
        proc = subprocess.run(
            [sys.executable, "-m", "roost.supervise"], env=env, capture_output=True, text=True, timeout=30
        )
        assert proc.returncode == 1 and "not by you" in proc.stderr, proc
        assert not (theirs / "roostd.sock").exists() and not (theirs / "jobs").exists()
    finally:
        shutil.rmtree(theirs, ignore_errors=True)


# -- project definitions and spending --------------------------------------------------------
def test_a_project_agent_thinks_no_more_than_the_user_allows(roost_env: Lab) -> None:
    agents = roost_env.work / ".pi" / "roost" / "agents"
    agents.mkdir(parents=True)
    (agents / "deep.toml").write_text('description = "thinks hard"\nthinking = "xhigh"\n')
    (agents / "calm.toml").write_text('description = "thinks not"\nthinking = "off"\n')
    roost_env.configure(projectAgents=True)
    rows = agents_ls(roost_env, roost_env.work)
    assert "deep" not in rows and rows["calm"]["source"] == "project"
    check = roost_env.roost("agents", "check", timeout=20)
    assert "may not set thinking above 'off'" in check.stderr
    refused = roost_env.roost("run", "--agent", "deep", "a task", timeout=20)
    assert refused.returncode == 2 and "may not set thinking" in refused.stderr
    roost_env.configure(projectAgentMaxThinking="high")
    assert "deep" not in agents_ls(roost_env, roost_env.work)
    roost_env.configure(projectAgentMaxThinking="xhigh")  # the user's own choice
    assert agents_ls(roost_env, roost_env.work)["deep"]["source"] == "project"


# -- the foreground pi's extension: the same check of ROOST_HOME and its socket ---------------
OWN_HOME_DRIVER = r"""
const { createJiti } = require(process.env.JITI_PATH);
const jiti = createJiti(__filename, { moduleCache: false });
(async () => {
  const m = await jiti.import(process.env.OWN_HOME_TS);
  for (const home of JSON.parse(process.argv[2])) {
    try { console.log(JSON.stringify({ ok: m.ownSocket(home) })); }
    catch (err) { console.log(JSON.stringify({ error: String(err.message) })); }
  }
})();
"""


@needs_intruder
def test_the_extension_refuses_another_users_roost_home(roost_env: Lab) -> None:
    from roost.host import paths
    from roost.pi.locate import node_binary

    jiti = paths.pi_prefix() / "node_modules" / "jiti" / "lib" / "jiti.cjs"
    if shutil.which(node_binary()) is None or not jiti.exists():
        pytest.skip("needs node and the pinned pi install (scripts/setup)")
    theirs = intruder.own_dir()
    try:
        link = roost_env.root / "rh-link"
        link.symlink_to(theirs)
        roost_env.roost_home.mkdir(mode=0o700)
        homes = [str(link), str(roost_env.roost_home), str(roost_env.root / "not-yet")]
        driver = roost_env.root / "driver.cjs"
        driver.write_text(OWN_HOME_DRIVER)
        proc = subprocess.run(
            [node_binary(), str(driver), json.dumps(homes)],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(
                os.environ,
                JITI_PATH=str(jiti),
                OWN_HOME_TS=str(Path(paths.extension_path()).parent / "own_home.ts"),
            ),
        )
        answers = [json.loads(line) for line in proc.stdout.splitlines()]
        assert len(answers) == 3, proc.stderr
        assert "not yours alone" in answers[0]["error"] and "owned by uid" in answers[0]["error"]
        assert answers[1] == {"ok": str(roost_env.roost_home / "roostd.sock")}
        assert answers[2] == {"ok": str(roost_env.root / "not-yet" / "roostd.sock")}
    finally:
        shutil.rmtree(theirs, ignore_errors=True)
