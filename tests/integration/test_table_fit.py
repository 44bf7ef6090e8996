"""`roost ls` and `roost show` as a person and a script see them: in a pipe (Lab.cli) one
job per line with every field whole; in a terminal of 80 and of 200 columns (a pty) a table
that fits, ids and STATE whole and the question readable; `--wide` everything."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from kit.lab import Lab
from kit.term import columns_of, in_pty, roost_argv

OPTIONS = (
    "Export the findings as JSON into findings.json in the project root",
    "Export them as YAML next to the sources",
)
QUESTION = f"Pick one [1. {OPTIONS[0]} | 2. {OPTIONS[1]}]"
LONG_NAME = "a-long-name-for-the-exporting-job"


@pytest.fixture
def jobs(fake_pi_env: Lab) -> tuple[Lab, str, str]:
    """A pi job waiting on a long dialog question and a shell job, both with long names."""
    env = fake_pi_env
    asking = env.run_job("--name", LONG_NAME, f"[[dialog select {','.join(OPTIONS)}]] go")
    env.wait_state(asking, "needs_input", timeout=30)
    shell = env.run_job("--shell", "--name", "the-shell-job-with-a-long-name", "--", "sleep", "60")
    env.wait_state(shell, "running", timeout=30)
    return env, asking, shell


def job_lines(text: str, *ids: str) -> dict[str, list[str]]:
    return {job: [line for line in text.splitlines() if job in line] for job in ids}


def test_ls_in_a_pipe_is_one_whole_line_per_job(jobs: tuple[Lab, str, str]) -> None:
    env, asking, shell = jobs
    for args in (("ls",), ("ls", "--tree"), ("ls", "--group", "state")):
        out = env.roost_ok(*args)
        assert "…" not in out, out
        lines = job_lines(out, asking, shell)
        assert len(lines[asking]) == 1 and len(lines[shell]) == 1, out
        row = lines[asking][0]
        assert re.match(rf"{asking}\s+{LONG_NAME}\s+needs_input\s+waiting on a dialog\s", row), row
        # whole, then META (the task, held while the dialog is open), no padding after
        assert row.endswith(f"? {QUESTION}  ✉1"), row
        assert re.match(rf"{shell}\s+the-shell-job-with-a-long-name\s+running\s", lines[shell][0])
        assert not any(line != line.rstrip() for line in out.splitlines()), out


@pytest.mark.parametrize("columns", [80, 200])
def test_ls_fits_the_terminal_and_keeps_the_question(jobs: tuple[Lab, str, str], columns: int) -> None:
    env, asking, shell = jobs
    out = in_pty(roost_argv("ls"), env.env, columns, cwd=env.work)
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), out
    header = next(line for line in lines if line.startswith("ID "))
    table = lines[lines.index(header) + 1 :]
    cells = columns_of(table, header)
    assert asking in cells["ID"] and shell in cells["ID"], out  # whole ids
    assert cells["STATE"][cells["ID"].index(asking)] == "needs_input"
    # The question, wrapped in its column from the job's row on, reads whole.
    start = cells["ID"].index(asking)
    end = next((i for i in range(start + 1, len(table)) if cells["ID"][i]), len(table))
    assert " ".join(cells["SUMMARY / QUESTION"][start:end]) == "? " + QUESTION, out
    if columns == 200:  # room for every column, whole (the long question still wraps)
        assert header.split() == ["ID", "NAME", "STATE", "STATUS", "COST", "SUMMARY", "/", "QUESTION", "META"]
        assert cells["NAME"][start] == LONG_NAME and "…" not in out, out
        assert cells["STATUS"][start] == "waiting on a dialog" and cells["META"][start] == "✉1"
        assert "hidden" not in out
    else:  # the least useful columns went first, and the table says so
        assert "STATUS" not in header and "(hidden: STATUS" in out, out


def test_ls_wide_shows_everything_in_a_narrow_terminal(jobs: tuple[Lab, str, str]) -> None:
    env, asking, _ = jobs
    out = in_pty(roost_argv("ls", "--wide"), env.env, 80, cwd=env.work)
    # One logical line per job (the terminal, not roost, wraps it at 80 columns).
    row = next(line for line in out.splitlines() if asking in line)
    assert LONG_NAME in row and "waiting on a dialog" in row and f"? {QUESTION}  ✉1" in row
    assert "…" not in out and "hidden" not in out


def test_show_in_a_pipe_never_wraps(jobs: tuple[Lab, str, str]) -> None:
    env, asking, _ = jobs
    out = env.roost_ok("show", asking)
    assert f"     question  {QUESTION}\n" in out, out
    assert all("…" not in line for line in out.splitlines())


def test_mailbox_in_a_pipe_shows_each_item_whole_on_one_line(jobs: tuple[Lab, str, str]) -> None:
    env, asking, _ = jobs
    task = f"[[dialog select {','.join(OPTIONS)}]] go"
    lines = [line for line in env.roost_ok("mailbox", asking).splitlines() if "pending" in line]
    assert len(lines) == 1 and lines[0].endswith(task), lines


def test_usage_report_never_cuts_a_name(roost_env: Lab) -> None:
    """A removed job's figures (a line of the usage log, as `roost rm` writes it) under a
    name longer than the old 24-character label column."""
    env = roost_env
    line = {
        "job": "0badc0de",
        "name": LONG_NAME,
        "session": "/s/x",
        "rootSession": None,
        "day": "2026-01-02",
        "model": "p/m",
        "input": 1200,
        "output": 30,
        "cacheRead": 0,
        "cacheWrite": 0,
        "cost": 0.0123,
        "requests": 2,
        "removed": "2026-01-02T00:00:00Z",
    }
    home = Path(env.env["ROOST_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "usage.jsonl").write_text(json.dumps(line) + "\n")
    out = env.roost_ok("usage")
    header, row, total = out.splitlines()
    assert row.startswith(f"0badc0de {LONG_NAME} (rm) "), out
    assert header.index("REQ") + 3 == row.index(" 2 ") + 2 and row.endswith("$0.01"), out
