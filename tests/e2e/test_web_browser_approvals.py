"""Approvals in a real browser (Debian's chromium through selenium), real roostd and the real
pi on the scripted model: a bash call held for approval shows on the job's page (live, no
reload) and in the inbox with its whole input, escaped; Approve on the job page runs it once,
Deny with a reason from the inbox reaches the model, and a later answer of the same entry is
refused with who answered it (the forms carry the CSRF token, the browser is paired)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kit.browser import click, wait_text
from kit.lab import Lab
from kit.matchers import after_tool, fresh
from kit.webserver import WebServer

from roost.fakellm import text, tool_call

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("real_pi")]

T = 90.0


def test_approve_on_the_job_page_and_deny_from_the_inbox(
    make_lab: Callable[..., Lab], browser: Any, shots: Callable[[Any, str], None], tmp_path: Path
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    lab = make_lab()
    marker = tmp_path / "ran.txt"
    first = f"echo web >> {marker}"
    second = "rm -rf build <b>x</b> \x1b[2J"
    lab.llm.add(fresh("MK-WEBAP"), tool_call("bash", {"command": first}))
    lab.llm.add(after_tool("MK-WEBAP", "bash"), tool_call("bash", {"command": second}), times=1)
    lab.llm.add(after_tool("MK-WEBAP", "bash"), text("WEB-AP-DONE"))
    job = lab.run_job("--approvals", "ask", "--name", "web-ap", "MK-WEBAP go", cwd=tmp_path)
    with WebServer(lab) as web:
        browser.get(web.first_line)
        browser.get(f"{web.url}/job/{job}")
        wait_text(browser, "#approval", f"approve bash: {first}", timeout=T)
        shots(browser, "approval-job")
        click(browser, By.CSS_SELECTOR, "#approval button[value=approve]")
        wait_text(browser, "#transcript", "web", timeout=T)
        lab.wait_state(job, "needs_input")
        browser.get(f"{web.url}/inbox")
        wait_text(browser, ".kind-approval", "rm -rf build", timeout=T)
        seen: dict[str, str] = {}

        def deny_with_a_reason(driver: Any) -> bool:
            # The inbox's live part may swap the entry at any moment (its first round comes
            # after the page): read, type and press on one copy of it, else start again.
            entry = driver.find_element(By.CSS_SELECTOR, ".kind-approval")
            seen["shown"] = entry.find_element(By.CSS_SELECTOR, "pre.approval-input").text
            seen["bold"] = str(len(entry.find_elements(By.CSS_SELECTOR, "b")))
            seen["id"] = entry.get_attribute("id").removeprefix("entry-")
            entry.find_element(By.CSS_SELECTOR, "input[name=reason]").send_keys("not from the phone")
            if not seen.get("shot"):
                shots(driver, "approval-inbox")
                seen["shot"] = "yes"
            entry.find_element(By.CSS_SELECTOR, "button[value=deny]").click()
            return True

        WebDriverWait(browser, T, ignored_exceptions=(StaleElementReferenceException,)).until(
            deny_with_a_reason, "the approval denied from the inbox"
        )
        assert "<b>x</b>" in seen["shown"] and "\\u001b[2J" in seen["shown"]  # text, escaped
        assert seen["bold"] == "0"
        entry_id = seen["id"]
        assert lab.wait(job, T) == "done"
    assert marker.read_text() == "web\n"
    results = json.dumps(lab.tool_results_of("MK-WEBAP", "bash"))
    assert "not from the phone" in results
    again = lab.roost("deny", entry_id)
    assert again.returncode == 1 and "denied by web" in again.stderr
