"""Integration (fake pi): every bad input gets one clear line, the same exit code rule
everywhere (2 for a usage error or an unknown job, 1 for a refusal), and changes nothing.

One lab holds a done pi job (`alpha`), a done shell job and a stopped pi job; each case runs
one command against it and checks the exit code, a fragment of the message, that stderr is
one line, and that `roost ls --json` and the files under ROOST_HOME are as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.lab import Lab

pytestmark = pytest.mark.timeout(300)

USAGE, REFUSED = 2, 1
NOBODY = "no job with id or name 'nosuch'"

# (command line with JOB/SHELL/STOPPED for the lab's jobs, exit code, fragment of stderr)
CASES: list[tuple[str, int, str]] = [
    # events: a time that is no time, a type that is no type (both matched nothing, exit 0)
    ("events --since yesterday", USAGE, "'yesterday' is not a seq (e.g. 120) or a UTC time"),
    ("events --since 2026-13-01", USAGE, "month must be in 1..12"),
    ("events --since 2026-11-30T25", USAGE, "hour must be in 0..23"),
    ("events --type nosuch.type", USAGE, "'nosuch.type' is not an event type: job.created"),
    ("events --type nosuch.", USAGE, "'nosuch.' is not an event type"),
    ("usage --since 2026-13-45", USAGE, "--since '2026-13-45' is not a date (month must be in 1..12)"),
    ("usage --since soon", USAGE, "'soon' is not a date as YYYY-MM-DD"),
    # amounts and counts
    ("budget JOB -1", USAGE, "-1: a negative number is not accepted (AMOUNT must be > 0)"),
    ("budget JOB abc", USAGE, "'abc' is not a number > 0, e.g. 2.50"),
    ("budget JOB 0", USAGE, "0 is not a number > 0"),
    ("budget JOB nan", USAGE, "nan is not a number > 0"),
    ("budget JOB --budget-tokens 1.5", USAGE, "'--budget-tokens': '1.5' is not a whole number"),
    ("budget JOB --tokens abc", USAGE, "'--budget-tokens': 'abc' is not a whole number"),
    ("budget JOB", USAGE, "give an AMOUNT, --tree-budget X, --budget-tokens N or --max-turns N"),
    ("budget JOB 2 --tree-budget 3", USAGE, "give AMOUNT or --tree-budget X, not both"),
    ("budget SHELL 5", REFUSED, "is a shell job: it has no budget"),
    ("budget nosuch 5", USAGE, NOBODY),
    ("run --budget abc hi", USAGE, "'--budget': 'abc' is not a number > 0"),
    ("run --tree-budget -1 hi", USAGE, "'--tree-budget': -1 is not a number > 0"),
    ("run --max-turns 0 hi", USAGE, "'--max-turns': 0 is not a whole number >= 1"),
    # run: the task, the name, the options
    ("run '   '", USAGE, "the task is empty (only whitespace)"),
    ("run", USAGE, "give a TASK, `-` to read it from stdin, or -f FILE"),
    ("run --name '' hi", USAGE, "name '' is empty"),
    ("run --name '  ' hi", USAGE, "name '  ' is empty"),
    ("run --name alpha hi", REFUSED, "the name 'alpha' is taken by job JOB (done)"),
    ("run --name SHELL hi", REFUSED, "the name 'SHELL' is taken by job SHELL (done)"),
    ("run -f no-such-file", USAGE, "cannot read the task from no-such-file: No such file"),
    ("run -f task.md more words", USAGE, "give the task as words or with -f FILE, not both"),
    ("run -f latin1.md", USAGE, "the task in latin1.md is not UTF-8 text"),
    ("run --shell -f task.md -- true", USAGE, "-f is for a pi job's task, not --shell"),
    ("run --shell", USAGE, "give the command: roost run --shell -- CMD"),
    ("run --thinking ultra hi", USAGE, "thinking must be one of off, minimal"),
    ("run --cwd /nonexistent hi", USAGE, "cwd '/nonexistent' is not a directory"),
    ("run --agent nope hi", USAGE, "unknown agent 'nope'; available:"),
    ("run --branch x hi", USAGE, "--branch and --base need --worktree"),
    ("run --shell --agent x -- true", USAGE, "--agent is for pi jobs, not --shell"),
    ("run --shell --budget 1 -- true", USAGE, "budgets are for pi jobs, not --shell"),
    # what a job's state or kind refuses
    ("start JOB", REFUSED, "job JOB is done and its worker is up, idle: roost reply JOB TEXT"),
    ("merge JOB", REFUSED, "job JOB has no worktree: nothing to merge"),
    ("diff JOB", REFUSED, "job JOB has no worktree"),
    ("reply SHELL hi", REFUSED, "is a shell job: it takes no replies"),
    ("reply STOPPED hi", REFUSED, "job STOPPED is stopped; `roost start STOPPED` first"),
    ("attach SHELL", REFUSED, "is a shell job: nothing to attach to"),
    # unknown jobs, everywhere
    ("show nosuch", USAGE, NOBODY),
    ("logs nosuch", USAGE, NOBODY),
    ("mailbox nosuch", USAGE, NOBODY),
    ("reply nosuch hi", USAGE, NOBODY),
    ("stop nosuch", USAGE, NOBODY),
    ("start nosuch", USAGE, NOBODY),
    ("rm nosuch", USAGE, NOBODY),
    ("wait nosuch", USAGE, NOBODY),
    ("wait --any JOB nosuch", USAGE, NOBODY),
    ("diff nosuch", USAGE, NOBODY),
    ("merge nosuch", USAGE, NOBODY),
    ("attach nosuch", USAGE, NOBODY),
    # the command line itself
    ("wait JOB nosuch", USAGE, "several jobs: say --any or --all"),
    ("wait JOB --timeout -1", USAGE, "timeout must be a number of seconds >= 0"),
    ("wait JOB --timeout abc", USAGE, "'abc' is not a valid float"),
    ("ls --group foo", USAGE, "'foo' is not one of 'dir', 'state' (see roost ls --help)"),
    ("show JOB --bogus", USAGE, "No such option '--bogus' (see roost show --help)"),
    ("nosuchcmd", USAGE, "No such command 'nosuchcmd' (see roost --help)"),
    ("notify", USAGE, "say --enable, --disable or --send"),
    ("agents show nope", USAGE, "unknown agent 'nope'"),
    ("agents new 'Bad Name'", USAGE, "bad agent name 'Bad Name'"),
    ("agents new x --from nope", USAGE, "unknown agent 'nope'"),
]


def snapshot(home: Path) -> dict[str, tuple[int, int]]:
    """Every file under ROOST_HOME but logs and sockets: (size, mtime)."""
    found = {}
    for path in sorted(home.rglob("*")):
        if path.is_file() and not path.is_symlink() and not path.name.endswith(".log"):
            info = path.stat()
            found[str(path.relative_to(home))] = (info.st_size, info.st_mtime_ns)
    return found


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[Lab, dict[str, str]]]:
    with Lab(pi="fake", settings={"reapAfterSeconds": 3600}) as lab:
        alpha = lab.run("hello there", name="alpha")
        shell = lab.run_job("--shell", "--name", "sh1", "--", "true")
        stopped = lab.run("to be stopped", name="later")
        for job in (alpha, shell, stopped):
            lab.wait(job)
        lab.roost_ok("stop", stopped)
        (lab.work / "task.md").write_text("a task\n")
        (lab.work / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
        try:
            yield lab, {"JOB": alpha, "SHELL": shell, "STOPPED": stopped}
        finally:
            print(lab.diagnostics())


@pytest.mark.parametrize(("line", "code", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_gets_one_line_and_its_exit_code_and_changes_nothing(
    lab: tuple[Lab, dict[str, str]], line: str, code: int, fragment: str
) -> None:
    import shlex

    env, jobs = lab

    def fill(text: str) -> str:
        for key, job in jobs.items():
            text = text.replace(key, job)
        return text

    rows, files = env.roost_ok("ls", "--json"), snapshot(env.roost_home)
    proc = env.roost(*(fill(arg) for arg in shlex.split(line)))
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("roost: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert fill(fragment) in proc.stderr, proc.stderr
    assert proc.stdout.strip() in ("", "stopped"), proc.stdout  # reply prints its word
    assert env.roost_ok("ls", "--json") == rows
    assert snapshot(env.roost_home) == files


def test_budget_flags_are_spelled_as_run_s_and_the_old_spellings_still_work(
    lab: tuple[Lab, dict[str, str]],
) -> None:
    env, jobs = lab
    helped = env.roost_ok("budget", "--help")
    assert "--budget-tokens" in helped and "--tree-budget" in helped
    assert "--tokens" not in helped.replace("--budget-tokens", "")
    assert "--tree " not in helped and "--tree\n" not in helped
    assert "--budget-tokens" in env.roost_ok("run", "--help")
    old = json.loads(env.roost_ok("budget", jobs["JOB"], "--tokens", "5000", "--json"))
    assert old["usage"]["budgetTokens"] == 5000
    new = json.loads(env.roost_ok("budget", jobs["JOB"], "--budget-tokens", "6000", "--json"))
    assert new["usage"]["budgetTokens"] == 6000
    tree = json.loads(env.roost_ok("budget", jobs["JOB"], "--tree-budget", "3", "--json"))
    assert tree["tree"] is True and tree["usage"]["treeBudget"] == 3
    tree = json.loads(env.roost_ok("budget", jobs["JOB"], "4", "--tree", "--json"))
    assert tree["tree"] is True and tree["usage"]["treeBudget"] == 4


def test_a_big_task_comes_from_a_file_or_stdin_and_show_shortens_it(lab: tuple[Lab, dict[str, str]]) -> None:
    env, _ = lab
    # Over 128 KiB, more than one shell argument can hold (MAX_ARG_STRLEN).
    task = "Refactor this:\n" + "x = compute(y)  # step\n" * 9000
    assert len(task.encode()) > 128 * 1024
    (env.work / "big.md").write_text(task)
    from_file = env.run_job("-f", "big.md", "--name", "from-file")
    from_stdin = env.cli("run", "--name", "from-stdin", "-", input=task).stdout.strip()
    for job in (from_file, from_stdin):
        assert env.show(job, cli=True)["task"] == task
        first = json.loads(env.roost_ok("mailbox", job, "--all", "--json"))[0]
        assert (first["seq"], first["text"], first["extra"]) == (1, task, {"cause": "task"})
        shown = " ".join(env.roost_ok("show", job).split())  # however the table wraps
        assert f"({len(task):,} characters; roost show {job} --full shows all of it)" in shown
        assert len(shown) < 5000
        full = env.roost_ok("show", job, "--full")
        assert len(full) > len(task)  # all of it (newlines shown as escapes)
    too_big = "y" * (1 << 20)
    proc = env.roost("run", "-", input=too_big)
    assert proc.returncode == USAGE and "a task must fit in one mailbox item" in proc.stderr


def test_mailbox_json_keeps_the_item_s_own_keys_under_extra(lab: tuple[Lab, dict[str, str]]) -> None:
    from roost.mailbox import Mailbox

    env, jobs = lab
    stopped = jobs["STOPPED"]
    box = Mailbox(Path(env.show(stopped)["mailbox"]))
    report = box.post(
        kind="report",
        text="done: all pass",
        result="All 3 tests pass.",
        state="done",
        question=None,
        error=None,
        report="ab12",
        sender={"id": "c0ffee00", "name": "checker", "relation": "child"},
    )
    try:
        items = json.loads(env.roost_ok("mailbox", stopped, "--all", "--json"))
        by_seq = {item["seq"]: item for item in items}
        assert by_seq[1] == {
            "state": "acked",
            "seq": 1,
            "kind": "reply",
            "from": None,
            "text": "to be stopped",
            "created": by_seq[1]["created"],
            "extra": {"cause": "task"},
        }
        got = by_seq[report.seq]
        assert got["state"] == "pending"  # not the child's "done"
        assert got["extra"] == {
            "result": "All 3 tests pass.",
            "state": "done",
            "question": None,
            "error": None,
            "report": "ab12",
        }
        assert set(got) == {"state", "seq", "kind", "from", "text", "created", "extra"}
        pending = json.loads(env.roost_ok("mailbox", stopped, "--json"))
        assert [(i["seq"], i["state"]) for i in pending] == [(report.seq, "pending")]
    finally:
        box.ack(report.seq)


def test_every_option_has_help_and_roostd_prints_help(tmp_path: Path) -> None:
    import subprocess
    import sys

    import click

    from roost.cli.commands.daemon import daemon_run
    from roost.cli.main import cli

    def walk(command: click.Command, path: str) -> Iterator[tuple[str, Any]]:
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                yield f"{path} {param.opts[0]}", param.help
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                yield from walk(sub, f"{path} {name}")

    missing = [name for name, text in walk(cli, "roost") if not text]
    assert not missing, f"options without help: {missing}"
    assert any(name.endswith("show --json") for name, _ in walk(cli, "roost"))

    home = tmp_path / "rh"
    env = dict(os.environ, ROOST_HOME=str(home))
    code = "from roost.cli.main import roostd_main; import sys; sys.argv[0] = 'roostd'; roostd_main()"
    helped = subprocess.run(
        [sys.executable, "-c", code, "--help"], env=env, capture_output=True, text=True, timeout=30
    )
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: roostd"), helped
    assert daemon_run.help and daemon_run.help.split("\n")[0] in helped.stdout
    bad = subprocess.run(
        [sys.executable, "-c", code, "--bogus"], env=env, capture_output=True, text=True, timeout=30
    )
    assert bad.returncode == USAGE and bad.stderr.count("\n") == 1, bad
    assert not home.exists()  # neither started a roostd


def readme_script() -> str:
    """The bash script under docs/reference/mailbox.md's "Reading a mailbox from a script",
    verbatim."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "mailbox.md").read_text()
    section = page.split("### Reading a mailbox from a script", 1)[1]
    return section.split("```bash\n", 1)[1].split("```", 1)[0]


