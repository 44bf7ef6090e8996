"""`Coalesced`: the queue's pump, the weighing of waiting jobs and the retry of unsaved records
run once for a burst of asks, again for an ask made while they run, and never outside a loop."""

from __future__ import annotations

import asyncio

from roost.supervise.coalesce import Coalesced


def test_a_burst_of_asks_runs_the_callback_once_on_the_next_turn() -> None:
    calls: list[str] = []
    soon = Coalesced(lambda: calls.append("run"))

    async def main() -> None:
        for _ in range(5):
            soon()
        assert calls == []  # not inside the ask: on the loop's next turn
        await asyncio.sleep(0)
        assert calls == ["run"]
        await asyncio.sleep(0.01)
        assert calls == ["run"]

    asyncio.run(main())


def test_an_ask_made_while_the_callback_runs_runs_it_again() -> None:
    calls: list[int] = []

    def callback() -> None:
        calls.append(len(calls))
        if len(calls) < 3:
            soon()  # a change the callback itself made

    soon = Coalesced(callback)

    async def main() -> None:
        soon()
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert calls == [0, 1, 2]


def test_a_delay_waits_from_the_first_ask_and_no_loop_runs_nothing() -> None:
    calls: list[float] = []
    later = Coalesced(lambda: calls.append(asyncio.get_running_loop().time()), delay=0.4)
    later()  # outside a loop: nothing, and nothing pending
    assert calls == []

    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        later()
        await asyncio.sleep(0.2)
        second = loop.time()
        later()  # pending: no second timer, no later run
        await asyncio.sleep(0.6)
        return started, second

    # Margins of 0.2 s either way: a loaded machine (the parallel suite's) holds a sleeping
    # loop for tens of milliseconds.
    started, second = asyncio.run(main())
    assert len(calls) == 1 and 0.4 <= calls[0] - started < second - started + 0.4, (started, second, calls)
