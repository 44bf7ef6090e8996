"""The CLI's one output layer (roost/display/output.py): text that a model, an agent, a repository
or a project file wrote reaches no terminal and no pipe raw.

The walk enumerates the `roost` commands from the click group: each one is either run here
(on a pseudo-terminal and on a pipe) with hostile text where it prints it, or named in
PRINTS_NO_FOREIGN_TEXT with the reason. A new command that is in neither fails the walk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import pytest
from kit.lab import Lab
from kit.procs import wait_until
from kit.term import on_pty

from roost.cli.main import cli
from roost.display.views import display_row
from roost.view.app import TranscriptSource
from roost.view.table import table_rows

# A window title (OSC 0), a clipboard write (OSC 52), an OSC 8 link, cursor up + erase line
# (CSI), a C1 CSI (0x9b), a bidi override, and rich markup.
PAYLOAD = (
    "\x1b]0;TITLE\x07\x1b]52;c;aGk=\x07\x1b[1A\x1b[2K\x9b2J\u202eevil [red]R[/red] "
    "[link=https://e.x]L[/link]\x1b]8;;https://e.x\x1b\\L\x1b]8;;\x1b\\"
)
RAW = ("\x1b]", "\x1b[1A", "\x1b[2K", "\x07", "\x9b", "\u202e", "\x1b\\")
"""What must never come out: OSC and CSI starts, BEL, C1 CSI, the bidi override, ST."""
SHOWN = (
    "\\x1b]0;TITLE\\x07",
    "\\x1b]52;c;aGk=\\x07",
    "\\x1b[1A\\x1b[2K",
    "\\x9b2J",
    "\\u202eevil",
    "\\x1b]8;;https://e.x\\x1b\\L",
)
"""What must come out instead: the same text, its controls as escapes."""
MARKUP = ("[red]R[/red]", "[link=https://e.x]L[/link]")
"""Shown as written where rich draws (never read as markup)."""

PRINTS_NO_FOREIGN_TEXT = {
    "run": "prints the new job's id (and roost's own agent-dir note)",
    "stop": "prints the job's id",
    "start": "prints the job's id and state",
    "rm": "the job's id and notes on its worktree (one line each, through views.printable)",
    "attach": "hands the terminal to pi itself; its own lines name the job (a checked name)",
    "budget": "the job's id and figures",
    "install": "paths of roost's own extension",
    "demo": "roost's own scripted model's text",
    "daemon run": "roostd's own log",
    "daemon start": "roostd's pid",
    "daemon stop": "counts",
    "daemon status": "roostd's own figures",
    "agents new": "the path it wrote",
    "view": "a textual app that draws the terminal itself: its rows and transcript lines are "
    "checked in test_view_rows_and_transcript_show_controls",
    "doctor": "pi's words in a check: checked in test_doctor_shows_controls_in_a_check",
    "notify": "the desktop notification: checked in test_notification_text_is_escaped",
    "answer": "the entry's outcome and job id; 'already answered by' names a surface",
    "web pair": "the pairing link",
    "web revoke": "a count",
    "group add": "the group's name (the user's) and limit",
    "group ls": "groups and limits",
    "group rm": "the group's name",
    "queue move": "the job's id and its new place",
    "schedule add": "the schedule's name (letters, digits, `._-`), its trigger and times",
    "schedule rm": "nothing",
    "schedule pause": "nothing",
    "schedule resume": "nothing",
    "schedule run-now": "the outcome and job id, roost's own words (through the output layer)",
    "web devices": "ids and times, and a device's name (its browser's, written through the "
    "output layer's stream like every line of the CLI)",
    "mcp": "a protocol server: JSON-RPC on stdio for an MCP client, not text for a terminal "
    "(the text it serves is escaped: test_mcp); --http prints roost's own URL",
    "acp": "a protocol server: JSON-RPC on stdio for an editor, not text for a terminal "
    "(the text it serves is escaped: test_acp_updates)",
}


def leaf_commands(group: click.Group, prefix: str = "") -> set[str]:
    ctx = click.Context(group)
    names: set[str] = set()
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            names |= leaf_commands(command, f"{prefix}{name} ")
        else:
            names.add(prefix + name)
    return names


def on_terminal(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, timeout: float = 60.0
) -> tuple[int, str]:
    """(exit code, everything written) by `argv` with stdout and stderr on a terminal."""
    return on_pty(argv, env, cwd=cwd, timeout=timeout)


def without_roost_styles(text: str) -> str:
    """The text without roost's own colours (SGR: ESC [ ... m), which the payload has none of."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def assert_safe(what: str, text: str, shows: bool, markup: bool = False) -> None:
    for raw in RAW:
        assert raw not in text, f"{what}: {raw!r} raw in {text!r}"
    assert "\x1b" not in without_roost_styles(text), (what, text)
    if shows:
        # JSON and TOML escape in their own way (\u001b); the same text.
        text = re.sub(r"\\u00([0-9a-f]{2})", r"\\x\1", text).replace("\\\\", "\\")
        for shown in SHOWN:
            assert shown in text, f"{what}: {shown!r} not in {text!r}"
        if markup:
            for written in MARKUP:
                assert written in text, f"{what}: {written!r} not in {text!r}"


