"""Fitting the job table to a width, for `roost ls` and `roost view` alike (pure).

Every column starts at its natural width (its longest cell or its header). When the table
is wider than the screen, the least useful column is shortened or dropped first (STEPS),
until SUMMARY / QUESTION, which wraps instead of being cut, gets at least MIN_FLEX cells.
ID and STATE are never shortened: an id is what every other command takes, and the state
is what a person scans for. Without a width (a pipe, `--wide`) nothing is shortened.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (`roost ls` imports this)

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

FLEX = "SUMMARY / QUESTION"
"""The column that takes the room left over and wraps (the question must stay readable)."""
MIN_FLEX = 30
# Least useful first: (column, at most this many cells; 0 drops it). TREE is on one row per
# tree (and in `roost usage --by tree`); META's branch names are long, its `✉2` short;
# STATUS is the live detail of a running job; COST is in `roost show` and `roost usage`.
STEPS: tuple[tuple[str, int], ...] = (
    ("TREE", 0),
    ("META", 10),
    ("STATUS", 12),
    ("NAME", 16),
    ("STATUS", 0),
    ("NAME", 12),
    ("META", 6),
    ("COST", 0),
    ("META", 0),
    ("NAME", 10),
)


def fit(
    natural: Mapping[str, int],
    width: int | None,
    sep: int = 2,
    keep: Collection[str] = (),
    min_flex: int = MIN_FLEX,
) -> dict[str, int]:
    """Each column's width, in `natural`'s order (0: hidden), so that the table, with `sep`
    cells between columns, fits in `width` cells. None: the natural widths. The columns in
    `keep` (asked for by name, like `ls --tree`'s TREE) stay whole. `min_flex`: the room
    FLEX is given before the other columns stop giving way (roost view: its group
    headings' length)."""
    widths = dict(natural)
    if width is None or FLEX not in widths:
        return widths
    steps: tuple[tuple[str | None, int], ...] = (
        (None, 0),
        *((column, limit) for column, limit in STEPS if column not in keep),
    )
    room = 0
    for column, limit in steps:
        if column in widths and widths[column]:
            widths[column] = min(widths[column], limit)
        others = [w for name, w in widths.items() if w and name != FLEX]
        room = width - sum(others) - sep * len(others)
        if room >= min(natural[FLEX], min_flex):
            break
    widths[FLEX] = max(min(natural[FLEX], room), min(natural[FLEX], len(FLEX)))
    return widths


def hidden(natural: Mapping[str, int], widths: Mapping[str, int]) -> list[str]:
    """The columns `fit` dropped."""
    return [name for name, w in widths.items() if natural.get(name) and not w]


def shortened(natural: Mapping[str, int], widths: Mapping[str, int]) -> list[str]:
    """The columns `fit` narrowed (their long cells end in `…`); FLEX wraps instead."""
    return [name for name, w in widths.items() if w and name != FLEX and w < natural.get(name, 0)]
