"""`roost view` at 80x24: every waiting job's question on screen, and replies from inside it
(the `a` key: a reply box; an open select dialog's choices to pick). Driven in tmux as a
person would (the real `roost view` on a terminal), and with textual's pilot for the exact
state; jobs run the fake pi against a real roostd."""

from __future__ import annotations

import asyncio
import shlex
import sys

from kit.attach import Tmux
from kit.lab import Lab
from kit.pilot import until
from kit.wait import wait_until
from textual.widgets import DataTable

from roost.view.app import ViewApp
from roost.view.replybox import HelpScreen, ReplyScreen, reply_text
from roost.view.table import GROUP_PREFIX, QUESTION_LINES, fitted_rows, table_rows

OPTIONS = (
    "Export the findings as JSON into findings.json in the project root",
    "Export them as YAML next to the sources",
)
DIALOG_TASK = f"[[dialog select {','.join(OPTIONS)}]] export"
ASK_TASK = "[[ask]] look at the parser"


def waiting_jobs(env: Lab) -> tuple[str, str, str]:
    """A job on a select dialog, one whose answer asks a question, a running shell job."""
    dialog = env.run_job("--name", "exporter", DIALOG_TASK)
    asking = env.run_job("--name", "asker", ASK_TASK)
    shell = env.run_job("--shell", "--name", "builder", "--", "sleep", "60")
    env.wait_state(dialog, "needs_input", timeout=30)
    env.wait_state(asking, "needs_input", timeout=30)
    return dialog, asking, shell


def answers(env: Lab, job: str) -> list[str]:
    return [
        str(entry["message"]["content"][0]["text"])
        for entry in env.session(job)
        if entry.get("type") == "message"
        and entry["message"].get("role") == "assistant"
        and entry["message"].get("content")
    ]


# -- tmux: the real `roost view` in an 80x24 terminal ----------------------------------------------
def test_view_in_tmux_at_80x24_shows_questions_and_replies(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    dialog, asking, shell = waiting_jobs(env)
    variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.env.items())
    tmux = Tmux("view", 80, 24)
    try:
        tmux.start(
            f"cd {shlex.quote(str(env.work))} && env {variables} "
            f"{shlex.quote(sys.executable)} -m roost.cli.main view"
        )

        def screen() -> str:
            return tmux.capture()

        wait_until(lambda: "Should I go on?" in screen(), 30, "the asker's question")
        text = screen()
        lines = text.splitlines()
        assert all(len(line) <= 80 for line in lines)
        for job in (dialog, asking, shell):  # whole ids
            assert job in text, text
        # The dialog's question, wrapped in its column, reads from its start.
        assert "? Pick one [1. Export the" in text and "JSON into findings.json" in text, text
        assert "needs_input" in text

        # `?` explains the keys and the symbols; esc goes back.
        tmux.send_keys("?")
        wait_until(lambda: "select a job" in screen(), 10, "the help")
        tmux.send_keys("End")  # it scrolls to its last paragraph at 80x24
        wait_until(lambda: "⎇ BRANCH" in screen() and "roost ls --wide" in screen(), 10, "its end")
        tmux.send_keys("Escape")
        wait_until(lambda: "⎇ BRANCH" not in screen(), 10, "the help closed")

        # The cursor starts on the first job; Down moves one job (a row may take 3 lines).
        order = [
            line.split()[0]
            for line in lines
            if line.split()[:1] and line.split()[0] in (dialog, asking, shell)
        ]
        current = order[0]

        def select(job: str) -> None:
            nonlocal current
            steps = order.index(job) - order.index(current)
            for _ in range(abs(steps)):
                tmux.send_keys("Down" if steps > 0 else "Up")
            current = job

        # The dialog: `a` on its row lists the choices; picking the second answers it.
        select(dialog)
        tmux.send_keys("a")
        wait_until(lambda: "Answer the dialog of exporter" in screen(), 10, "the reply box")
        assert "2. Export them as YAML next to the sources" in screen()
        tmux.send_keys("Down")
        tmux.send_keys("Enter")
        wait_until(
            lambda: f"chose: {OPTIONS[1]}" in answers(env, dialog),
            30,
            "the dialog answered with the second choice",
        )

        # A question: `a`, type, enter: the reply reaches the job.
        wait_until(lambda: "Answer the dialog" not in screen(), 10, "the box closed")
        select(asking)
        tmux.send_keys("a")
        wait_until(lambda: "Reply to asker" in screen(), 10, lambda: f"the reply box:\n{screen()}")
        tmux.type_text("yes, go on with the lexer")
        tmux.send_keys("Enter")
        wait_until(
            lambda: any("yes, go on with the lexer" in a for a in answers(env, asking)),
            30,
            "the reply delivered to the asker",
        )
        tmux.send_keys("q")
        wait_until(tmux.pane_dead, 10, "roost view to quit")
    finally:
        tmux.close()


