"""What the command line shows a person (issue 33, section 3): `run --each`'s reading of its
file, a reaped job shown `idle` on every human surface from one function (roost ls, show,
view, the web page), and `roost --help` whole at 80 columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from roost.cli.commands.jobs import _each_tasks
from roost.display import views


@pytest.mark.parametrize(
    ("text", "tasks"),
    [
        ("[WIP] fix the parser\n[WIP] and the lexer\n", ["[WIP] fix the parser", "[WIP] and the lexer"]),
        ("[ ] a checkbox\n\n[x] done one\n", ["[ ] a checkbox", "[x] done one"]),
        ("[1] first\n", ["[1] first"]),
        ("[]x\n", ["[]x"]),
        ('["one", "two"]\n', ["one", "two"]),
        ('  [\n  {"task": "one", "name": "n1"},\n  "two"\n]\n', [{"task": "one", "name": "n1"}, "two"]),
        ("plain\nlines\n", ["plain", "lines"]),
    ],
)
def test_each_reads_lines_unless_the_whole_file_is_a_json_list(
    tmp_path: Path, text: str, tasks: list[Any]
) -> None:
    path = tmp_path / "tasks"
    path.write_text(text)
    assert _each_tasks(str(path)) == tasks


@pytest.mark.parametrize("text", ['["one",\n "two",]\n', "[\n  one\n]\n", '[{"task": "x"'])
def test_a_file_meant_as_json_that_is_not_is_refused(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(text)
    with pytest.raises(SystemExit) as exited:
        _each_tasks(str(path))
    assert exited.value.code == 2
    assert "is not a JSON list" in capsys.readouterr().err


ROW: dict[str, Any] = {
    "id": "0123abcd",
    "name": "sleeper",
    "state": "reaped",
    "status": "",
    "cwd": "/tmp/w",
    "summary": "echo: hello",
    "kind": "pi",
    "created": "2026-01-01T00:00:00Z",
    "updated": "2026-01-01T00:00:00Z",
    "pending": {"replies": 0, "agent": 0},
    "worker": {"pid": None, "state": "stopped", "crashes": 0},
    "usage": None,
}


def test_reaped_is_shown_idle_in_the_table_and_the_detail(capsys: pytest.CaptureFixture[str]) -> None:
    assert views.state_text("reaped") == "idle" and views.state_text("done") == "done"
    for group in ("dir", "state"):
        views.print_table([dict(ROW)], group=group)
        out = capsys.readouterr().out
        assert "idle" in out and "reaped" not in out, out
    views.print_detail(dict(ROW))
    out = capsys.readouterr().out
    assert "state  idle" in out and "reaped" not in out, out
    assert "worker  no worker" in out and "None" not in out, out


def test_reaped_is_shown_idle_in_the_view() -> None:
    from roost.view.table import table_rows

    for group in ("dir", "state"):
        rows = table_rows([dict(ROW)], group)
        texts = [cell.plain for _, cells in rows for cell in cells]
        assert "idle" in texts and "reaped" not in " ".join(texts), texts
    from roost.view.table import HEADING

    key, cells = table_rows([dict(ROW)], "state")[0]  # the group's heading, in SUMMARY
    assert key.startswith("@group:") and cells[HEADING].plain == "idle (1)"


def test_reaped_is_shown_idle_on_the_web_page() -> None:
    from roost.web.app import ENV
    from roost.web.pageparts import job_list

    groups = job_list({ROW["id"]: dict(ROW)})  # as the list page and its live part make it
    html = ENV.get_template("_tree.html").render(connected=True, groups=groups, filtered=False)
    assert '<span class="state">idle</span>' in html and "state-reaped" in html, html
    head = ENV.get_template("_head.html").render(row=dict(ROW), read_only=True, csrf="")
    assert ">idle</span>" in head and ">reaped<" not in head, head


def test_a_worker_line_never_says_pid_none() -> None:
    line = views._worker_line
    assert line({"pid": None, "state": "stopped", "crashes": 0}) == "no worker"
    assert line({"pid": None, "state": "starting", "crashes": 2}) == (
        "no worker (starting, 2 recent crashes)"
    )
    assert line({"pid": 42, "state": "running", "crashes": 0}) == ("pid 42 (running, 0 recent crashes)")


def test_the_command_list_is_whole_at_80_columns() -> None:
    from roost.cli.main import COMMANDS, SHORT, cli

    assert set(SHORT) == set(COMMANDS)
    text = cli.get_help(click.Context(cli, info_name="roost", terminal_width=80, max_content_width=80))
    listing = text.split("Commands:\n")[1].split("\n\n")[0].splitlines()
    assert len(listing) == len(COMMANDS)
    for line in listing:
        assert len(line) <= 80 and not line.endswith("..."), line
