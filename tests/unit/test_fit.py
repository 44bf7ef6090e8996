"""The job table's fitting (roost.display.fit), and the table with costs drawn in an 80- and a
200-column terminal and in a pipe (roost.display.views.print_table in a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from kit.term import in_pty

from roost.display.fit import FLEX, MIN_FLEX, fit, hidden, shortened
from roost.usage.show import format_cost

NATURAL = {"ID": 8, "NAME": 22, "STATE": 11, "STATUS": 19, "COST": 7, "TREE": 11, FLEX: 120, "META": 26}


def total(widths: dict[str, int]) -> int:
    shown = [w for w in widths.values() if w]
    return sum(shown) + 2 * (len(shown) - 1)


def test_nothing_changes_without_a_width_or_when_it_fits() -> None:
    assert fit(NATURAL, None) == NATURAL
    assert fit(NATURAL, total(NATURAL)) == NATURAL


@pytest.mark.parametrize("width", [200, 120, 100, 80, 60])
def test_the_least_useful_columns_go_first_and_id_and_state_never(width: int) -> None:
    widths = fit(NATURAL, width)
    assert widths["ID"] == 8 and widths["STATE"] == 11
    assert total(widths) <= width
    order = ["TREE", "STATUS", "COST", "META"]  # the order they are hidden in
    gone = hidden(NATURAL, widths)
    # The question gets its minimum, or everything else gave way (NAME down to 10).
    assert widths[FLEX] >= MIN_FLEX or (len(gone) == 4 and widths["NAME"] == 10)
    assert gone == [c for c in NATURAL if c in order[: len(gone)]] or width >= 200
    if width >= 200:
        assert not gone and not shortened(NATURAL, widths)
    if width == 80:
        assert sorted(gone) == ["COST", "STATUS", "TREE"] and widths["META"] == 6


def test_a_column_asked_for_stays_whole() -> None:
    widths = fit(NATURAL, 100, keep=("TREE",))
    assert widths["TREE"] == 11 and hidden(NATURAL, widths) and "TREE" not in hidden(NATURAL, widths)
    assert total(widths) <= 100


def test_a_short_summary_keeps_every_column_it_can() -> None:
    widths = fit({**NATURAL, FLEX: 18}, 130)
    assert widths[FLEX] == 18 and hidden(NATURAL, widths) == ["TREE"]


ROWS = [
    {
        "id": f"732aa3{i:02d}",
        "name": name,
        "kind": "pi",
        "state": state,
        "status": "thinking",
        "summary": "Refactoring the parser module to support streaming input everywhere",
        "question": None,
        "cwd": "/w",
        "session": f"/s/{i}",
        "parentSession": parent,
        "pending": {"replies": 0, "agent": 0},
        "created": "",
        "updated": "",
        "usage": {"cost": cost, "treeCost": 1.2345 if not parent else None, "treeBudget": 5.0},
    }
    for i, name, state, cost, parent in (
        (1, "lead", "running", 0.00123, None),
        (2, "kid", "done", 12.5, "/s/1"),
    )
]
DRAW = "import json, sys; from roost.display import views; views.print_table(json.load(sys.stdin), tree=True)"


@pytest.mark.parametrize("columns", [80, 200, None])
def test_costs_and_ids_are_whole_or_absent(columns: int | None) -> None:
    argv = [sys.executable, "-c", DRAW]
    if columns is None:  # a pipe
        out = subprocess.run(
            argv,
            input=json.dumps(ROWS),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "COLUMNS": "80"},
        ).stdout
    else:
        out = in_pty(argv, dict(os.environ), columns, stdin=json.dumps(ROWS))
    assert "732aa301" in out and "732aa302" in out, out
    assert "$0.00…" not in out and "$0.0…" not in out, out
    assert "$0.0012" in out and "$12.50" in out, out
    if columns != 80:  # room for TREE too (in a pipe: always)
        assert "$1.23/$5.00" in out and "hidden" not in out, out
    else:  # STATUS and META hidden whole, and said so; TREE (asked for) and COST stay
        assert "$1.23/$5.00" in out and "(hidden: STATUS, META;" in out, out


def test_a_cost_never_reads_as_free_or_cut() -> None:
    assert format_cost(0.00001) == "<$0.0001" and format_cost(0.0001) == "$0.0001"
    assert format_cost(0.0042) == "$0.0042" and format_cost(0.0) == "$0.00"
    assert format_cost(1234.5) == "$1234.50" and format_cost(None) == "—"
