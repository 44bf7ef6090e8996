"""Driving `roost acp` with the agent-client-protocol package's own client side: the
agent spawned as an editor spawns it (stdio), every `session/update` recorded, permission
requests answered by a rule the test gives."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from kit.lab import Lab


class Editor:
    """The client side: what the agent sent, and how it answers a permission request
    (`choose(options)`: an option id, None to cancel it, "wait" never to answer)."""

    def __init__(self, choose: Callable[[list[Any]], str | None] | None = None) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[tuple[Any, list[Any]]] = []
        self.choose = choose or (lambda options: options[0].option_id)
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        chosen = self.choose(options)
        if chosen == "wait":  # a person who never answers here
            await asyncio.Event().wait()
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen))

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/read_text_file")

    async def write_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/write_text_file")

    # -- what the tests read ---------------------------------------------------------------
    def of(self, session: str, kind: str) -> list[Any]:
        return [u for s, u in self.updates if s == session and u.session_update == kind]

    def text(self, session: str, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.of(session, kind))

    async def until(self, predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while not (value := predicate()):
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"not seen in {timeout} s; updates: {self.updates}")
            await asyncio.sleep(0.05)
        return value


@asynccontextmanager
async def roost_acp(lab: Lab, editor: Editor) -> AsyncIterator[Any]:
    """`roost acp` started as an editor starts it, initialized; its connection."""
    async with spawn_agent_process(
        editor,
        sys.executable,
        "-m",
        "roost.cli",
        "acp",
        env=lab.env,
        cwd=str(lab.work),
        # The library waits 2 s for the exit after closing stdin, then terminates a process
        # that may have exited meanwhile (ProcessLookupError): on a loaded machine roost acp's
        # exit can take longer than that, so wait as an editor would.
        transport_kwargs={"shutdown_timeout": 30.0},
        use_unstable_protocol=True,
    ) as (conn, _process):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn
