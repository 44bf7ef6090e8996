"""`roost view`'s inbox pane (the `i` key) reads the same inbox as `roost inbox` and
`roost web`, and answers through the same op (textual's pilot; fake pi, real roostd)."""

from __future__ import annotations

import asyncio

import pytest
from kit.lab import Lab
from kit.pilot import until
from kit.procs import wait_until
from textual.widgets import DataTable

from roost.view.app import ViewApp
from roost.view.inbox import InboxScreen
from roost.view.replybox import ReplyScreen

pytestmark = pytest.mark.timeout(120)


def test_the_view_inbox_pane_answers_a_dialog_once(view_env: Lab) -> None:
    env = view_env
    dialog = env.run_job("--name", "chooser", "[[dialog select red,green]]")
    broken = env.run_job("--name", "broken", "--shell", "--", "false")
    env.wait_state(dialog, "needs_input")
    env.wait_state(broken, "failed")
    wait_until(lambda: env.row(dialog)["dialog"], 30, "the dialog open")
    cli = {e["kind"]: e for e in env.cli_json("inbox", "--json")}

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("i")
            pane = await until(
                pilot, lambda: isinstance(app.screen, InboxScreen) and app.screen, "the inbox pane"
            )
            assert [e["id"] for e in pane.entries] == [e["id"] for e in env.cli_json("inbox", "--json")]
            index = [e["kind"] for e in pane.entries].index("dialog")
            for _ in range(index):
                await pilot.press("down")
            await pilot.press("enter")
            box = await until(
                pilot, lambda: isinstance(app.screen, ReplyScreen) and app.screen, "the reply box"
            )
            assert box.options == ["red", "green"]
            await pilot.press("down", "enter")
            await until(pilot, lambda: pane.outcomes == ["delivered"], "the answer")
            await asyncio.to_thread(env.wait, dialog)
            # the failure: dismissed with d
            await until(pilot, lambda: app.screen is pane, "back on the pane")
            pane.action_reload()
            assert [e["kind"] for e in pane.entries] == ["failed"]
            await pilot.press("d")
            await until(pilot, lambda: len(pane.outcomes) == 2, "the dismissal")
            assert pane.outcomes[1] == "dismissed" and pane.entries == []

    asyncio.run(scenario())
    again = env.roost_ok("answer", cli["dialog"]["id"], "--choice", "1").strip()
    assert again.startswith("already answered by roost view at ")
    wait_until(lambda: "chose: green" in str(env.session(dialog)), 30, "green, once")
    assert "chose: red" not in str(env.session(dialog))


def test_the_view_reply_box_answers_a_question_once(view_env: Lab) -> None:
    """The reply box (the `a` key) on a job that waits: its answer is written down in the
    inbox, so a later `roost answer` of the entry says who answered it and sends nothing."""
    env = view_env
    asker = env.run_job("--name", "asker", "[[ask]] colours")
    env.wait_state(asker, "needs_input")
    [entry] = env.cli_json("inbox", "--json")

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=(100, 30)) as pilot:
            table = app.query_one(DataTable)
            await until(pilot, lambda: asker in [k.value for k in table.rows], "the rows")
            table.move_cursor(row=table.get_row_index(asker))
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, ReplyScreen), "the reply box")
            for key in "blue":
                await pilot.press(key)
            await pilot.press("enter")
            await until(pilot, lambda: len(app.replies) == 1, "the reply")
            assert app.replies[0][1] in ("started", "delivered"), app.replies

    asyncio.run(scenario())
    assert env.wait(asker) == "done"
    again = env.roost_ok("answer", entry["id"], "red").strip()
    assert again.startswith("already answered by roost view at "), again
    texts = [str(e) for e in env.session(asker) if (e.get("message") or {}).get("role") == "user"]
    assert sum("'blue'" in t for t in texts) == 1 and not any("'red'" in t for t in texts), texts
