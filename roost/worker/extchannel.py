"""The job's pi extension on the worker's socket (`ext.sock`): who may connect, what it may
ask, and the one live connection the worker injects items through.

Only this worker's pi itself may say `ext_hello` (the kernel names the caller: SO_PEERCRED);
its tool calls (`peers`, `send`, `spawn`) are forwarded to roostd on the worker's own
authenticated link, so the sender is always this job, never an argument.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from roost.wire import protocol
from roost.wire.connection import Connection, serve_connection
from roost.wire.ops import EXTENSION_OPS, Op
from roost.wire.protocol import REFUSED, UNAUTHORIZED, RequestError
from roost.worker.daemon_link import DaemonLink

LINK_WAIT_SECONDS = 30.0
"""How long an agent's `roost_agents`/`roost_send`/`roost_spawn` call waits for the worker's
link to roostd (roostd starting or restarting, the worker's hello not answered yet) before it
is refused. Nothing was sent yet, so waiting is safe, and it spares the model a refusal that
it could only retry (seen right after a job's start on a loaded machine)."""


class ExtensionChannel:
    def __init__(
        self,
        job_id: str,
        job_name: str,
        pi_pid: Callable[[], int | None],
        link: DaemonLink,
        on_hello: Callable[[], None],
        on_lost: Callable[[], None],
    ) -> None:
        self.job_id, self.job_name = job_id, job_name
        self.pi_pid = pi_pid
        self.link = link
        self.on_hello = on_hello  # the extension is there: deliver what waits
        self.on_lost = on_lost  # it went away: what was in flight goes out again
        self.conn: Connection | None = None
        self.ready = asyncio.Event()
        self.gate: Any = None  # the approval gate (roost.worker.gate.Gate), set by the worker

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer)
        if not await conn.send(protocol.greeting("roost-worker")):
            return
        try:
            await serve_connection(conn, self._handlers(), EXTENSION_OPS, self._authorize)
        finally:
            if self.conn is conn:
                self.conn = None
                self.ready.clear()
                self.on_lost()

    @staticmethod
    def _authorize(conn: Connection, op: Op) -> str | None:
        if op.caller == "peer" and conn.peer_id is None:
            return f"{op.name}: say ext_hello first"
        return None

    def _handlers(self) -> dict[str, Any]:
        async def ext_hello(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
            # No secret: anything pi's environment held, a tool could read back from
            # /proc/<pi>/environ. The kernel says which process connected (SO_PEERCRED);
            # only this worker's pi itself (not a tool it runs) is the job's extension.
            peer = conn.peer
            if peer is None or peer.uid != os.getuid() or peer.pid != self.pi_pid():
                raise RequestError(UNAUTHORIZED, "only this worker's pi may connect")
            if request.get("pid") != peer.pid:
                raise RequestError(UNAUTHORIZED, "ext_hello: pid does not match the caller")
            conn.peer_id = self.job_id
            self.conn = conn
            self.ready.set()
            self.on_hello()
            # `gate`: ask the worker before every tool call (the job has approvals).
            return {
                "job": self.job_id,
                "name": self.job_name,
                "gate": bool(self.gate is not None and self.gate.gated),
            }

        async def forward(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
            args = {k: v for k, v in request.items() if k not in ("id", "op")}
            if not await self.link.wait_bound(LINK_WAIT_SECONDS):
                raise RequestError(
                    REFUSED, f"roostd is not reachable (waited {LINK_WAIT_SECONDS:g} s); try again"
                )
            return await self.link.request(str(request["op"]), **args)

        async def gate(conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
            if conn.peer_id is None:  # only the pi that said ext_hello
                raise RequestError(UNAUTHORIZED, "gate: say ext_hello first")
            if self.gate is None:
                return {"block": False}
            result: dict[str, Any] = await self.gate.gate(conn, request)
            return result

        return {"ext_hello": ext_hello, "peers": forward, "send": forward, "spawn": forward, "gate": gate}
