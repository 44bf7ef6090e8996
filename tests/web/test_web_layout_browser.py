"""The web's layout measured in a real browser (Debian's chromium through selenium) over a
made-up world of 25 jobs (roost.web.showcase; no roostd): the job list holds 20+ rows
on a 1280x900 screen; on a phone (chromium's mobile emulation, 375x812) no page scrolls
sideways, every control is at least 44 px high and the events page breaks no word; the
rendered Markdown loads nothing from another host and runs no script.

Screenshots of each page at both sizes go to the test's temp dir; those the web guide shows
(DOC_SHOTS: `web-1280-list.png`, `web-375-job.png`, ...) to $ROOST_WEB_SCREENSHOTS when set
(the docs' come from `ROOST_WEB_SCREENSHOTS=docs/img`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.browser import CHROMIUM, DRIVER, MISSING, chromium, load

from roost.web.showcase import Showcase

pytestmark = [pytest.mark.timeout(300), pytest.mark.skipif(not (CHROMIUM and DRIVER), reason=MISSING)]

PAGES = {
    "list": "/",
    "job": "/job/1a2b3c01",
    "diff": "/job/1a2b3c01/diff",
    "inbox": "/inbox",
    "events": "/events",
    "new": "/new",
    "remove": "/job/1a2b3c01/rm",
}

# What sticks out past the screen, and every control lower than 44 px.
MEASURE = """
const width = document.documentElement.clientWidth;
const over = [...document.querySelectorAll("body *")]
  .filter((el) => el.getBoundingClientRect().right > width + 0.5)
  .map((el) => `${el.tagName}.${el.className}: ${Math.round(el.getBoundingClientRect().right)}`);
const controls = "a[href], button, input:not([type=hidden]), select, textarea, summary";
const small = [...document.querySelectorAll(controls)]
  .filter((el) => el.getClientRects().length && !el.closest("details:not([open]) > :not(summary)"))
  .filter((el) => !el.closest(".md"))  // a link inside an agent's text is text, not a control
  .filter((el) => el.getBoundingClientRect().height < 44)
  .filter((el) => !(el.type === "checkbox" && el.closest("label")
                    && el.closest("label").getBoundingClientRect().height >= 44))  // its label is the target
  .map((el) => `${el.tagName}.${el.className} ${JSON.stringify(el.textContent.trim().slice(0, 20))}: `
               + `${Math.round(el.getBoundingClientRect().height)}`);
return {scroll: document.documentElement.scrollWidth, width, over: over.slice(0, 6), small};
"""

# Each word of the events table, laid out on one line or not (a word broken mid-word).
BROKEN_WORDS = """
const broken = [];
for (const cell of document.querySelectorAll(".events td")) {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const re = /\\S+/g; let m;
    while ((m = re.exec(node.data))) {
      if (m[0].length > 40) continue;  // a path or id longer than a phone's line may break
      const range = document.createRange();
      range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      if (lines.size > 1) broken.push(m[0]);
    }
  }
}
return broken.slice(0, 10);
"""


@pytest.fixture
def show(tmp_path: Path) -> Iterator[Showcase]:
    with Showcase(tmp_path / "world") as world:
        yield world


DOC_SHOTS = {"1280-list", "1280-job", "1280-diff", "1280-inbox", "375-list", "375-job", "375-remove"}


def shoot(driver: Any, tmp_path: Path, name: str) -> None:
    """The page as it is, to the temp dir; a docs' one to $ROOST_WEB_SCREENSHOTS too."""
    driver.save_screenshot(str(tmp_path / f"web-{name}.png"))
    docs = os.environ.get("ROOST_WEB_SCREENSHOTS")
    if docs and name in DOC_SHOTS:
        Path(docs).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(docs) / f"web-{name}.png"))


def emulate(driver: Any, width: int, height: int, mobile: bool) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
    )


