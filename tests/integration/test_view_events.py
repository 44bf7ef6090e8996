"""`roost view`'s events pane (the `e` key): the event log's recent history, then new events
live as roostd pushes them — a schedule firing, a job waiting on another and let go, a
structured result (textual's pilot; fake pi, real roostd)."""

from __future__ import annotations

import asyncio
import json

import pytest
from kit.lab import Lab
from kit.pilot import until

from roost.view.app import ViewApp
from roost.view.events import EventsScreen

pytestmark = pytest.mark.timeout(120)


def test_the_events_pane_shows_history_then_live_events(view_env: Lab) -> None:
    env = view_env
    first = env.run_job("--name", "before", "[[hold gate]] first")
    schema = env.work / "schema.json"
    schema.write_text(json.dumps({"type": "object"}))

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.press("e")
            pane = await until(
                pilot, lambda: isinstance(app.screen, EventsScreen) and app.screen, "the events pane"
            )
            assert any("job.created" in line and "before" in line for line in pane.shown)
            # Live: a job waiting on `before`, let go when it is done, with a result.
            await asyncio.to_thread(
                env.run_job,
                "--name",
                "after",
                "--after",
                "before",
                "--output-schema",
                str(schema),
                '[[answers {"ok": true}]] then',
            )
            await until(
                pilot,
                lambda: any("job.waiting" in line and "after" in line for line in pane.shown),
                "job.waiting, live",
            )
            (env.work / "gate").write_text("")
            await until(
                pilot, lambda: any("job.unblocked" in line for line in pane.shown), "job.unblocked, live"
            )
            await until(
                pilot,
                lambda: any("job.result" in line and "after" in line for line in pane.shown),
                "job.result, live",
                60,
            )
            await asyncio.to_thread(env.roost_ok, "schedule", "add", "tick", "--every", "1h", "scheduled")
            await asyncio.to_thread(env.roost_ok, "schedule", "run-now", "tick")
            await until(
                pilot,
                lambda: any("schedule.fired" in line and "tick" in line for line in pane.shown),
                "schedule.fired, live",
            )
            assert len(pane.shown) == len(set(pane.shown))  # each event once
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, EventsScreen), "closed")

    asyncio.run(scenario())
    assert env.wait(first) == "done"