def _bin(tmp_path: Path, env: Lab, race: Path | None = None) -> dict[str, str]:
    """PATH with `roost` (this checkout) and, with `race`, an `ls` and a `find` that
    acknowledge every item of that mailbox right after they listed its new/."""
    import shutil
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "roost").write_text(f'#!/bin/sh\nexec {sys.executable} -m roost.cli.main "$@"\n')
    if race is not None:
        for tool in ("ls", "find"):
            (bin_dir / tool).write_text(
                f'#!/bin/sh\nout=$({shutil.which(tool)} "$@") || exit\n'
                f'case "$*" in *{race}/new*) mv {race}/new/*.json {race}/cur/ ;; esac\n'
                'printf "%s\\n" "$out"\n'
            )
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    return dict(env.env, PATH=f"{bin_dir}:{env.env['PATH']}")


def test_the_readme_s_mailbox_script_works_also_when_items_move_while_listed(
    lab: tuple[Lab, dict[str, str]], tmp_path: Path
) -> None:
    import subprocess

    from roost.mailbox import Mailbox

    env, jobs = lab
    stopped = jobs["STOPPED"]
    script = tmp_path / "roost-inbox"
    script.write_text(readme_script())
    script.chmod(0o755)
    assert len(readme_script().splitlines()) <= 25
    box = Mailbox(Path(env.show(stopped)["mailbox"]))
    report = box.post(
        kind="report",
        text="done: x",
        result="All 3 tests\npass.",
        state="done",
        question=None,
        error=None,
        sender={"id": "c0ffee00", "name": "checker", "relation": "child"},
    )
    reply = box.post(kind="reply", text="also\tthe \x1b[31mchangelog", cause="reply")

    def inbox(race: bool) -> list[list[str]]:
        proc = subprocess.run(
            [str(script), "later"],
            env=_bin(tmp_path, env, race=(box.path if race else None)),
            cwd=env.work,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0] == "task: to be stopped"
        return [line.split("\t") for line in lines[1:]]

    acked = [row for row in inbox(race=False) if row[0] == "acked"]
    assert acked[0] == ["acked", "1", "reply", "user", "to be stopped"]
    rows = {int(row[1]): row for row in inbox(race=False)}
    assert rows[report.seq] == ["pending", str(report.seq), "report", "checker", "done: All 3 tests pass."]
    assert rows[reply.seq] == [
        "pending",
        str(reply.seq),
        "reply",
        "user",
        "also the  [31mchangelog",
    ]  # no ESC reaches the terminal
    # Acknowledged right after new/ was listed: each item still shows, once, as acked.
    raced = {int(row[1]): row[0] for row in inbox(race=True)}
    assert raced[report.seq] == raced[reply.seq] == "acked"
    assert sorted(raced) == sorted(rows)
    assert not box.pending()


