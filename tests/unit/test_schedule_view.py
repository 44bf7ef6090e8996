"""A job a schedule started names it (and the cause) in the META cell `roost ls` and
`roost view` share, and `roost events` describes a `schedule.fired` event."""

from __future__ import annotations

from roost.display.events import describe
from roost.display.views import meta_text


def test_a_scheduled_jobs_meta_names_its_schedule_and_cause() -> None:
    row = {
        "schedule": {"name": "nightly", "cause": "catch-up", "due": "2026-12-01T02:00:00.000Z"},
        "agent": "scout",
        "pending": {},
    }
    assert meta_text(row, {}, "dir") == "@scout ⏲ nightly (catch-up)"
    assert meta_text({"schedule": None, "pending": {}}, {}, "dir") == ""


def test_roost_events_describes_a_firing() -> None:
    event = {
        "type": "schedule.fired",
        "schedule": "docs",
        "cause": "change",
        "due": "2026-12-01T20:05:03.117Z",
        "outcome": "skipped",
        "detail": "job 1234abcd is still running (--overlap skip)",
        "paths": ["/w/a", "/w/b"],
    }
    assert describe(event) == (
        "schedule docs fired (change, due 2026-12-01T20:05:03.117Z): "
        "skipped: job 1234abcd is still running (--overlap skip) "
        "(2 changed paths)"
    )
