"""The web layer's fixtures: `lab`, the fake pi's lab (`fake_pi_env`), and `web`, `roost web`
serving it (kit.webserver) until the test ends."""

from __future__ import annotations

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
