"""A worker whose run roostd queued and then granted at once is not left queued for ever.

roostd answers a worker's `turn` with "queued", and a moment later (a slot freed) pushes
`turn`. The link reads both frames in one go: the push's handler runs before the pump's
coroutine resumes with the older answer. Seen once in CI's crash torture: the job `running`
in roostd, its worker idle, the item in new/ for good."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from roost.job.states import JobState
from roost.worker.itempump import ItemPump


class Pump(ItemPump):
    def __init__(self, link: Any) -> None:
        self.link = link
        self.queued = False
        self.turns = 0
        self.releasing = False
        self.wake = asyncio.Event()
        self.runs = SimpleNamespace(state=JobState.DONE, streaming=False, next_cause=None, dialog_open=False)
        self.delivery = SimpleNamespace(inflight=[], has_new=lambda: True)
        self.report = lambda: None


class Link:
    """roostd's answers to `turn`, one future each, resolved by the test."""

    def __init__(self) -> None:
        self.answers: list[asyncio.Future[bool]] = []

    async def turn(self) -> bool:
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return await answer


async def asking(pump: Pump, link: Link) -> asyncio.Task[bool]:
    asked = len(link.answers)
    task = asyncio.ensure_future(pump._slot_for_a_run())
    while len(link.answers) == asked:
        await asyncio.sleep(0)
    return task


def test_a_turn_pushed_before_the_queued_answer_is_handled_lets_the_run_go() -> None:
    async def scenario() -> None:
        link = Link()
        pump = Pump(link)
        task = await asking(pump, link)
        link.answers[-1].set_result(False)  # "queued"...
        pump._on_turn({})  # ...and the grant's push, read in the same chunk
        assert await task is False
        assert pump.queued is False, "the older answer queued the worker again"
        assert pump.wake.is_set()  # the pump comes round and asks again
        task = await asking(pump, link)
        link.answers[-1].set_result(True)  # roostd: the job is running, go
        assert await task is True

    asyncio.run(scenario())


def test_a_queued_answer_without_a_push_keeps_the_worker_queued_until_one_comes() -> None:
    async def scenario() -> None:
        link = Link()
        pump = Pump(link)
        task = await asking(pump, link)
        link.answers[-1].set_result(False)
        assert await task is False
        assert pump.queued is True
        assert await pump._slot_for_a_run() is False  # no second ask while queued
        assert len(link.answers) == 1
        pump._on_turn({})
        task = await asking(pump, link)
        link.answers[-1].set_result(True)
        assert await task is True and pump.queued is False

    asyncio.run(scenario())
