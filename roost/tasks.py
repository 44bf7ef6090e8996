"""Background tasks that nothing awaits, kept and watched.

The event loop keeps only a weak reference to a task: one that nothing else refers to can
be collected mid-flight, and an exception it raises is then never seen (asyncio's docs on
`create_task`). `Tasks.spawn` keeps each task until it is done and logs its failure, naming
what failed; its owner cancels what is left when it shuts down (`cancel_all`).

A task whose result someone awaits (`await task`, `task.result()`) needs none of this.
Standard library only, so both roostd and the worker can use it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Tasks:
    """The fire-and-forget tasks of one owner (the worker, roostd)."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._running: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], what: str) -> asyncio.Task[T]:
        """Run `coro` in the background; `what` names it in the log if it fails."""
        task = asyncio.get_running_loop().create_task(coro, name=what)
        self._running.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._log.error("%s failed: %r", task.get_name(), exc, exc_info=exc)

    @property
    def running(self) -> int:
        """How many are still running."""
        return len(self._running)

    async def one_done(self) -> None:
        """Wait until one of the tasks still running is done (at once when none is)."""
        if self._running:
            await asyncio.wait(set(self._running), return_when=asyncio.FIRST_COMPLETED)

    def cancel(self) -> None:
        """Cancel every task still running, without waiting (for an owner whose close is
        not a coroutine: a connection). The task calling it, if one of them, ends on its own."""
        try:
            current = asyncio.current_task()
        except RuntimeError:  # no running loop
            current = None
        for task in list(self._running):
            if task is not current:
                task.cancel()

    async def cancel_all(self) -> None:
        """Cancel every task still running and wait until each has ended."""
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


async def first_of(*aws: Awaitable[Any]) -> None:
    """Wait until one of `aws` is done, then cancel the others (none is left behind)."""
    futures = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            future.cancel()
