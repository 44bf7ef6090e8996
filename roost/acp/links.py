"""roost acp's link to roostd: requests, and what roostd pushes.

A request opens its own connection in a thread of its own (roost.wire.client is blocking), so
a long `wait` never blocks the loop that answers the editor. `Feed` follows two connections
in threads of their own, as roost web does: `subscribe` (a job's row changed) and
`follow_partials` (what a job's pi streams now), and hands each push to the loop, where
the open sessions of that job read on. Nothing polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from roost.wire.client import DaemonUnavailable, connect
from roost.wire.protocol import ProtocolError, RequestError

RETRY_SECONDS = (0.05, 1.0)


async def request(op: str, within: float = 60.0, **args: Any) -> dict[str, Any]:
    """One roostd request (started when it does not answer), answered `within` seconds;
    RequestError as the CLI gets it. Its thread is a daemon: an editor that closes the
    pipe in the middle of a turn's `wait` ends `roost acp` at once (asyncio.to_thread's
    executor would be joined at exit, for as long as the wait lasts)."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()

    def settle(result: dict[str, Any] | None, error: BaseException | None) -> None:
        if answer.done():
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(result or {})

    def call() -> None:
        try:
            with connect() as client:
                result, error = client.call(op, args, within), None
        except Exception as exc:  # handed to the awaiting coroutine
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=call, name=f"roost-acp-{op}", daemon=True).start()
    return await answer


class Feed:
    """roostd's pushes for the jobs the open sessions show: `changed(job, value, streamed)`
    on the loop, `value` the job's streamed partial (`streamed`) or its new row."""

    def __init__(self, changed: Callable[[str, dict[str, Any] | None, bool], None]) -> None:
        self._changed = changed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._clients: dict[str, Any] = {}

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for op in ("subscribe", "follow_partials"):
            threading.Thread(target=self._follow, args=(op,), name=f"roost-acp-{op}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        for client in list(self._clients.values()):
            client.interrupt()

    def _post(self, job: str, partial: dict[str, Any] | None, streamed: bool) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._changed, job, partial, streamed)

    def _follow(self, op: str) -> None:
        delay = RETRY_SECONDS[0]
        while not self._stop.is_set():
            try:
                with connect(autostart=False) as client:
                    self._clients[op] = client
                    first = client.request(op)
                    for job, value in (first.get("partials") or {}).items():
                        self._post(str(job), value, True)
                    delay = RETRY_SECONDS[0]
                    for event in client.events():
                        if event.get("event") == "partial":
                            self._post(str(event.get("job")), event.get("partial"), True)
                        elif event.get("event") == "job":
                            row = event.get("row") or {}
                            self._post(str(row.get("id")), row, False)
            except RequestError:
                return  # a roostd without live text: complete entries only
            except (DaemonUnavailable, ProtocolError, OSError, ValueError):
                if self._stop.is_set():
                    return
            finally:
                self._clients.pop(op, None)
            self._stop.wait(delay)
            delay = min(delay * 2, RETRY_SECONDS[1])
