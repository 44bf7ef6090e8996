"""Usage accounting, budget rules, the usage log and report: pure parts (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roost.config import Settings
from roost.fakellm import text
from roost.fakellm.replies import from_json as reply_from_obj
from roost.fakellm.wire import usage_for
from roost.usage import budget, summary
from roost.usage import log as usage_log
from roost.usage.account import Usage, breakdown, from_entries
from roost.usage.budget import Limits
from roost.usage.meter import Meter
from roost.usage.show import cost_cell, format_cost, tree_cell, usage_lines


def assistant(
    inp: int,
    out: int,
    cost: float,
    *,
    cache_read: int = 0,
    model: str = "m",
    day: str = "2026-11-30",
    stop: str = "toolUse",
) -> dict[str, Any]:
    return {
        "type": "message",
        "timestamp": f"{day}T10:00:00.000Z",
        "message": {
            "role": "assistant",
            "provider": "p",
            "model": model,
            "stopReason": stop,
            "usage": {
                "input": inp,
                "output": out,
                "cacheRead": cache_read,
                "cacheWrite": 0,
                "totalTokens": inp + out + cache_read,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost},
            },
        },
    }


ENTRIES = [
    {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
    {"type": "message", "message": {"role": "user", "content": "hi"}},
    assistant(100, 10, 0.5, cache_read=40),
    {
        "type": "message",
        "timestamp": "2026-11-30T10:00:01Z",
        "message": {
            "role": "toolResult",
            "content": [],
            "usage": {"input": 1, "output": 1, "cost": {"total": 0.01}},
        },
    },
    assistant(200, 20, 0.25, model="n", day="2026-12-01", stop="stop"),
    {
        "type": "compaction",
        "timestamp": "2026-12-01T10:00:00Z",
        "summary": "x",
        "usage": {"input": 5, "output": 5, "cost": {"total": 0.04}},
    },
    {"type": "custom_message", "content": "note"},
    {"type": "message", "message": {"role": "assistant", "usage": "garbage"}},
]


def test_sum_over_a_session_file_and_rereading_does_not_double() -> None:
    usage = from_entries(ENTRIES)
    assert (usage.input, usage.output, usage.cacheRead) == (306, 36, 40)
    assert usage.cost == pytest.approx(0.8) and usage.priced and usage.requests == 3
    again = from_entries(ENTRIES)  # a restart reads it again: the same, never twice
    assert again == usage
    parts = breakdown(ENTRIES)
    assert parts[("2026-11-30", "p/m")].cost == pytest.approx(0.5)
    assert parts[("2026-12-01", "p/n")].requests == 1


def test_unpriced_model_counts_tokens_only() -> None:
    usage = from_entries([assistant(100, 10, 0.0)])
    assert usage.to_json()["cost"] is None and usage.tokens == 110
    assert format_cost(None) == "—" and format_cost(0.42) == "$0.42"
    assert format_cost(0.004) == "$0.0040" and format_cost(2.505) in ("$2.50", "$2.51")
    row = {"kind": "pi", "usage": {**usage.to_json(), "treeCost": None}}
    assert cost_cell(row) == "— 110t" and tree_cell(row) == "—"


def test_usage_json_round_trip_and_stats() -> None:
    usage = from_entries(ENTRIES)
    assert Usage.from_json(usage.to_json()).to_json() == usage.to_json()
    usage.apply_stats({"tokens": {"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4}, "cost": 1.5})
    assert (usage.tokens, usage.cost, usage.requests) == (10, 1.5, 3)
    usage.apply_stats({"tokens": None})  # pi 0.73 right after a compaction: unchanged
    assert usage.tokens == 10


def test_budget_rules() -> None:
    limits = Limits(budget=2.5)
    spent = Usage(cost=2.0, priced=True)
    assert budget.exhausted(spent, limits) is None
    assert budget.warning(spent, limits, 0.8) == "you have used 80% of your budget ($2.00 of $2.50)"
    assert budget.warning(spent, limits, 0) is None  # off
    over = Usage(cost=2.51, priced=True)
    assert budget.exhausted(over, limits) == "budget exhausted: $2.51 of $2.50"
    assert budget.warning(over, limits, 0.8) is None  # a stop, not a warning
    assert (
        budget.exhausted(Usage(input=90, output=20), Limits(budget_tokens=100))
        == "token budget exhausted: 110 of 100 tokens"
    )
    assert (
        budget.exhausted(Usage(requests=3), Limits(max_turns=3))
        == "turn limit reached: 3 of 3 model requests"
    )
    assert budget.exhausted(Usage(cost=100), Limits()) is None
    assert budget.is_stop_reason("budget exhausted: $1 of $1")
    assert not budget.is_stop_reason("model error") and not budget.is_stop_reason(None)


def test_child_budget_within_the_tree() -> None:
    assert budget.child_budget(1.0, None, None) == (1.0, None)
    assert budget.child_budget(None, 0.5, None) == (0.5, None)
    assert budget.child_budget(None, None, 0.7) == (0.7, None)  # at most what is left
    assert budget.child_budget(None, 2.0, 0.7) == (0.7, None)
    value, refusal = budget.child_budget(1.0, None, 0.5)
    assert value is None and refusal == ("budget $1.00 exceeds what is left of the tree's budget ($0.50)")
    assert budget.child_budget(None, None, 0.0)[1] is not None


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "2", True])
def test_bad_amounts_are_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="budget must be"):
        budget.check_amount(value, "budget")


def test_whole_numbers_for_tokens() -> None:
    assert budget.check_amount(5.0, "maxTurns", integer=True) == 5
    with pytest.raises(ValueError, match="whole number"):
        budget.check_amount(2.5, "maxTurns", integer=True)


def test_meter_warns_once_then_stops() -> None:
    meter = Meter(Limits(budget=1.0), warn_at=0.8)
    meter.load([])
    msg = assistant(0, 0, 0.3)["message"]
    assert [meter.on_message(msg) for _ in range(2)] == [None, None]
    assert meter.on_message(msg) == "warn"  # $0.90
    assert meter.on_message(msg) == "stop"  # $1.20
    assert meter.blocked == "budget exhausted: $1.20 of $1.00"
    assert meter.on_message(msg) is None  # told once
    assert meter.set_limits(Limits(budget=5.0)) and meter.blocked is None
    # A restarted worker (a re-read) does not warn again for what was warned about.
    restarted = Meter(Limits(budget=1.0), warn_at=0.8)
    restarted.load([assistant(0, 0, 0.85)])
    assert restarted.warned and restarted.blocked is None
    assert Meter(Limits(budget=1.0)).snapshot() is None  # nothing reported before the read


def test_settings_keys() -> None:
    settings = Settings.from_dict({"defaultJobBudget": 2, "defaultTreeBudget": 10.5, "budgetWarnAt": 0.5})
    assert (settings.defaultJobBudget, settings.defaultTreeBudget, settings.budgetWarnAt) == (2, 10.5, 0.5)
    assert Settings.from_dict({"defaultJobBudget": "lots"}).defaultJobBudget is None
    assert Settings.from_dict({"budgetWarnAt": -1}).budgetWarnAt == 0.8


def test_usage_log_survives_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    job = {"id": "abcd0123", "name": "x", "session": "/s/1", "rootSession": None}
    lines = usage_log.lines_for(job, ENTRIES)
    # per (day, model): tool-result and compaction usage carry no model ("unknown")
    assert len(lines) == 5
    usage_log.append(lines, path)
    with path.open("a") as handle:
        handle.write('{"job": "torn"\n')
    read = list(usage_log.read(path))
    assert [line["job"] for line in read] == ["abcd0123"] * 5
    trees = usage_log.removed_tree_costs(path)
    assert trees["/s/1"].cost == pytest.approx(0.8)
    assert path.stat().st_mode & 0o777 == 0o600


def test_report_groups_and_since() -> None:
    rows = [
        {"id": "00000001", "name": "root", "kind": "pi", "session": "/s/1", "rootSession": None},
        {"id": "00000002", "name": "kid", "kind": "pi", "session": "/s/2", "rootSession": "/s/1"},
        {"id": "00000003", "name": "sh", "kind": "shell", "session": None},
    ]
    live = summary.live_lines(rows, lambda session: ENTRIES)
    removed = [
        {
            **line,
            "job": "00000009",
            "name": "gone",
            "session": "/s/9",
            "rootSession": "/s/1",
            "removed": "2026-12-01T00:00:00Z",
        }
        for line in usage_log.lines_for({}, ENTRIES)
    ]
    lines = live + removed
    by_job = summary.report(lines, "job")
    assert [r["key"] for r in by_job["rows"]] == ["00000001", "00000002", "00000009"]
    assert [r["removed"] for r in by_job["rows"]] == [False, False, True]
    assert by_job["total"]["cost"] == pytest.approx(3 * 0.8)
    by_tree = summary.report(lines, "tree")
    assert len(by_tree["rows"]) == 1 and by_tree["rows"][0]["name"] == "root"
    assert by_tree["rows"][0]["jobs"] == 3
    by_day = summary.report(lines, "day", since="2026-12-01")
    assert [r["key"] for r in by_day["rows"]] == ["2026-12-01"]
    assert by_day["total"]["cost"] == pytest.approx(3 * 0.29)
    assert [r["key"] for r in summary.report(lines, "model")["rows"]] == ["p/m", "p/n", "unknown"]
    with pytest.raises(ValueError):
        summary.report(lines, "week")
    assert summary.parse_since("2026-11-30T12:00:00Z") == "2026-11-30"
    for bad in ("yesterday", "2026-02-30"):
        with pytest.raises(ValueError):
            summary.parse_since(bad)
    json.dumps(by_job)  # the JSON output


def test_report_by_tree_is_sorted_by_what_it_shows() -> None:
    """`--by tree` prints each tree's root name: rows are in that order, not by the root's
    session path (the key), which the table does not show; equal names keep key order."""
    rows = [
        {"id": f"0000000{i}", "name": name, "kind": "pi", "session": session, "rootSession": None}
        for i, (name, session) in enumerate(
            [("zeta", "/s/a"), ("alpha", "/s/b"), ("mid", "/s/c"), ("alpha", "/s/0")]
        )
    ]
    lines = summary.live_lines(rows, lambda session: ENTRIES)
    by_tree = summary.report(lines, "tree")["rows"]
    assert [(r["name"], r["key"]) for r in by_tree] == [
        ("alpha", "/s/0"),
        ("alpha", "/s/b"),
        ("mid", "/s/c"),
        ("zeta", "/s/a"),
    ]


def test_docs_quote_the_budget_warning_as_printed() -> None:
    """The budgets guide's Warning paragraph quotes the job's note and the parent's line word
    for word (its lines are wrapped: whitespace is compared as single spaces)."""
    guide = Path(__file__).resolve().parents[2] / "docs" / "guides" / "budgets.md"
    readme = " ".join(guide.read_text().split())
    line = budget.warning(Usage(cost=2.0, priced=True), Limits(budget=2.5), 0.8)
    assert line is not None
    note, parent = budget.note_text(line), budget.warning_text(line)
    assert note.startswith(parent)
    assert f"`{note}`" in readme, note
    assert f"`{parent}`" in readme, parent


def test_show_block() -> None:
    row = {
        "kind": "pi",
        "usage": {
            "input": 1,
            "output": 2,
            "cacheRead": 3,
            "cacheWrite": 4,
            "cost": 0.5,
            "treeCost": 1.25,
            "requests": 2,
            "budget": 2.5,
            "budgetTokens": None,
            "maxTurns": 9,
            "treeBudget": 10.0,
        },
    }
    lines = dict(usage_lines(row))
    assert lines["cost"] == "$0.50" and lines["tree cost"] == "$1.25"
    assert lines["requests"] == "2 of 9" and lines["budget"] == "$2.50, tree $10.00"
    assert tree_cell(row) == "$1.25/$10.00"


def test_scripted_model_reports_cache_tokens() -> None:
    reply = reply_from_obj(
        {"text": "x", "usage": {"prompt_tokens": 100, "completion_tokens": 5, "cached_tokens": 40}}
    )
    assert usage_for(reply, 0)["prompt_tokens_details"] == {"cached_tokens": 40, "cache_write_tokens": 0}
    assert "prompt_tokens_details" not in usage_for(text("x", usage=(10, 2)), 0)
    with pytest.raises(ValueError, match="unknown usage keys"):
        reply_from_obj({"text": "x", "usage": {"prompt": 1}})


def test_removed_job_is_counted_once_in_its_tree(tmp_path: Path, monkeypatch: Any) -> None:
    """`rm` appends the job's figures to the log and to roostd's cache of removed trees,
    whether or not that cache was read before (no double count)."""
    from types import SimpleNamespace

    from roost.job.record import JobRecord, Links
    from roost.supervise import budget as budgets
    from roost.supervise.usagebook import UsageBook

    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "rh"))
    (tmp_path / "rh").mkdir()
    session = tmp_path / "kid.jsonl"
    session.write_text("".join(json.dumps(e) + "\n" for e in ENTRIES))
    for preload in (False, True):
        (tmp_path / "rh" / "usage.jsonl").unlink(missing_ok=True)
        fake = SimpleNamespace(jobs={}, usage_book=UsageBook())
        if preload:
            assert fake.usage_book.removed == {}
        kid = JobRecord(
            id="0000000a",
            name="kid",
            kind="pi",
            cwd="/",
            session=str(session),
            links=Links(root_session="/s/root", spawned=True),
        )
        budgets.on_removed(fake, kid)  # type: ignore[arg-type]
        assert budgets.tree_usage(fake, "/s/root").cost == pytest.approx(0.8)  # type: ignore[arg-type]
        assert usage_log.removed_tree_costs(tmp_path / "rh" / "usage.jsonl")["/s/root"].cost == pytest.approx(
            0.8
        )
