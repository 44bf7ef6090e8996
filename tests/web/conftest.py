"""The web layer's fixtures: `lab`, the fake pi's lab (`fake_pi_env`), and `web`, `roost web`
serving it (kit.webserver) until the test ends; and no roostd left behind by a test that
serves pages in-process."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from kit.lab import Lab
from kit.webserver import WebServer


@pytest.fixture
def lab(fake_pi_env: Lab) -> Lab:
    return fake_pi_env


@pytest.fixture
def web(fake_pi_env: Lab) -> Iterator[WebServer]:
    with WebServer(fake_pi_env) as server:
        yield server


@pytest.fixture(autouse=True)
def no_roostd_left_behind(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A page served in-process (Starlette's TestClient) asks roostd as `roost web` does,
    which starts one in the ROOST_HOME the test set when none answers. It is stopped with
    its jobs when the test ends, before that ROOST_HOME is unset: a server a test starts
    stops with it. Only a ROOST_HOME the test itself set (never one from outside)."""
    outside = os.environ.get("ROOST_HOME")
    yield
    home = os.environ.get("ROOST_HOME")
    if not home or home == outside:
        return
    from roost.wire.client import DaemonUnavailable, connect

    with contextlib.suppress(DaemonUnavailable, OSError), connect(autostart=False, timeout=5) as client:
        client.request("shutdown", timeout=30, jobs=True)