# -- the app, exactly ---------------------------------------------------------------------------
def test_view_reply_box_answers_a_dialog_and_a_question(view_env: Lab) -> None:
    env = view_env
    dialog, asking, _ = waiting_jobs(env)

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.query_one(DataTable)
            await until(pilot, lambda: dialog in [k.value for k in table.rows], "the rows")
            # Every column fits the 80 columns; the question's row is taller.
            assert sum(w + 2 for _, _, w in app.columns) <= 80 - 2
            heights = {key.value: row.height for key, row in table.rows.items()}
            assert heights[dialog] == QUESTION_LINES and heights[asking] == 1, heights
            assert [k for k, _, _ in app.columns][:3] == ["id", "name", "state"]

            table.move_cursor(row=table.get_row_index(dialog))
            await pilot.press("a")
            box = await until(
                pilot, lambda: isinstance(app.screen, ReplyScreen) and app.screen, "the reply box"
            )
            assert box.options == list(OPTIONS)
            await pilot.press("q")  # over the choices: neither quits nor closes the box
            assert app.is_running and app.screen is box
            await pilot.press("down", "enter")
            await until(pilot, lambda: app.replies == [(dialog, "delivered")], "the answer")
            await asyncio.to_thread(
                wait_until, lambda: f"chose: {OPTIONS[1]}" in answers(env, dialog), 30, "the second choice"
            )

            table.move_cursor(row=table.get_row_index(asking))
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, ReplyScreen), "the reply box")
            await pilot.press("enter")  # an empty reply sends nothing; the box stays
            assert isinstance(app.screen, ReplyScreen)
            for key in "go on":
                await pilot.press("space" if key == " " else key)
            await pilot.press("enter")
            await until(pilot, lambda: len(app.replies) == 2, "the reply")
            assert app.replies[1][0] == asking and app.replies[1][1] in ("started", "delivered")
            await asyncio.to_thread(
                wait_until, lambda: any("go on" in a for a in answers(env, asking)), 30, "it"
            )

            # esc closes a box without sending; ? opens the help, esc closes it.
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, ReplyScreen), "a box")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, ReplyScreen), "closed")
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "closed")
            assert len(app.replies) == 2

            # A wider screen: the table is fitted again (the summary gets the room).
            narrow = dict((k, w) for k, _, w in app.columns)["summary"]
            await pilot.resize_terminal(200, 24)
            await until(pilot, lambda: dict((k, w) for k, _, w in app.columns)["summary"] > narrow, "refit")
            await pilot.press("q")

    asyncio.run(scenario())


# -- pure ---------------------------------------------------------------------------------------
def test_fitted_rows_keep_ids_and_wrap_a_question_in_80_columns() -> None:
    question = "Which of these should I do first: " + " ".join(f"step{i}" for i in range(60))
    rows = [
        {
            "id": "0000000a",
            "name": "a-rather-long-job-name-here",
            "kind": "pi",
            "state": "needs_input",
            "status": "waiting for a reply",
            "summary": "",
            "question": question,
            "cwd": "/w",
            "session": "/s/a",
            "parentSession": None,
            "pending": {"replies": 0, "agent": 1},
            "worktree": {"branch": "roost/long-branch"},
            "usage": {"cost": 0.0042},
            "created": "",
            "updated": "",
        }
    ]
    columns, out = fitted_rows(table_rows(rows), 76)
    assert sum(w for _, _, w in columns) + 2 * (len(columns) - 1) <= 76
    keys = [key for key, _, _ in columns]
    assert keys[:3] == ["id", "name", "state"] and "summary" in keys
    (heading, _, one), (job, cells, height) = out
    assert heading == GROUP_PREFIX + "/w" and one == 1 and job == "0000000a"
    by = dict(zip(keys, cells, strict=True))
    assert by["id"].plain == "0000000a" and by["state"].plain == "needs_input"
    assert height == QUESTION_LINES == len(by["summary"].plain.splitlines())
    assert by["summary"].plain.startswith("? Which of these") and by["summary"].plain.endswith("…")
    # A failed job's reason wraps too; a running job's summary is one line.
    long = "x " * 100
    for state, lines in (("failed", QUESTION_LINES), ("running", 1)):
        _, out = fitted_rows(table_rows([{**rows[0], "state": state, "question": None, "summary": long}]), 76)
        assert out[1][2] == lines
    wide_columns, _ = fitted_rows(table_rows(rows), 400)
    # All of them but what no job fills: TREE (a root's total needs a tree) and STATUS is
    # filled here; an empty column takes no room.
    assert [k for k, _, _ in wide_columns] == ["id", "name", "state", "status", "cost", "summary", "meta"]


def test_reply_text_picks_by_number_or_yes_no() -> None:
    assert reply_text(["a", "b"], 1) == "2"
    assert reply_text(["yes", "no"], 1) == "no"
