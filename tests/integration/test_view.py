"""`roost view`: the textual agent view, driven with textual's pilot against a real roostd
(shell jobs only; no pi needed), plus the pure parts (tree order, table rows, transcript
reading) on synthetic rows."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kit.lab import Lab
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from roost.job.tree import tree_order
from roost.view.app import GROUP_PREFIX, TranscriptScreen, TranscriptSource, ViewApp, table_rows
from roost.wire.client import daemon_running

SIZE = (160, 40)


def job_row(
    job_id: str,
    name: str,
    *,
    session: str | None = None,
    parent: str | None = None,
    state: str = "running",
    cwd: str = "/w/a",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "id": job_id,
        "name": name,
        "kind": "pi",
        "state": state,
        "status": "",
        "summary": "",
        "question": None,
        "cwd": cwd,
        "session": session,
        "parent": None,
        "parentSession": parent,
        "rootSession": None,
        "pending": {"replies": 0, "agent": 0},
        "created": f"2025-01-01T00:00:0{job_id[-1]}Z",
        "updated": "",
        **extra,
    }


# -- pure parts --------------------------------------------------------------------------------
def test_tree_order_puts_children_under_their_parents() -> None:
    rows = [
        job_row("00000001", "root", session="/s/1"),
        job_row("00000002", "other", session="/s/2"),
        job_row("00000003", "child", session="/s/3", parent="/s/1"),
        job_row("00000004", "grandchild", session="/s/4", parent="/s/3"),
        job_row("00000005", "orphan", session="/s/5", parent="/s/gone"),
        job_row("00000006", "child2", session="/s/6", parent="/s/1"),
    ]
    ordered = [(r["name"], r["depth"]) for r in tree_order(rows)]
    assert ordered == [
        ("root", 0),
        ("child", 1),
        ("grandchild", 2),
        ("child2", 1),
        ("other", 0),
        ("orphan", 0),
    ]


def test_tree_order_keeps_every_row_of_a_cycle_once() -> None:
    rows = [
        job_row("00000001", "a", session="/s/a", parent="/s/b"),
        job_row("00000002", "b", session="/s/b", parent="/s/a"),
        job_row("00000003", "c", session="/s/c"),
    ]
    ordered = [(r["name"], r["depth"]) for r in tree_order(rows)]
    assert ordered == [("c", 0), ("a", 0), ("b", 1)]


def plain(cells: tuple[Any, ...]) -> list[str]:
    return [cell.plain for cell in cells]


def test_table_rows_group_by_directory_with_arrows() -> None:
    rows = [
        job_row("00000001", "lead", session="/s/1"),
        job_row("00000002", "helper", session="/s/2", parent="/s/1", pending={"replies": 1, "agent": 2}),
        job_row(
            "00000003", "elsewhere", session="/s/3", cwd="/w/b", state="needs_input", question="which branch?"
        ),
    ]
    out = table_rows(rows, "dir")
    assert [key for key, _ in out] == [
        GROUP_PREFIX + "/w/a",
        "00000001",
        "00000002",
        GROUP_PREFIX + "/w/b",
        "00000003",
    ]
    assert plain(out[0][1])[6] == "/w/a (2)"  # the heading in the wide SUMMARY column
    # ID, NAME, STATE, STATUS, COST (no prices: —), TREE (a child: none), SUMMARY, META
    assert plain(out[2][1]) == ["00000002", "↳ helper", "running", "", "—", "", "", "✉3"]
    assert plain(out[4][1])[6] == "? which branch?"


def test_table_rows_group_by_state_names_the_parent() -> None:
    rows = [
        job_row("00000001", "lead", session="/s/1", state="done"),
        job_row("00000002", "helper", session="/s/2", parent="/s/1"),
    ]
    out = table_rows(rows, "state")
    assert [key for key, _ in out] == [
        GROUP_PREFIX + "running",
        "00000002",
        GROUP_PREFIX + "done",
        "00000001",
    ]
    assert plain(out[1][1])[1] == "helper"  # no arrow in the name column
    assert plain(out[1][1])[7] == "↳ lead"


def test_transcript_source_reads_a_session_incrementally(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    header = {"type": "session", "id": "abc", "cwd": "/w"}
    user = {
        "type": "message",
        "timestamp": "2025-01-01T10:00:00Z",
        "message": {"role": "user", "content": "hello there"},
    }
    answer = {
        "type": "message",
        "timestamp": "2025-01-01T10:00:01Z",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "hi back"}]},
    }
    source = TranscriptSource(job_row("00000001", "x", session=str(session)))
    assert source.poll() == (False, [])  # no file yet
    line = json.dumps(user)
    session.write_text(json.dumps(header) + "\n" + line[:10])  # the last line is half written
    assert source.poll() == (False, ["── session abc in /w"])
    with open(session, "a") as handle:
        handle.write(line[10:] + "\n" + json.dumps(answer) + "\n")
    reset, lines = source.poll()
    assert not reset and lines == ["10:00:00 user: hello there", "10:00:01 assistant: hi back"]
    session.write_text(json.dumps(header) + "\n")  # replaced by a shorter file
    assert source.poll() == (True, ["── session abc in /w"])


# -- the app against a real roostd ------------------------------------------------------------
@pytest.fixture
def view_env(roost_env: Lab, monkeypatch: pytest.MonkeyPatch) -> Lab:
    """roost_env whose variables this process uses too (the app talks to its roostd)."""
    for key in ("ROOST_HOME", "PI_CODING_AGENT_DIR", "HOME", "PI_OFFLINE"):
        monkeypatch.setenv(key, roost_env.env[key])
    for key in ("XDG_STATE_HOME", "ROOST_PI"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(roost_env.work)
    return roost_env


async def until(pilot: Pilot[None], predicate: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await pilot.pause(0.05)


def cell(app: ViewApp, job: str, column: str) -> str | None:
    table = app.query_one(DataTable)
    try:
        return str(table.get_cell(job, column).plain)
    except Exception:
        return None


def keys(app: ViewApp) -> list[str]:
    return [str(key.value) for key in app.query_one(DataTable).rows]


async def select(pilot: Pilot[None], app: ViewApp, job: str) -> None:
    table = app.query_one(DataTable)
    table.move_cursor(row=table.get_row_index(job))
    await pilot.pause()
    assert app.selected_key() == job


def test_a_row_that_arrives_before_the_transcript_is_composed_is_shown() -> None:
    """Enter pushes the transcript screen; the next rows can reach it before textual has
    composed it (seen in CI: NoMatches for its title, and the view crashed). The row is
    kept and the screen shows it once composed."""
    from textual.app import App

    row = job_row("0000000a", "early", state="running", updated="1")

    async def scenario() -> None:
        app: App[None] = App()
        async with app.run_test(size=SIZE) as pilot:
            screen = TranscriptScreen(row)
            app.push_screen(screen)
            screen.update_row({**row, "state": "done", "updated": "2"})  # before compose
            await until(pilot, lambda: screen.is_mounted, "the screen mounted")
            title = str(screen.query_one("#transcript-title", Static).render())
            assert "done" in title and screen.row["state"] == "done", title

    asyncio.run(scenario())


def test_view_starts_roostd_and_shows_no_jobs_then_a_new_one(view_env: Lab) -> None:
    assert not daemon_running()

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.loaded, "the first rows")
            assert daemon_running()
            empty = app.query_one("#empty", Static)
            assert empty.display and "no jobs" in str(empty.render())
            assert app.connected

            job = (
                await asyncio.to_thread(
                    view_env.roost_ok, "run", "--shell", "--name", "late", "--", "sleep", "30"
                )
            ).strip()
            await until(pilot, lambda: cell(app, job, "name") == "late", "the new job's row")
            assert not empty.display

            # roostd stops: the view says so and does not restart it by itself; `r` does.
            await asyncio.to_thread(view_env.roost_ok, "daemon", "stop")
            await until(pilot, lambda: not app.connected, "the lost connection")
            status = app.query_one("#status", Static)
            assert "lost roostd" in str(status.render())
            await pilot.pause(2.5)  # past a reconnect attempt
            assert not daemon_running() and not app.connected
            await pilot.press("r")
            await until(pilot, lambda: app.connected and daemon_running(), "roostd again")
            await until(pilot, lambda: cell(app, job, "state") == "running", "the adopted job")
            await pilot.press("q")
        assert not app.is_running

    asyncio.run(scenario())


def test_view_is_live_and_opens_transcripts(view_env: Lab) -> None:
    env = view_env
    gate = env.root / "go"
    script = f"echo first-line; while [ ! -e {gate} ]; do sleep 0.05; done; echo second-line; sleep 30"
    alpha = env.roost_ok("run", "--shell", "--name", "alpha", "--", "sh", "-c", script).strip()
    bravo = env.roost_ok("run", "--shell", "--name", "bravo", "--", "sleep", "30").strip()
    charlie = env.roost_ok("run", "--shell", "--name", "charlie", "--", "sleep", "30").strip()

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: all(cell(app, j, "state") == "running" for j in (alpha, bravo, charlie)),
                "three running rows",
            )
            assert keys(app)[0].startswith(GROUP_PREFIX)  # grouped by directory
            assert cell(app, alpha, "name") == "alpha"

            # A state change shows up by itself.
            await asyncio.to_thread(env.roost_ok, "stop", bravo)
            await until(pilot, lambda: cell(app, bravo, "state") == "stopped", "bravo stopped")
            # A removed job disappears.
            await asyncio.to_thread(env.roost_ok, "rm", charlie)
            await until(pilot, lambda: charlie not in keys(app), "charlie's row gone")

            # Enter opens the transcript: a shell job shows its output, and follows it.
            await select(pilot, app, alpha)
            await pilot.press("enter")
            screen = await until(
                pilot,
                lambda: isinstance(app.screen, TranscriptScreen) and app.screen,
                "the transcript screen",
            )
            assert screen.row["id"] == alpha
            await until(pilot, lambda: "first-line" in screen.lines, "alpha's first line")
            gate.touch()
            await until(pilot, lambda: "second-line" in screen.lines, "alpha's next line")
            # The open transcript follows the job's row.
            await asyncio.to_thread(env.roost_ok, "stop", alpha)
            await until(pilot, lambda: screen.row["state"] == "stopped", "the title to follow")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, TranscriptScreen), "back")

            # `o` opens too; q goes back (not quit) from a transcript.
            await select(pilot, app, bravo)
            await pilot.press("o")
            await until(pilot, lambda: isinstance(app.screen, TranscriptScreen), "bravo's log")
            await pilot.press("q")
            await until(pilot, lambda: not isinstance(app.screen, TranscriptScreen), "back again")
            assert app.is_running

            # g: grouped by state; the cursor stays on its job.
            await select(pilot, app, alpha)
            await pilot.press("g")
            await until(pilot, lambda: GROUP_PREFIX + "stopped" in keys(app), "state groups")
            assert app.selected_key() == alpha
            await pilot.press("g")
            await until(pilot, lambda: GROUP_PREFIX + "stopped" not in keys(app), "dir groups")

            await pilot.press("r")
            await pilot.pause(0.3)
            assert set(keys(app)) - {k for k in keys(app) if k.startswith(GROUP_PREFIX)} == {alpha, bravo}
            await pilot.press("q")
        assert not app.is_running

    asyncio.run(scenario())
