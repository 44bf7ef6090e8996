"""`roost view`'s search (the `/` key) with textual's pilot against a real roostd and the
fake pi: the query box, ranked matches with the match bold and hostile text escaped, a bad
query said in the pane, and enter on a match opening its job's transcript."""

from __future__ import annotations

import asyncio

from kit.lab import Lab
from kit.pilot import until
from textual.widgets import DataTable, Input, OptionList

from roost.view.app import TranscriptScreen, ViewApp
from roost.view.search import SearchScreen


def test_slash_searches_and_enter_opens_the_match(view_env: Lab) -> None:
    env = view_env
    other = env.run("nothing to see", name="quiet")
    job = env.run("the walrus \x1b[31mtide\x1b[0m report", name="walrus")
    env.wait(other)
    env.wait(job)

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=(100, 30)) as pilot:
            table = app.query_one(DataTable)
            await until(pilot, lambda: job in [k.value for k in table.rows], "the rows")
            table.move_cursor(row=table.get_row_index(other))
            await pilot.press("slash")
            screen = await until(
                pilot, lambda: isinstance(app.screen, SearchScreen) and app.screen, "the search box"
            )
            field, box = screen.query_one(Input), screen.query_one(OptionList)
            field.value = "AND"  # FTS refuses it: one line in the pane, nothing found
            await pilot.press("enter")
            await until(pilot, lambda: box.option_count == 1, "the error")
            assert "syntax error" in str(box.get_option_at_index(0).prompt)
            field.focus()
            field.value = "walrus"
            await pilot.press("enter")
            await until(pilot, lambda: screen.results, "the matches", timeout=30)
            assert {row["job"] for row in screen.results} == {job}
            line = box.get_option_at_index(0).prompt
            assert "\x1b" not in line.plain and "\\x1b[31m" in line.plain
            assert any("bold" in str(span.style) for span in line.spans)
            await pilot.press("enter")
            transcript = await until(
                pilot, lambda: isinstance(app.screen, TranscriptScreen) and app.screen, "the transcript"
            )
            assert transcript.row["id"] == job

    asyncio.run(scenario())