def strings(doc: Any) -> list[str]:
    """Every string in a JSON document."""
    if isinstance(doc, str):
        return [doc]
    values = doc.values() if isinstance(doc, dict) else doc if isinstance(doc, list) else ()
    return [text for value in values for text in strings(value)]


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "t@example.invalid"),
        ("config", "user.name", "roost test"),
    ):
        subprocess.run(["git", *args], cwd=path, check=True)
    (path / "README").write_text("hello\n")
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "base"], cwd=path, check=True)
    return path


RICH = {"ls", "show", "mailbox"}
"""The commands that draw with rich: markup in the payload is shown as written."""


def hostile_world(env: Lab) -> dict[str, list[tuple[list[str], bool]]]:
    """Jobs, files and records that hold PAYLOAD; per command: its command lines, each with
    whether it shows the payload whole."""
    repo = make_repo(env.work / "repo")
    agents = repo / ".pi" / "roost" / "agents"
    agents.mkdir(parents=True)
    (agents / "evil.toml").write_text(
        f"description = {json.dumps(PAYLOAD)}\nprompt = {json.dumps(PAYLOAD)}\n"
    )
    env.configure(projectAgents=True)

    pi_job = env.run_job("--name", "victim", PAYLOAD)
    env.wait_settled(pi_job)
    env.roost_ok("stop", pi_job)
    env.roost("reply", pi_job, PAYLOAD)  # waits in the mailbox of a stopped job
    (env.work / "schema.json").write_text('{"type": "object"}')
    structured = env.run_job(
        "--output-schema", str(env.work / "schema.json"), f"[[answers {json.dumps({'note': PAYLOAD})}]]"
    )
    env.wait_settled(structured)
    (env.work / "payload.txt").write_text(PAYLOAD + "\n")
    shell = env.run_job("--name", "shelly", "--shell", "--", "sh", "-c", "cat payload.txt; exit 3")
    wait_until(lambda: env.row(shell)["state"] == "failed", timeout=30, what="shell failed")

    evil_name = "evil\x1b[2K\u202e[red].txt"  # a repository's file name, in merge's refusal
    (repo / evil_name).write_text("base\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "evil"], cwd=repo, check=True)
    tree = env.run_job("--name", "tree", "--worktree", "--cwd", str(repo), "work")
    env.wait_settled(tree)
    worktree = Path(env.row(tree)["worktree"]["path"])
    (worktree / "committed.txt").write_text(PAYLOAD + "\n")
    subprocess.run(["git", "add", "-A"], cwd=worktree, check=True)
    subprocess.run(["git", "commit", "-q", "-m", PAYLOAD], cwd=worktree, check=True)
    (repo / evil_name).write_text("dirty\n")  # merge refuses, naming the file
    # A file that hides the line before it: cursor up, erase line.
    (worktree / "install.sh").write_text(f"rm -rf /\n\x1b[1A\x1b[2K{PAYLOAD}\necho fine\n")

    with open(env.roost_home / "events.jsonl", "a", encoding="utf-8") as log:
        log.write(
            json.dumps(
                {
                    "seq": 10**6,
                    "time": "2099-01-01T00:00:00.000Z",
                    "type": "job.failed",
                    "job": {"id": shell, "name": "shelly"},
                    "error": PAYLOAD,
                },
                ensure_ascii=False,
            )
            + "\n"
        )
    env.roost_ok("schedule", "add", "evil", "--every", "1h", PAYLOAD)
    # A bash call of the stopped job held for approval (as its worker would have asked):
    # `approve --always` names the rule made of the agent's command.
    (env.roost_home / "approvals.json").write_text(
        json.dumps(
            {
                "entries": {
                    "0a0b0c0d": {
                        "id": "0a0b0c0d",
                        "job": pi_job,
                        "call": "call-1",
                        "tool": "bash",
                        "input": {"command": PAYLOAD},
                        "summary": f"approve bash: {PAYLOAD}",
                        "cwd": str(env.work),
                        "requested": 1.0,
                        "since": "2026-12-06T00:00:00Z",
                        "deadline": None,
                    }
                }
            }
        )
    )
    wait_until(lambda: env.cli_json("search", "--json", "evil"), 10, what="search's index")
    full, cut = True, False  # whether the payload is shown whole (a fitted table cuts it)
    return {
        "ls": [
            (["ls"], cut),
            (["ls", "--wide"], full),
            (["ls", "--group", "state", "--wide"], full),
            (["ls", "--json"], full),
        ],
        "show": [(["show", pi_job], full), (["show", pi_job, "--json"], full)],
        "logs": [(["logs", pi_job], full), (["logs", shell], full)],
        "mailbox": [(["mailbox", pi_job, "--all"], cut), (["mailbox", pi_job, "--all", "--json"], full)],
        "events": [(["events"], full), (["events", "--json"], full)],
        "diff": [(["diff", tree], full), (["diff", tree, "--stat"], cut)],
        "agents ls": [(["agents", "ls", "--cwd", str(repo)], full)],
        "agents show": [(["agents", "show", "evil", "--cwd", str(repo)], full)],
        "agents check": [(["agents", "check", "--cwd", str(repo)], cut)],
        "wait": [(["wait", shell], cut), (["wait", "--all", shell, pi_job], cut)],
        "reply": [(["reply", shell, "hello"], cut)],
        "usage": [(["usage"], cut), (["usage", "--by", "tree"], cut)],
        "merge": [(["merge", tree], cut)],
        "gc": [(["gc"], cut)],
        "inbox": [(["inbox"], cut)],  # the failed shell job's entry
        "schedule ls": [(["schedule", "ls"], cut), (["schedule", "ls", "--json"], cut)],
        "schedule show": [
            (["schedule", "show", "evil"], full),
            (["schedule", "show", "evil", "--json"], full),
        ],
        "result": [(["result", structured], full), (["result", structured, "--json"], full)],
        "search": [(["search", "evil"], cut), (["search", "evil", "--kind", "user"], cut)],
        # The rule's glob characters are escaped ([ -> [[]): the payload is not shown whole.
        "approve": [(["approve", "0a0b0c0d", "--always"], cut)],
        "deny": [(["deny", "0a0b0c0d", "--reason", PAYLOAD], cut)],  # already answered: by whom
    }


def test_every_command_shows_foreign_text_escaped_on_a_terminal_and_a_pipe(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    walked = hostile_world(env)
    commands = leaf_commands(cli)
    missing = commands - set(walked) - set(PRINTS_NO_FOREIGN_TEXT)
    assert not missing, f"commands neither walked nor listed as printing no foreign text: {missing}"
    assert not (set(walked) | set(PRINTS_NO_FOREIGN_TEXT)) - commands  # no stale names
    for name, runs in walked.items():
        rich = name in RICH
        for args, shows in runs:
            code, text = on_terminal([sys.executable, "-m", "roost.cli.main", *args], env.env, env.work)
            assert code in (0, 1), (args, code, text)
            assert_safe(
                f"terminal: roost {' '.join(args)}",
                text,
                shows and "--json" not in args,
                markup=rich and "--json" not in args,
            )
            piped = env.roost(*args)
            assert_safe(
                f"pipe: roost {' '.join(args)}", piped.stdout + piped.stderr, shows and "--json" not in args
            )
            if "--json" in args:  # the same data for a JSON reader
                docs = (
                    [json.loads(line) for line in piped.stdout.splitlines()]
                    if ("events" in args)
                    else json.loads(piped.stdout)
                )
                assert any(PAYLOAD in text for text in strings(docs)), args


def test_diff_shows_the_line_a_file_hides_and_raw_goes_only_to_a_pipe(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    repo = make_repo(env.work / "repo")
    job = env.run_job("--name", "tree", "--worktree", "--cwd", str(repo), "work")
    env.wait_settled(job)
    worktree = Path(env.row(job)["worktree"]["path"])
    (worktree / "install.sh").write_text("rm -rf /\n\x1b[1A\x1b[2Kecho fine\n")
    argv = [sys.executable, "-m", "roost.cli.main", "diff", job]
    code, text = on_terminal(argv, env.env, env.work)
    assert code == 0 and "+rm -rf /" in text and "\\x1b[1A\\x1b[2Kecho fine" in text, text
    assert "\x1b[1A" not in text and "\x1b[2K" not in text
    code, text = on_terminal([*argv, "--raw"], env.env, env.work)
    assert code == 1 and "--raw" in text and "never to a terminal" in text, text
    assert len(text.strip().splitlines()) == 1
    piped = env.roost("diff", job, "--raw")
    assert piped.returncode == 0 and "+\x1b[1A\x1b[2Kecho fine" in piped.stdout


def test_logs_raw_goes_only_to_a_pipe(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    (env.work / "schema.json").write_text('{"type": "object"}')
    structured = env.run_job(
        "--output-schema", str(env.work / "schema.json"), f"[[answers {json.dumps({'note': PAYLOAD})}]]"
    )
    env.wait_settled(structured)
    (env.work / "payload.txt").write_text(PAYLOAD + "\n")
    shell = env.run_job("--shell", "--", "cat", "payload.txt")
    pi_job = env.run_job(PAYLOAD)
    env.wait_settled(shell)
    env.wait_settled(pi_job)
    assert PAYLOAD + "\n" in env.roost_ok("logs", shell, "--raw")
    assert f"echo: {PAYLOAD}" in env.roost_ok("logs", pi_job, "--raw")
    for job in (shell, pi_job):
        code, text = on_terminal(
            [sys.executable, "-m", "roost.cli.main", "logs", job, "--raw"], env.env, env.work
        )
        assert code == 1 and "never to a terminal" in text and "\x1b]" not in text, text
        assert len(text.strip().splitlines()) == 1


# -- what is not walked: the view, doctor, notify --------------------------------------------
def test_view_rows_and_transcript_show_controls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path))
    log = tmp_path / "jobs" / "00000001" / "output.log"
    log.parent.mkdir(parents=True)
    log.write_text(PAYLOAD + "\n")
    row = {
        "id": "00000001",
        "name": "n",
        "kind": "shell",
        "state": "failed",
        "status": PAYLOAD,
        "summary": PAYLOAD,
        "question": None,
        "cwd": "/w",
        "session": None,
        "parent": None,
        "parentSession": None,
        "rootSession": None,
        "pending": {"replies": 0, "agent": 0},
        "created": "2025-01-01T00:00:00Z",
        "updated": "",
        "dir": str(tmp_path),
    }
    shown = " ".join(cell.plain for _, cells in table_rows([display_row(row)], "dir") for cell in cells)
    assert_safe("view row", shown, True, markup=True)
    _, lines = TranscriptSource(row).poll()
    assert_safe("view transcript", "\n".join(lines), True, markup=True)


def test_doctor_shows_controls_in_a_check() -> None:
    from roost.cli.doctor.report import Report, render

    report = Report()
    report.add("pi", "fail", f"pi said: {PAYLOAD}", f"fix: {PAYLOAD}")
    for tty in (True, False):
        assert_safe("doctor", "\n".join(render(report, tty)), True, markup=True)


def test_notification_text_is_escaped(tmp_path: Path, fake_pi_env: Lab) -> None:
    env = fake_pi_env
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    said = tmp_path / "said.json"
    fake = bin_dir / "notify-send"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(said)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    event = {
        "type": "job.needs_input",
        "job": {"id": "00000001", "name": "n"},
        "question": PAYLOAD + " <a href='https://evil.example'>x</a> <img src=x>",
        "options": [PAYLOAD],
    }
    path = f"{bin_dir}:{os.environ.get('PATH', '')}"
    env.cli("notify", "--send", input=json.dumps(event), env={"PATH": path})
    argv: list[Any] = json.loads(said.read_text())
    body = argv[-1]
    assert_safe("notification", " ".join(argv), True)
    assert "<a " not in body and "&lt;a href" in body and "<img" not in body
    assert shutil.which("notify-send", path=path) == str(fake)
