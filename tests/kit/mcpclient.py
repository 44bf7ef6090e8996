"""Driving `roost mcp` with the MCP SDK's own client, over stdio or streamable HTTP, from a
synchronous test: `McpSession` runs the client on an anyio loop in a thread of its own."""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import anyio
import anyio.from_thread
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from kit.lab import Lab

T = TypeVar("T")


def stdio_params(lab: Lab, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """`roost mcp ARGS` as a client starts it, with the lab's variables (a client passes
    only HOME, LOGNAME, PATH, SHELL, TERM and USER unless told: docs/guides/mcp.md)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "roost.cli", "mcp", *args],
        env={**lab.env, **(env or {})},
        cwd=str(lab.work),
    )


class McpSession:
    """`with McpSession(server) as s: s.call("list_jobs", {})`; `server` as `mcp.Client`
    takes it (StdioServerParameters, a URL, a transport)."""

    def __init__(self, server: Any, name: str = "roost-tests") -> None:
        self.server, self.name = server, name
        self._portal_cm: Any = None

    def __enter__(self) -> McpSession:
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self._ready: Future[None] = Future()
        self._done = threading.Event()
        self._task = self.portal.start_task_soon(self._hold)
        self._ready.result(timeout=60)
        return self

    async def _hold(self) -> None:
        from mcp_types import Implementation

        try:
            async with Client(self.server, client_info=Implementation(name=self.name, version="1")) as client:
                self.client = client
                self._ready.set_result(None)
                await anyio.to_thread.run_sync(self._done.wait)
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def run(self, make: Callable[[Client], Awaitable[T]], timeout: float = 90.0) -> T:
        async def go() -> T:
            with anyio.fail_after(timeout):
                return await make(self.client)

        return self.portal.call(go)

    def call(self, tool: str, args: dict[str, Any] | None = None, timeout: float = 90.0) -> Any:
        """The tool's result (a CallToolResult)."""
        return self.run(lambda c: c.call_tool(tool, args or {}), timeout)

    def ok(self, tool: str, args: dict[str, Any] | None = None, timeout: float = 90.0) -> Any:
        """The structured content of a call that must succeed."""
        result = self.call(tool, args, timeout)
        assert not result.is_error, result.content
        return result.structured_content

    def error(self, tool: str, args: dict[str, Any] | None = None) -> str:
        """The one-line message of a call that must fail."""
        result = self.call(tool, args)
        assert result.is_error, result
        return str(result.content[0].text)

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        try:
            self._task.result(timeout=30)
        finally:
            self._portal_cm.__exit__(None, None, None)
