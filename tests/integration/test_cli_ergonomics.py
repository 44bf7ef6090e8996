"""Integration (fake pi): the command line as a newcomer meets it (issue 33, section 3).

`run --each` reads a line file that starts with `[` as lines; `merge` of a job that committed
nothing is refused; the groups with an obvious default run it and `daemon` alone prints its
help; an unknown command suggests the nearest; `rm A B` removes both; `show` never prints
`pid None`; `schedule pause/resume/rm` say what they did; `result --json` is one line; a
reaped job reads `idle` (its JSON keeps `reaped`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kit.jobs import settle
from kit.lab import Lab
from kit.wait import wait_until

pytestmark = pytest.mark.timeout(300)

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "PATH": "/usr/bin:/bin",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=GIT_ENV
    ).stdout


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "t")  # roostd's merge commit
    git(path, "config", "user.email", "t@t")
    (path / "a.txt").write_text("base\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "first")
    return path


def test_each_reads_a_line_file_that_starts_with_a_bracket(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    tasks = env.work / "tasks.txt"
    tasks.write_text("[WIP] fix the parser\n\n[x] and the lexer\n")
    ids = env.roost_ok("run", "--each", str(tasks)).split()
    assert len(ids) == 2
    assert [env.show(job)["task"] for job in ids] == ["[WIP] fix the parser", "[x] and the lexer"]
    broken = env.work / "broken.json"
    broken.write_text('["one",\n "two",]\n')  # meant as JSON: its error, not two odd tasks
    refused = env.roost("run", "--each", str(broken))
    assert refused.returncode == 2 and "is not a JSON list" in refused.stderr, refused
    assert len(env.ls()) == 2


def test_merge_of_a_job_that_committed_nothing_is_refused(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    repo = make_repo(env.work / "repo")
    job = env.run_job("--worktree", "--name", "lazy", "edit it", cwd=repo)
    assert settle(env, job) == "done"
    tree = Path(env.row(job)["worktree"]["path"])
    (tree / "a.txt").write_text("edited\n")
    (tree / "new.txt").write_text("new\n")
    merged = env.roost("merge", job)
    assert merged.returncode == 1, merged
    assert merged.stdout == ""
    assert "nothing to merge" in merged.stderr and "committed nothing" in merged.stderr
    assert "uncommitted changes to 2 files" in merged.stderr, merged.stderr
    assert git(repo, "log", "--format=%s") == "first\n"
    git(tree, "commit", "-qam", "edit")  # once committed: merged, then already up to date
    assert "merged into main" in env.roost_ok("merge", job)
    again = env.roost("merge", job)
    assert again.returncode == 0 and "already up to date" in again.stdout, again


def test_groups_run_their_default_and_daemon_alone_prints_its_help(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("group", "add", "g1", "--parallel", "2")
    for words, listing in (
        (["group"], "g1  parallel 2"),
        (["schedule"], "no schedules"),
        (["agents"], "NAME"),
    ):
        proc = env.roost(*words)
        assert proc.returncode == 0 and listing in proc.stdout, proc
        assert proc.stdout == env.roost_ok(*words, "ls")
    assert "With no COMMAND: roost group ls." in env.roost_ok("group", "--help")
    for words in (["daemon"], []):
        proc = env.roost(*words)
        assert proc.returncode == 0 and proc.stderr == "", proc
        assert proc.stdout.startswith(f"Usage: roost {' '.join(words)}".rstrip() + " [OPTIONS]")


@pytest.mark.parametrize(
    ("words", "suggested"),
    [
        (["log"], "did you mean roost logs?"),
        (["ps"], "did you mean roost ls?"),
        (["list"], "did you mean roost ls?"),
        (["shwo"], "did you mean roost show?"),
        (["schedule", "lst"], "did you mean roost schedule ls?"),
        (["daemon", "stat"], "did you mean roost daemon start or roost daemon status?"),
    ],
)
def test_an_unknown_command_suggests_the_nearest(roost_env: Lab, words: list[str], suggested: str) -> None:
    proc = roost_env.roost(*words)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr.count("\n") == 1 and suggested in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"roost: No such command '{words[-1]}'")


def test_rm_removes_every_job_named_and_says_which_failed(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    a, b, c = (env.run_job("--name", name, "--shell", "--", "true") for name in "abc")
    for job in (a, b, c):
        wait_until(lambda job=job: env.row(job)["state"] == "done", 30, what="the shell job")
    both = env.roost("rm", a, "b")
    assert both.returncode == 0 and both.stdout == f"{a} removed\n{b} removed\n", both
    mixed = env.roost("rm", "nosuch", c)
    assert mixed.returncode == 2, mixed
    assert mixed.stdout == f"{c} removed\n"
    assert mixed.stderr.startswith("roost: no job with id or name 'nosuch'")
    assert mixed.stderr.count("\n") == 1
    assert env.ls() == []


def test_show_never_prints_pid_none(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    shell = env.run_job("--shell", "--", "true")
    wait_until(lambda: env.row(shell)["state"] == "done", 30, what="the shell job")
    assert env.show(shell)["worker"]["pid"] is None
    shown = env.roost_ok("show", shell)
    assert "None" not in shown and "worker  no worker" in shown, shown
    pi_job = env.run_job("hello")
    assert settle(env, pi_job) == "done"
    assert "worker  pid " in env.roost_ok("show", pi_job)


def test_schedule_pause_resume_and_rm_say_what_they_did(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("schedule", "add", "tick", "--every", "1h", "tick tock")
    assert env.roost_ok("schedule", "pause", "tick") == "schedule tick paused\n"
    resumed = env.roost_ok("schedule", "resume", "tick")
    assert resumed.startswith("schedule tick resumed; next ") and resumed.count("\n") == 1
    assert env.roost_ok("schedule", "rm", "tick") == ("schedule tick removed (the jobs it made stay)\n")


def test_result_json_is_one_line(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    (env.work / "schema.json").write_text('{"type": "object"}')
    job = env.run_job(
        "--output-schema",
        str(env.work / "schema.json"),
        '[[answers {"verdict": "ok", "items": [1, 2]}]] check it',
    )
    assert settle(env, job) == "done"
    printed = env.roost_ok("result", job, "--json")
    assert printed == '{"verdict":"ok","items":[1,2]}\n'


def test_a_reaped_job_reads_idle_and_its_json_keeps_reaped(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.configure(warmSeconds=1)
    job = env.run_job("--name", "sleeper", "hello")
    wait_until(lambda: env.show(job)["state"] == "reaped", 60, what="the job reaped")
    assert env.row(job)["state"] == "reaped"  # the JSON: the contract
    listed = env.roost_ok("ls")
    assert "idle" in listed and "reaped" not in listed, listed
    by_state = env.roost_ok("ls", "--group", "state")
    assert by_state.splitlines()[0] == "idle" and "reaped" not in by_state, by_state
    shown = env.roost_ok("show", job)
    assert "state  idle" in shown and "reaped" not in shown, shown