def test_roost_mailbox_script_shows_an_item_acknowledged_while_it_lists(
    lab: tuple[Lab, dict[str, str]], tmp_path: Path
) -> None:
    import subprocess

    from roost.mailbox import Mailbox

    env, jobs = lab
    box = Mailbox(Path(env.show(jobs["STOPPED"])["mailbox"]))
    item = box.post(
        kind="message", text="moving", sender={"id": "c0ffee00", "name": "x", "relation": "child"}
    )
    script = Path(__file__).resolve().parents[2] / "scripts" / "roost-mailbox"
    proc = subprocess.run(
        [str(script), str(box.path)],
        capture_output=True,
        text=True,
        env=_bin(tmp_path, env, race=box.path),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split()[:3] for line in proc.stdout.splitlines()[1:]]
    assert ["acked", str(item.seq), "message"] in rows, proc.stdout
    assert [row[1] for row in rows] == sorted({row[1] for row in rows}, key=int)


def test_roost_daemon_run_becomes_roostd_in_the_same_process(roost_env: Lab) -> None:
    """`roost daemon run` execs `python -m roost.supervise` (the CLI never imports the
    daemon: test_layout): the pid supervisord or systemd started is roostd's, named roostd;
    the autostart's roostd is named so too."""
    roost_env.start_daemon()  # python -m roost.cli.main daemon run
    assert roost_env.daemon is not None
    pid = roost_env.request("status")["pid"]
    assert pid == roost_env.daemon.pid
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "roostd"
    roost_env.roost_ok("daemon", "stop")
    assert roost_env.daemon.wait(20) == 0
    roost_env.roost_ok("daemon", "start")  # the autostart: python -m roost.supervise
    pid = roost_env.request("status")["pid"]
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "roostd"
