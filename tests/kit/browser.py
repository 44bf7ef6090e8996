"""A headless Debian chromium driven by selenium through its chromedriver, for roost web's
browser tests and benchmark (browsers cannot be downloaded here: `scripts/test` installs
Debian's as root). selenium is a test dependency, imported only here.

```python
with chromium() as driver:
    driver.get(web.first_line)            # paired
    wait_text(driver, "#tree", "done")    # a live part, looked up again when swapped
```
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
MISSING = "needs Debian's chromium and chromium-driver (scripts/test installs them as root)"


@contextlib.contextmanager
def chromium(width: int = 1100, height: int = 900, timeout: float = 60.0) -> Iterator[Any]:
    """A fresh headless chromium (its own profile), quit at the end. It reaches nothing but
    the pages it is sent to (no background networking, component updates or sync: tests
    never leave the machine), and its temp files (the profile chromedriver makes, the
    singleton socket directory chromium leaves in TMPDIR when it is quit) go to a directory
    of its own, removed afterwards."""
    if not (CHROMIUM and DRIVER):
        raise FileNotFoundError(MISSING)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-domain-reliability",
        "--no-default-browser-check",
    ):
        options.add_argument(arg)
    temp = tempfile.mkdtemp(prefix="roost-chromium-")
    try:
        service = Service(DRIVER, env={**os.environ, "TMPDIR": temp})
        driver = webdriver.Chrome(options=options, service=service)
        try:
            driver.set_page_load_timeout(timeout)
            yield driver
        finally:
            driver.quit()
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def load(driver: Any, url: str, timeout: float = 60.0) -> None:
    """Open `url` and wait until it is loaded, its stylesheet applied. chromedriver's `get`
    can return while the new page is still `interactive` (seen after leaving a page with an
    open event stream): a layout measured then is the unstyled page's."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.readyState") == "complete", f"{url} to finish loading"
    )


def wait_text(driver: Any, css: str, wanted: str, timeout: float = 60.0) -> None:
    """Until the element `css` holds `wanted` (found again when a live part swapped it)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(
        driver, timeout, ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
    ).until(lambda d: wanted in d.find_element(By.CSS_SELECTOR, css).text, f"{wanted!r} in {css}")


def click(driver: Any, by: str, value: str, timeout: float = 60.0) -> None:
    """Click the element, found again if a live part swapped it between finding and clicking."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    def press(d: Any) -> bool:
        d.find_element(by, value).click()
        return True

    WebDriverWait(
        driver, timeout, ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
    ).until(press, f"a clickable {value}")
