"""`roost view`'s layout and keys (issue 36): group labels readable (whole at 120 columns,
the last two path parts at 80), worktree jobs under their repository (the web's rule,
roost.job.tree.group_folder), an empty STATUS column takes no room, the events pane in 80
columns (time as HH:MM:SS), the help scrolls, the assistant's Markdown rendered; the keys
s t x d m on the selected job (in the footer and the palette), Remove after a yes; an
outcome said in the header, never a toast over the table's rows."""

from __future__ import annotations

import asyncio

from kit.lab import Lab
from kit.pilot import until
from textual.containers import VerticalScroll
from textual.widgets import DataTable

from roost.display.events import pane_line
from roost.display.views import job_groups, shown_line
from roost.view.app import ViewApp
from roost.view.keys import KEYS, ConfirmScreen
from roost.view.replybox import HelpScreen
from roost.view.table import GROUP_PREFIX, fitted_rows, table_rows

FOLDER = "/srv/projects/customers/acme-corporation/website-frontend-next"


def row(job: str, name: str, **over: object) -> dict[str, object]:
    base = {
        "id": job,
        "name": name,
        "kind": "pi",
        "state": "done",
        "status": "",
        "summary": "ok",
        "question": None,
        "cwd": FOLDER,
        "session": f"/s/{job}",
        "parentSession": None,
        "pending": {"replies": 0, "agent": 0},
        "worktree": None,
        "usage": {"cost": 0.01},
        "created": f"2026-12-06T09:00:{job[-2:]}Z",
        "updated": "",
    }
    return {**base, **over}


def heading(out: list[tuple[str, tuple[object, ...], int]], columns: list[tuple[str, str, int]]) -> str:
    keys = [k for k, _, _ in columns]
    return next(
        cells[keys.index("summary")].plain
        for key, cells, _ in out  # type: ignore[attr-defined]
        if key.startswith(GROUP_PREFIX)
    )


def test_a_group_label_is_whole_at_120_columns_and_its_last_two_parts_at_80() -> None:
    rows = [row("00000001", "a"), row("00000002", "b")]
    columns, out = fitted_rows(table_rows(rows), 118)
    assert heading(out, columns) == f"{FOLDER} (2)"
    columns, out = fitted_rows(table_rows(rows), 76)  # roost view at 80 columns
    assert heading(out, columns) == "…/acme-corporation/website-frontend-next (2)"


def test_an_empty_status_column_takes_no_room() -> None:
    rows = [row("00000001", "a"), row("00000002", "b")]
    columns, _ = fitted_rows(table_rows(rows), 118)
    assert "status" not in [k for k, _, _ in columns]
    columns, _ = fitted_rows(table_rows([*rows, row("00000003", "c", status="running tool bash")]), 118)
    assert "status" in [k for k, _, _ in columns]


def test_worktree_jobs_sit_under_their_repository() -> None:
    rows = [
        row("00000001", "a"),
        row(
            "00000002",
            "wt",
            cwd="/rh/worktrees/00000002",
            worktree={"path": "/rh/worktrees/00000002", "branch": "roost/wt", "origin": FOLDER},
        ),
        row("00000003", "other", cwd="/elsewhere"),
    ]
    groups = job_groups(rows)
    assert [(g, [r["name"] for r in members]) for g, members in groups] == [
        (FOLDER, ["a", "wt"]),
        ("/elsewhere", ["other"]),
    ]


def test_the_events_pane_line_fits_80_columns_with_the_time_as_hh_mm_ss() -> None:
    event = {
        "seq": 1234,
        "time": "2026-12-06T09:12:34.567Z",
        "type": "job.state",
        "job": {"id": "1a2b3c4d", "name": "tests"},
        "from": "running",
        "to": "done",
    }
    text = pane_line(event)
    assert text.startswith("09:12:34 job.state tests: ") and "2026-12-06" not in text
    assert "#1234" not in text and len(text) <= 76


def test_the_assistant_text_is_rendered_as_markdown() -> None:
    from rich.console import Console

    console = Console(width=60, record=True)
    console.print(shown_line("09:00:00 assistant: # Review\n\n**fine**\n\n| a | b |\n|---|---|\n| 1 | 2 |"))
    text = console.export_text()
    assert "# Review" not in text and "**fine**" not in text and "Review" in text
    assert "──" in text  # the table's rule
    assert shown_line("09:00:00 user: **as typed**").plain == "09:00:00 user: **as typed**"


def test_the_keys_act_on_the_selected_job_and_say_so_in_the_header(view_env: Lab) -> None:
    env = view_env
    job = env.run_job("--name", "keyed", "hello")
    env.wait(job)

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.query_one(DataTable)
            await until(pilot, lambda: job in [k.value for k in table.rows], "the rows")
            shown = {active.binding.action for active in app.active_bindings.values()}
            for action, _, _ in KEYS:
                assert action in shown, (action, shown)
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert {"Stop job", "Start job", "Remove job", "Diff job", "Merge job"} <= set(titles)

            table.move_cursor(row=table.get_row_index(job))
            await pilot.press("s")
            await until(pilot, lambda: env.row(job)["state"] == "stopped", "stopped", 30)
            await until(pilot, lambda: "keyed: stopped" in app.sub_title, "said in the header")
            await pilot.press("t")
            await until(pilot, lambda: env.row(job)["state"] != "stopped", "started", 30)
            await pilot.press("d")
            await until(pilot, lambda: "no worktree" in app.sub_title, "no diff to show")
            assert not app._notifications  # nothing said as a toast over the rows

            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("n")
            await until(pilot, lambda: "keyed: kept" in app.sub_title, "kept")
            assert env.job_named("keyed") is not None
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("y")
            await until(pilot, lambda: f"removed keyed ({job})" in app.sub_title, "removed", 30)
            assert env.job_named("keyed") is None

            # The help scrolls to its last line at 80x24.
            await pilot.press("question_mark")
            help_screen = await until(
                pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen, "the help"
            )
            scroll = help_screen.query_one(VerticalScroll)
            assert scroll.max_scroll_y > 0
            scroll.scroll_end(animate=False)
            await until(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y, "the end")
            await pilot.press("escape")
            await pilot.press("q")

    asyncio.run(scenario())


def test_the_other_columns_give_way_for_a_whole_heading_at_120_columns() -> None:
    wt = {
        "path": "/rh/worktrees/0000000a",
        "branch": "roost/wt-one-db3236cd-and-a-much-longer-tail",
        "base": "0" * 40,
    }
    rows = [
        row(
            "00000001",
            "site-1",
            cwd="/tmp/vdemo/projects/website",
            worktree=wt,
            summary="Noted: a long summary of what the job did, longer than the screen " * 3,
        ),
        row(
            "00000002",
            "infra-1",
            cwd="/tmp/vdemo/work/infra-terraform-modules",
            state="needs_input",
            question="Shall I pretend I checked?",
        ),
    ]
    columns, out = fitted_rows(table_rows(rows), 118)
    headings = [
        cells[[k for k, _, _ in columns].index("summary")].plain  # type: ignore[attr-defined]
        for key, cells, _ in out
        if key.startswith(GROUP_PREFIX)
    ]
    assert headings == ["/tmp/vdemo/projects/website (1)", "/tmp/vdemo/work/infra-terraform-modules (1)"]
