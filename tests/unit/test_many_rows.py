"""Many rows at once (`list`, `subscribe`): `budget.many_rows` sums each tree once, and
every row's usage is what it is row by row: trees, subtrees, removed jobs."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from roost.job.record import JobRecord, Links
from roost.supervise import budget
from roost.supervise.usagebook import UsageBook
from roost.usage.account import Usage


def job(
    n: int,
    *,
    session: str,
    parent: str | None = None,
    root: str | None = None,
    cost: float = 0.0,
    tokens: int = 0,
) -> JobRecord:
    usage = Usage()
    usage.input, usage.cost, usage.priced = tokens, cost, True
    return JobRecord(
        id=f"{n:08x}",
        name=f"j{n}",
        kind="pi",
        cwd="/",
        session=session,
        usage=usage.to_json(),
        links=Links(parent_session=parent, root_session=root, spawned=parent is not None),
    )


def table() -> Any:
    jobs = [
        job(1, session="/s/r1", cost=1.0, tokens=10),
        job(2, session="/s/c1", parent="/s/r1", root="/s/r1", cost=0.5, tokens=5),
        job(3, session="/s/g1", parent="/s/c1", root="/s/r1", cost=0.25, tokens=2),
        job(4, session="/s/r2", cost=2.0, tokens=20),
        job(5, session="/s/c2", parent="/s/r2", root="/s/r2", tokens=7),
    ]
    book = UsageBook()
    gone = Usage()
    gone.cost, gone.priced = 4.0, True
    book._removed = {"/s/r2": gone}  # a removed job of the second tree (as read from the log)
    return SimpleNamespace(jobs={r.id: r for r in jobs}, usage_book=book)


def test_rows_in_a_batch_are_the_rows_one_by_one() -> None:
    daemon = table()
    alone = [budget.row_usage(daemon, r) for r in daemon.jobs.values()]
    with budget.many_rows(daemon):
        batched = [budget.row_usage(daemon, r) for r in daemon.jobs.values()]
    assert batched == alone
    assert alone[0]["treeCost"] == 1.75 and alone[1]["treeCost"] == 0.75
    assert alone[3]["treeCost"] == 6.0 and alone[4]["treeTokens"] == 7
    assert budget._sums is None  # only inside the block


def test_a_thousand_rows_sum_each_tree_once() -> None:
    daemon = SimpleNamespace(jobs={}, usage_book=UsageBook())
    daemon.usage_book._removed = {}
    for n in range(1000):
        record = job(n, session=f"/s/{n}", cost=0.1)
        daemon.jobs[record.id] = record
    calls = 0
    real = budget.tree_key

    def counted(record: JobRecord) -> str:
        nonlocal calls
        calls += 1
        return real(record)

    budget.tree_key = counted  # type: ignore[assignment]
    try:
        started = time.monotonic()
        with budget.many_rows(daemon):
            rows = [budget.row_usage(daemon, r) for r in daemon.jobs.values()]
        elapsed = time.monotonic() - started
    finally:
        budget.tree_key = real  # type: ignore[assignment]
    assert len(rows) == 1000 and calls == 1000, calls  # not 1,000 x 1,000
    assert elapsed < 5.0
