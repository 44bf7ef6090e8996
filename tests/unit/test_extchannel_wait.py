"""An agent's roost_* call that reaches the worker before the worker's link to roostd is up
(roostd starting or restarting, the worker's hello not answered yet) waits for the link
instead of being refused (roost/worker/extchannel.py): nothing was sent yet, and a model told
"try again" could only retry. Seen on a loaded machine right after a job's start."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.wire.protocol import REFUSED, RequestError
from roost.worker import extchannel
from roost.worker.extchannel import ExtensionChannel


class Link:
    """A worker's DaemonLink that binds `after` seconds in (never: None)."""

    def __init__(self, after: float | None) -> None:
        self.bound = asyncio.Event()
        self.sent: list[tuple[str, dict[str, Any]]] = []
        if after is not None:
            asyncio.get_running_loop().call_later(after, self.bound.set)

    @property
    def connected(self) -> bool:
        return self.bound.is_set()

    async def wait_bound(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.bound.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def request(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.bound.is_set(), "sent before the link was up"
        self.sent.append((op, args))
        return {"status": "spawned"}


def forward(link: Link, op: str) -> Any:
    channel = ExtensionChannel("job1", "one", lambda: None, link, lambda: None, lambda: None)  # type: ignore[arg-type]
    return channel._handlers()[op](None, {"id": 7, "op": op, "task": "t"})


def test_a_call_waits_for_the_link_and_goes_out_once() -> None:
    async def scenario() -> None:
        link = Link(after=0.3)
        result = await forward(link, "spawn")
        assert result == {"status": "spawned"}
        assert link.sent == [("spawn", {"task": "t"})]

    asyncio.run(scenario())


def test_a_link_that_stays_down_is_refused_after_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extchannel, "LINK_WAIT_SECONDS", 0.2)

    async def scenario() -> None:
        link = Link(after=None)
        with pytest.raises(RequestError) as refused:
            await forward(link, "send")
        assert refused.value.code == REFUSED
        assert "not reachable" in str(refused.value) and "try again" in str(refused.value)
        assert link.sent == []

    asyncio.run(scenario())
