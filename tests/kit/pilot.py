"""Waiting inside a textual app under test (its Pilot): the app's loop keeps running
between checks, where a blocking wait would freeze it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


async def until(pilot: Any, predicate: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    """`predicate()`'s first true value, checked every 50 ms of the app's own time."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await pilot.pause(0.05)
    return value
