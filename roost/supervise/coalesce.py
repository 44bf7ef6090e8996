"""A call that many changes ask for and that runs once: the queue's pump, the weighing of
waiting jobs, the retry of unsaved records each run once for a burst of changes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Coalesced:
    """`callback` run once on the running loop, `delay` seconds after the first ask (0: on
    its next turn), however many asks come before it runs. Outside a loop (roostd not
    serving) an ask does nothing: the next change asks again."""

    def __init__(self, callback: Callable[[], None], delay: float = 0.0) -> None:
        self.callback = callback
        self.delay = delay
        self._handle: asyncio.Handle | None = None

    def __call__(self) -> None:
        if self._handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._handle = loop.call_later(self.delay, self._run) if self.delay else loop.call_soon(self._run)

    def _run(self) -> None:
        self._handle = None  # asks made while the callback runs schedule it again
        self.callback()