def test_the_job_list_holds_twenty_jobs_on_a_laptop_screen(show: Showcase, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with chromium(1280, 900) as driver:
        emulate(driver, 1280, 900, mobile=False)
        load(driver, show.pair_url())
        load(driver, show.url + "/")
        rows = driver.find_elements(By.CSS_SELECTOR, "#tree .job")
        assert len(rows) == len(show.rows)
        visible = [r for r in rows if r.rect["y"] + r.rect["height"] <= 900]
        assert len(visible) >= 20, f"{len(visible)} rows on the first screen"
        first = rows[0].text
        assert "review-parser" in first and "1a2b3c01" in first and "needs_input" in first
        assert "rename the old entry points" in first  # the question of a waiting job
        failed = driver.find_element(By.CSS_SELECTOR, "#tree .state-failed").text
        assert "pi exited 1" in failed or "budget exhausted" in failed  # its reason
        for name, path in PAGES.items():
            load(driver, show.url + path)
            measured = driver.execute_script(MEASURE)
            assert measured["scroll"] <= 1280, (name, measured["over"])
            shoot(driver, tmp_path, f"1280-{name}")


def test_no_page_scrolls_sideways_on_a_phone_and_every_control_is_44px(
    show: Showcase, tmp_path: Path
) -> None:
    with chromium(375, 812) as driver:
        emulate(driver, 375, 812, mobile=True)
        load(driver, show.pair_url())
        for name, path in PAGES.items():
            load(driver, show.url + path)
            measured = driver.execute_script(MEASURE)
            assert measured["scroll"] <= measured["width"] == 375, (name, measured["over"])
            assert measured["small"] == [], (name, measured["small"])
            shoot(driver, tmp_path, f"375-{name}")
        load(driver, show.url + "/events")
        assert driver.execute_script(BROKEN_WORDS) == []


def test_rendered_markdown_loads_nothing_and_runs_nothing(show: Showcase) -> None:
    from selenium.webdriver.common.by import By

    with chromium(1280, 900) as driver:
        load(driver, show.pair_url())
        load(driver, show.url + "/job/1a2b3c01")
        md = driver.find_elements(By.CSS_SELECTOR, "#transcript .md")[-1]
        assert md.find_elements(By.CSS_SELECTOR, "table td")  # the table is a table
        assert md.find_elements(By.CSS_SELECTOR, ".hl .k")  # coloured code
        assert md.find_elements(By.CSS_SELECTOR, "img") == []  # the image: a link
        hrefs = [a.get_attribute("href") for a in md.find_elements(By.CSS_SELECTOR, "a")]
        assert all(h.startswith(("https:", "http:", "mailto:")) for h in hrefs), hrefs
        assert all(
            a.get_attribute("rel") == "noopener noreferrer" for a in md.find_elements(By.CSS_SELECTOR, "a")
        )
        assert '<div onclick="alert(1)">an HTML block</div>' in md.text
        assert driver.execute_script("return window.__pwned === undefined")
        badge = driver.find_element(By.CSS_SELECTOR, ".badge-message").text
        assert badge == "message from scout (child)"
        assert "agent-message" not in driver.find_element(By.ID, "transcript").text
        font = driver.execute_script(
            "return getComputedStyle(document.querySelector('.md .hl pre')).fontFamily"
        )
        assert "mono" in font.lower()


def test_the_inbox_count_in_the_nav_is_live(show: Showcase) -> None:
    from kit.browser import wait_text

    with chromium(1280, 900) as driver:
        load(driver, show.pair_url())
        load(driver, show.url + "/inbox")
        wait_text(driver, "#navcount", str(len(show.inbox())))
        driver.execute_script("document.getElementById('navcount').textContent = 'x'")
        show.rows["1a2b3c02"]["state"] = "needs_input"  # one more question waits
        show.rows["1a2b3c02"]["question"] = "and this?"
        show.touch()
        wait_text(driver, "#navcount", str(len(show.inbox())))


def test_chromium_keeps_its_temp_files_to_itself() -> None:
    """chromium's singleton socket directory and chromedriver's profile go to a temp dir of
    the browser's own, removed when it quits: quit chromiums left one in /tmp per run."""
    with chromium() as driver:
        temp = Path(driver.service.env["TMPDIR"])
        driver.get("about:blank")
        assert list(temp.glob("org.chromium.Chromium.*")), sorted(temp.iterdir())
    assert not temp.exists()
