"""The queue's pure rules: maxRunning's default, an item for a queued job, the spawn text."""

from __future__ import annotations

import pytest

from roost.agents.tooltext import spawn_text
from roost.job.states import ItemKind, JobState, Outcome, ProcState, item_outcome
from roost.supervise.jobqueue import JOB_MB, checked_priority, derive_limit
from roost.wire.protocol import RequestError

GIB = 2**30


def test_max_running_default_is_two_per_core_within_the_memory() -> None:
    assert derive_limit(2, 24 * GIB) == 4  # cores decide
    assert derive_limit(16, 1 * GIB) == GIB // (JOB_MB * 2**20)  # memory decides: 6
    assert derive_limit(8, 10 * 2**20) == 1  # never 0
    assert derive_limit(3, None) == 6  # no /proc/meminfo: cores alone


@pytest.mark.parametrize("kind", list(ItemKind))
@pytest.mark.parametrize("worker", [None, ProcState.EXITED, ProcState.STOPPED])
def test_an_item_for_a_queued_job_is_kept_and_wakes_nothing(kind: ItemKind, worker: ProcState | None) -> None:
    decision = item_outcome(
        kind=kind,
        job=JobState.QUEUED,
        attached=False,
        worker=worker,
        worker_alive=False,
        dialog=False,
        busy=False,
    )
    assert (decision.outcome, decision.post, decision.wake) == (Outcome.QUEUED, True, False)


def test_a_queued_spawn_tells_the_parent_its_position() -> None:
    assert spawn_text("a1b2c3d4", "w", None, 3).startswith('queued (position 3): spawned a1b2c3d4 "w"')
    assert spawn_text("a1b2c3d4", "w").startswith('spawned a1b2c3d4 "w".')


@pytest.mark.parametrize("bad", [True, 1.5, "3", 10**7])
def test_a_priority_is_a_bounded_whole_number(bad: object) -> None:
    with pytest.raises(RequestError, match="priority must be"):
        checked_priority(bad)
    assert checked_priority(None) == 0 and checked_priority(-5) == -5
