"""The web server's link to roostd: requests, and the live rows.

`roost web` is a client of roostd's socket like the CLI (roost.wire.client): a fault here never
reaches roostd. A request opens its own connection in a worker thread (a Unix socket
connect is ~0.1 ms), so a slow op never blocks the event loop. The live view is one
`subscribe` connection read by one thread, blocked on the socket: roostd pushes a `job`
event when a row changes, and the thread hands the rows (`list`) to the loop, which wakes every open
page (`Hub`). Nothing polls: with no traffic the thread and the loop sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

import anyio.to_thread

from roost.wire.client import Client, DaemonUnavailable, connect
from roost.wire.protocol import ProtocolError, RequestError

log = logging.getLogger("roost.web")

RETRY_SECONDS = (0.05, 1.0)
"""The live link's waits before it connects again while roostd is away: from the first to
the second, doubling (roostd starting up answers within a second)."""


async def request(op: str, **args: Any) -> dict[str, Any]:
    """One roostd request; RequestError as the CLI gets it, DaemonUnavailable when it is down."""

    def call() -> dict[str, Any]:
        # Like every roost command: roostd is started when it does not answer (with
        # ROOST_NO_AUTOSTART, waited for), so an action right after a restart is not lost.
        with connect() as client:
            return client.call(op, args, timeout=60.0)

    return await anyio.to_thread.run_sync(call)


class Hub:
    """The rows as roostd last said, and the pages that wait for the next change."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.connected = False
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._client: Client | None = None
        self.closing = asyncio.Event()
        """Set when the server stops: every live stream ends (app.LiveStream)."""
        self.partials: dict[str, dict[str, Any]] = {}
        """What each job's pi is streaming now (roostd's `follow_partials`), by job id."""
        self._partial_waits: dict[str, asyncio.Event] = {}
        self._partials_client: Client | None = None

    # -- the loop's side ------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._follow, name="roost-web-subscribe", daemon=True).start()
        threading.Thread(target=self._follow_partials, name="roost-web-partials", daemon=True).start()

    def close(self) -> None:
        """The server is stopping: the live streams end now, before uvicorn waits for them."""
        self.closing.set()

    def stop(self) -> None:
        self.close()
        self._stop.set()
        for client in (self._client, self._partials_client):
            if client is not None:
                client.interrupt()

    async def changed(self, seen: int) -> int:
        """Wait until the rows differ from version `seen`; the new version."""
        while self.version == seen:
            event = self._changed
            await event.wait()
        return self.version

    async def partial_changed(self, job: str) -> None:
        """Wait until what job `job`'s pi streams changes (only its pages wake)."""
        await self._partial_waits.setdefault(job, asyncio.Event()).wait()

    def _apply_partial(
        self, job: str | None, value: dict[str, Any] | None, every: dict[str, dict[str, Any]] | None = None
    ) -> None:
        if job is None:  # all of them at once: (re)connected, or roostd went away
            changed = set(self.partials) | set(every or {})
            self.partials = dict(every or {})
        else:
            changed = {job}
            if value is None:
                self.partials.pop(job, None)
            else:
                self.partials[job] = value
        for name in changed:
            event = self._partial_waits.pop(name, None)
            if event is not None:
                event.set()

    def _apply(self, rows: list[dict[str, Any]] | None, connected: bool) -> None:
        if rows is not None:
            self.rows = {r["id"]: r for r in rows}
        self.connected = connected
        self.version += 1
        event, self._changed = self._changed, asyncio.Event()
        event.set()  # every waiter of this version wakes; new waiters wait on the new event

    # -- the thread's side ------------------------------------------------------------------------
    def _post(self, rows: list[dict[str, Any]] | None, connected: bool) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._apply, rows, connected)

    def _post_partial(
        self, job: str | None, value: dict[str, Any] | None, every: dict[str, dict[str, Any]] | None = None
    ) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._apply_partial, job, value, every)

    def _follow_partials(self) -> None:
        """The live text: roostd's partials (coalesced by each worker), on a connection
        of their own, so a busy job's stream never delays the rows."""
        delay = RETRY_SECONDS[0]
        while not self._stop.is_set():
            try:
                with connect(autostart=False) as client:
                    self._partials_client = client
                    self._post_partial(None, None, client.request("follow_partials")["partials"])
                    delay = RETRY_SECONDS[0]
                    for event in client.events():
                        if event.get("event") == "partial":
                            self._post_partial(str(event.get("job")), event.get("partial"))
            except RequestError:
                return  # a roostd without live text: the pages show complete entries only
            except (DaemonUnavailable, ProtocolError, OSError, ValueError):
                if self._stop.is_set():
                    return
                self._post_partial(None, None, {})
            finally:
                self._partials_client = None
            self._stop.wait(delay)
            delay = min(delay * 2, RETRY_SECONDS[1])

    def _follow(self) -> None:
        delay = RETRY_SECONDS[0]
        while not self._stop.is_set():
            try:
                with connect(autostart=False) as client:
                    self._client = client
                    self._post(client.request("subscribe")["jobs"], True)
                    delay = RETRY_SECONDS[0]
                    for event in client.events():
                        if event.get("event") == "job":
                            # `list` is the truth: a removed job's last event looks like
                            # any other change. Asked on a connection of its own, opened
                            # for it: one kept idle until the first change was closed by
                            # roostd (its first frame late), a false "no roostd".
                            with connect(autostart=False) as lister:
                                self._post(lister.request("list")["jobs"], True)
            except (DaemonUnavailable, ProtocolError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    return
                if self.connected or delay >= RETRY_SECONDS[1]:
                    log.warning("roost web: no roostd (%s); connecting again", exc)
                self._post(None, False)
            finally:
                self._client = None
            self._stop.wait(delay)  # roostd is down: wait for it to come back
            delay = min(delay * 2, RETRY_SECONDS[1])
