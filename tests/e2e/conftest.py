"""The browser tests' fixtures (tests/e2e/test_web_*.py): `browser`, a headless Debian
chromium (kit.browser), and `shots`, screenshots to $ROOST_WEB_SCREENSHOTS when
set (the README's come from `ROOST_WEB_SCREENSHOTS=docs/img`), else to the test's temp dir."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.browser import CHROMIUM, DRIVER, MISSING, chromium


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
