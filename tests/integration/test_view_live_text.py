"""`roost view`'s live text: an open transcript shows what the job's pi writes right now
(roost.view.livetext's pane, fed by roostd's partials), then the complete message in the
transcript once it is in the session file. The fake pi streams `[[stream N MS GATE]]`."""

from __future__ import annotations

import asyncio

from kit.lab import Lab
from kit.pilot import until
from rich.text import Text

from roost.view.app import TranscriptScreen, ViewApp
from roost.view.livetext import PartialPane, partial_text

SIZE = (120, 40)


def test_partial_text_shows_the_text_tools_and_escapes() -> None:
    text = partial_text(
        {
            "message": {"content": [{"type": "text", "text": "a\x1b[31mb"}]},
            "tools": [{"name": "bash", "summary": "ls -la", "started": 0}],
        },
        now=5,
    )
    assert isinstance(text, Text)
    assert "writing" in text.plain and "a\\x1b[31mb" in text.plain
    assert "● running bash (5 s) ls -la" in text.plain
    assert partial_text(None).plain == ""


def test_an_open_transcript_shows_the_text_being_written(view_env: Lab) -> None:
    env = view_env
    job = env.run("[[stream 6 20 view-gate]]")
    env.wait_state(job, "running", timeout=30)

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: job in [str(k.value) for k in app.query_one("DataTable").rows],
                "the job's row",
                timeout=30,
            )
            app.push_screen(TranscriptScreen(env.row(job)))
            screen = await until(
                pilot, lambda: isinstance(app.screen, TranscriptScreen) and app.screen, "the transcript"
            )
            pane = await until(pilot, lambda: next(iter(screen.query(PartialPane)), None), "the live pane")
            await until(
                pilot,
                lambda: pane.partial and "w6" in partial_text(pane.partial).plain,
                "the streamed text in the pane",
                timeout=30,
            )
            assert not pane.has_class("idle")
            assert not any("streamed: w1" in line for line in screen.lines)
            await asyncio.to_thread((env.work / "view-gate").touch)
            await until(
                pilot, lambda: pane.partial is None and pane.has_class("idle"), "the pane emptied", timeout=30
            )
            await until(
                pilot,
                lambda: any("streamed: w1 w2 w3 w4 w5 w6" in line for line in screen.lines),
                "the complete message in the transcript",
                timeout=30,
            )
            await pilot.press("escape")

    asyncio.run(scenario())
