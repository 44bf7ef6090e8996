"""`roost web` in a real browser (Debian's chromium, driven by selenium through its
chromedriver) against real roostd and the real pi on the scripted model: pair a device,
see a job ask a question live and answer it, answer a dialog from the inbox, the phone
layout at 375 px. Screenshots go to $ROOST_WEB_SCREENSHOTS when set (the README's come
from `ROOST_WEB_SCREENSHOTS=docs/img`), else to the test's temp dir.

Few on purpose (a browser start is ~1 s; each test drives several flows).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from typing import Any

import pytest
from kit import FIXTURES
from kit.browser import load, wait_text
from kit.lab import Lab
from kit.webserver import WebServer

from roost.fakellm import (
    FakeLLM,
    first_user_contains,
    last_is_tool_result,
    last_tool_result_contains,
    last_user_contains,
    text,
    tool_call,
)

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("real_pi")]

T = 60

# The page's width, and what sticks out past 375 px: for a failure's message.
WIDTH = """
const over = [...document.querySelectorAll("body *")]
  .filter((el) => el.getBoundingClientRect().right > 375)
  .map((el) => `${el.tagName}.${el.className}: ${Math.round(el.getBoundingClientRect().right)}`);
return {width: document.documentElement.scrollWidth, over: over.slice(0, 6)};
"""


def test_pair_see_a_question_live_and_answer_it(
    make_lab: Callable[..., Lab], llm: FakeLLM, browser: Any, shots: Callable[[Any, str], None]
) -> None:
    from selenium.webdriver.common.by import By

    lab = make_lab(llm=llm)
    llm.add(
        first_user_contains("TASK-WEB") & last_user_contains("TASK-WEB"),
        text("I looked at the palette.\n\nShould the banner be <b>blue</b> or green?"),
    )
    llm.add(last_user_contains("blue, please"), text("ANSWER-WEB: the banner is blue now."))
    with WebServer(lab) as web:
        browser.get(web.first_line)  # pairing: the code is spent, the URL has none left
        assert browser.current_url == web.url + "/"
        assert "pair" not in browser.current_url
        job = lab.run_job("--name", "<script>banner</script>", "TASK-WEB")
        wait_text(browser, "#tree", "needs_input")  # pushed live, no reload
        wait_text(browser, "#tree", "<script>banner</script>")  # a live part: found again if swapped
        assert browser.execute_script("return window.__pwned === undefined")
        shots(browser, "tree")

        browser.find_element(By.CSS_SELECTOR, f'a[href="/job/{job}"]').click()
        wait_text(browser, "#question", "Should the banner be <b>blue</b> or green?")
        # The live head's hidden field belongs to the reply box's form: the reply names
        # the question it answers (a later answer of it is refused with who and when).
        named = browser.execute_script(
            "const f = document.querySelector('#reply').elements.namedItem('question');return f && f.value;"
        )
        assert named == "Should the banner be <b>blue</b> or green?", named
        box = browser.find_element(By.CSS_SELECTOR, "#reply textarea")
        box.send_keys("blue, please")
        box.find_element(By.XPATH, "./ancestor::form//button").click()
        wait_text(browser, "#transcript", "ANSWER-WEB: the banner is blue now.")
        wait_text(browser, "#head", "done")
        shots(browser, "transcript")
        # The page's answer is written down: a later one (here the CLI's) is refused, with
        # who answered and when.
        book = json.loads((lab.roost_home / "inbox.json").read_text())
        [(entry, done)] = [(k, v) for k, v in book["answered"].items() if v["job"] == job]
        assert done["by"].startswith("roost web (")
        later = lab.roost_ok("answer", entry, "green")
        assert later.startswith(f"already answered by {done['by']} at {done['at']}"), later

        browser.set_window_size(375, 812)  # a phone
        for path in (f"/job/{job}", "/inbox", "/events", "/"):
            load(browser, web.url + path)
            seen = browser.execute_script(WIDTH)
            assert seen["width"] <= 375, f"{path} is {seen['width']}px wide at 375: {seen['over']}"
        shots(browser, "phone")
    assert lab.wait(job) == "done"


def test_answer_a_dialog_from_the_inbox(
    make_lab: Callable[..., Lab], llm: FakeLLM, browser: Any, shots: Callable[[Any, str], None]
) -> None:
    from selenium.webdriver.common.by import By

    lab = make_lab(llm=llm)
    (lab.agent_dir / "extensions").mkdir()
    shutil.copy(FIXTURES / "ask.ts", lab.agent_dir / "extensions" / "ask.ts")
    llm.add(first_user_contains("TASK-DIALOG") & ~last_is_tool_result(), tool_call("ask_colour", {}), times=1)
    llm.add(last_tool_result_contains("picked:"), text("ANSWER-DIALOG: done."))
    with WebServer(lab) as web:
        browser.get(web.first_line)
        job = lab.run_job("--name", "painter", "TASK-DIALOG")
        lab.wait_state(job, "needs_input")
        browser.get(web.url + "/inbox")
        wait_text(browser, "#inbox", "Pick a colour")
        shots(browser, "inbox")
        entry = lab.cli_json("inbox", "--json")[0]
        browser.find_element(By.CSS_SELECTOR, f'#entry-{entry["id"]} button[value="2"]').click()
        assert lab.wait(job) == "done"
        wait_text(browser, "#inbox", "Nothing waits for you.")
        again = lab.roost_ok("answer", entry["id"], "--choice", "1")
        assert again.startswith("already answered by roost web (")
    answered = llm.wait_for_request(last_tool_result_contains("picked:"), timeout=5)
    assert "picked: green" in str(answered["messages"])


def test_raise_a_budget_from_the_browser(
    make_lab: Callable[..., Lab], browser: Any, shots: Callable[[Any, str], None]
) -> None:
    from selenium.webdriver.common.by import By

    lab = make_lab()
    after_raise = last_user_contains("budget was raised") | last_user_contains("limit")
    lab.llm.add(first_user_contains("TASK-TURNS") & after_raise, text("ANSWER-TURNS: finished"))
    lab.llm.add(first_user_contains("TASK-TURNS"), lambda r: tool_call("bash", {"command": "echo step"}))
    with WebServer(lab) as web:
        browser.get(web.first_line)
        job = lab.cli("run", "--max-turns", "2", "--name", "stepper", "TASK-TURNS").stdout.strip()
        record = lab.wait_state(job, "failed", timeout=T)
        assert record["error"] == "turn limit reached: 2 of 2 model requests", record
        browser.get(web.url + "/inbox")
        wait_text(browser, "#inbox", "turn limit reached: 2 of 2 model requests")
        # The inbox is a live part: read again if it was swapped meanwhile (a stale element).
        wait_text(browser, "#inbox .state", "budget")
        browser.get(f"{web.url}/job/{job}")
        turns = browser.find_element(By.CSS_SELECTOR, 'input[name="maxTurns"]')
        turns.send_keys("10")
        turns.find_element(By.XPATH, "./ancestor::form//button").click()
        # The click posts on its own: `roost wait` right away could still find the job failed.
        lab.wait_state(job, "done", timeout=T)
        wait_text(browser, "#head", "at most 10 turns")
        wait_text(browser, "#transcript", "ANSWER-TURNS: finished")
