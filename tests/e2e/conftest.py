"""The end-to-end layer's fixtures:

- `lab`: a real-pi Lab with its own scripted model (`make_lab()`), for a file that needs no
  other (a file that does defines its own `lab`);
- `tmux`: a private tmux server with one session (kit.attach.Tmux), its screen printed
  after the test (shown when it failed);
- the browser tests' (tests/e2e/test_web_*.py): `browser`, a headless Debian chromium
  (kit.browser), and `shots`, screenshots to $ROOST_WEB_SCREENSHOTS when set (the
  README's come from `ROOST_WEB_SCREENSHOTS=docs/img`), else to the test's temp dir.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.attach import Tmux
from kit.browser import CHROMIUM, DRIVER, MISSING, chromium
from kit.lab import Lab


@pytest.fixture
def lab(make_lab: Callable[..., Lab]) -> Lab:
    return make_lab()


@pytest.fixture
def tmux(request: pytest.FixtureRequest) -> Iterator[Tmux]:
    session = Tmux(f"roost-{request.node.name[:20]}")
    try:
        yield session
    finally:
        print("--- tmux screen ---\n" + session.capture()[-4000:])
        session.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (CHROMIUM and DRIVER):
        if os.geteuid() == 0:
            pytest.fail(MISSING, pytrace=False)  # CI runs as root: never skipped there
        pytest.skip(MISSING)
    with chromium(timeout=60.0) as driver:
        yield driver


@pytest.fixture
def shots(tmp_path: Path) -> Callable[[Any, str], None]:
    where = Path(os.environ.get("ROOST_WEB_SCREENSHOTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)

    def take(driver: Any, name: str) -> None:
        driver.save_screenshot(str(where / f"web-{name}.png"))

    return take
