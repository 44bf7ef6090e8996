"""The `roost` entry (roost.cli.entry): the plain forms of `ls`, `ls --json`, `reply`,
`run`, `search` and `wait` run without click and do exactly what their click commands do (the same request,
output and exit code); every other command line goes to click unchanged."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kit.jobs import run_job, settle
from kit.lab import Lab

from roost.cli import entry, jobcalls, searchcalls
from roost.cli.main import cli


class Recorder:
    """Stands in for roostd: records each request, answers like roostd would."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def request(self, op: str, **args: Any) -> dict[str, Any]:
        self.requests.append((op, args))
        return {"jobs": [], "status": "delivered", "id": "0000abcd", "results": []}

    def call(self, op: str, args: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        self.requests.append((op, {**args, "socket timeout": timeout}))
        return {"settled": True, "row": {"id": "0000abcd", "state": "done"}}


@pytest.mark.parametrize(
    "argv",
    [
        ["ls"],
        ["ls", "--json"],
        ["reply", "0000abcd", "two", "words"],
        ["run", "a", "task", "é"],
        ["search", "payment retr*"],
        ["search", "x", "--json"],
        ["search", "--json", "x"],
        ["wait", "0000abcd"],
        ["wait", "0000abcd", "--timeout", "5"],
        ["wait", "0000abcd", "--timeout", "1e3"],
    ],
)
def test_a_plain_form_sends_what_its_click_command_sends(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for way in ("click", "quick"):
        recorder = Recorder()

        @contextmanager
        def daemon(autostart: bool = True, _r: Recorder = recorder) -> Iterator[Recorder]:
            yield _r

        monkeypatch.setattr(jobcalls, "daemon", daemon)
        monkeypatch.setattr(searchcalls, "daemon", daemon)
        if way == "click":
            result = CliRunner().invoke(cli, argv)
            assert result.exit_code == 0, result.output
        else:
            call = entry.quick(argv)
            assert call is not None
            call()
        sent[way] = recorder.requests
    assert sent["quick"] == sent["click"] and sent["quick"]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--help"],
        ["ls", "--tree"],
        ["ls", "-h"],
        ["ls", "x"],
        ["reply", "job"],
        ["reply", "job", "--", "-x"],
        ["run"],
        ["run", "-"],
        ["run", "--name", "n", "t"],
        ["run", "t", "--help"],
        ["show", "job"],
        ["run", "bad\udcff"],
        ["search"],
        ["search", "a", "b"],
        ["search", "--kind", "user", "x"],
        ["search", "-x"],
        ["search", "x", "--json", "--json"],
        ["wait"],
        ["wait", "a", "b"],
        ["wait", "a", "--any"],
        ["wait", "a", "--timeout"],
        ["wait", "a", "--timeout", "soon"],
        ["wait", "a", "--timeout=5"],
        ["wait", "--timeout", "5", "a"],
        ["wait", "a", "--for", "done"],
        ["wait", "-", "--timeout", "5"],
    ],
)
def test_any_other_command_line_goes_to_click(argv: list[str]) -> None:
    assert entry.quick(argv) is None


def test_completion_goes_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_ROOST_COMPLETE", "bash_complete")
    assert entry.quick(["ls"]) is None


ROOST_COMMAND = Path(sys.executable).with_name("roost")  # the installed script (scripts/roost)

# What the quick path must not load: each costs milliseconds of every command (README:
# Start-up). `re` and `enum` come with json, socket and a console-script wrapper.
HEAVY = (
    "click",
    "rich",
    "orjson",
    "pathlib",
    "re",
    "enum",
    "json",
    "socket",
    "selectors",
    "contextlib",
    "collections",
    "typing",
)


def imported(env: Lab, *args: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOST_COMMAND), *args],
        env=env.env,
        cwd=env.work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return {
        line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }


def test_the_installed_command_is_roost_s_script() -> None:
    assert (
        ROOST_COMMAND.read_text().splitlines()[1:]
        == (Path(__file__).parents[2] / "scripts" / "roost").read_text().splitlines()[1:]
    )


def test_the_plain_forms_run_without_click_and_print_the_same(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "first task")
    assert settle(env, job) == "done"
    for args in (
        ("ls",),
        ("ls", "--json"),
        ("reply", job, "again"),
        ("run", "second task"),
        ("wait", job, "--timeout", "60"),
    ):
        modules = imported(env, *args)
        assert "roost.cli.entry" in modules and "roost.wire.client" in modules, args
        assert not modules.intersection(HEAVY), (args, modules.intersection(HEAVY))
        if args[0] == "reply":
            settle(env, job)
    for row in env.ls():  # the job `run` made too: the lists below must not change meanwhile
        settle(env, row["id"])
    click_way = [sys.executable, "-m", "roost.cli.main"]
    for args in (("ls",), ("ls", "--json"), ("ls", "--tree", "--json")):
        quick = env.roost_ok(*args)
        slow = subprocess.run(
            [*click_way, *args],
            env=env.env,
            cwd=env.work,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert quick == slow
    for args in (("wait", job), ("wait", job, "--timeout", "30")):
        assert env.roost_ok(*args) == "done\n"
    # Refusals: the same line and exit code either way.
    for args in (("reply", "nosuchjob", "hi"), ("wait", "nosuchjob")):
        quick_proc = env.roost(*args)
        slow_proc = subprocess.run(
            [*click_way, *args], env=env.env, cwd=env.work, capture_output=True, text=True, timeout=60
        )
        assert (
            (quick_proc.returncode, quick_proc.stdout, quick_proc.stderr)
            == (slow_proc.returncode, slow_proc.stdout, slow_proc.stderr)
            == (2, "", "roost: no job with id or name 'nosuchjob' (roost ls lists them)\n")
        )
    env.roost_ok("stop", job)
    stopped = env.roost("reply", job, "to a stopped job")
    assert stopped.returncode == 1 and stopped.stdout == "stopped\n"
    assert stopped.stderr == f"roost: job {job} is stopped; `roost start {job}` first\n"
    assert "Usage: roost run" in env.roost_ok("run", "--help")  # click's, unchanged
