"""`roost web` in a real browser (Debian's chromium through selenium), real roostd and the
real pi on the scripted model, for the flows test_web_browser.py leaves: an agent message
arriving live on an open transcript page, framed as from an agent; and a worktree job's
diff rendered and merged from the browser, then a conflicting merge named in the page and
in the inbox.
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kit.browser import click, wait_text
from kit.lab import Lab
from kit.matchers import after_tool, fresh, new_user_has, task
from kit.webserver import WebServer

from roost.fakellm import text, tool_call

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("real_pi")]

T = 90.0  # pi's start-up on a loaded 2-core machine


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_an_agent_message_arrives_live_as_from_an_agent(
    make_lab: Callable[..., Lab], browser: Any, shots: Callable[[Any, str], None]
) -> None:
    from selenium.webdriver.common.by import By

    lab = make_lab()
    llm = lab.llm
    llm.add(fresh("MK-WEBP"), tool_call("roost_spawn", {"task": "MK-WEBK child", "name": "web-kid"}))
    llm.add(after_tool("MK-WEBP", "roost_spawn"), text("spawned"))
    llm.add(
        task("MK-WEBP") & new_user_has("SEND-LIVE"),
        tool_call("roost_send", {"to": "web-kid", "message": "HELLO-LIVE from <b>the parent</b>"}),
    )
    llm.add(after_tool("MK-WEBP", "roost_send"), text("sent"))
    llm.add(task("MK-WEBP"), text("noted"))  # the kid's reports
    llm.add(fresh("MK-WEBK"), text("KID-READY"))
    llm.add(task("MK-WEBK") & new_user_has("HELLO-LIVE"), text("KID-GOT-IT"))

    parent = lab.run("MK-WEBP parent task", name="web-parent")
    with WebServer(lab) as web:
        browser.get(web.first_line)
        kid = lab.wait_tool_results("MK-WEBP", "roost_spawn")[0]["text"].split()[1]
        assert lab.wait(kid, timeout=T) == "done"
        browser.get(f"{web.url}/job/{kid}")
        wait_text(browser, "#transcript", "KID-READY")
        browser.execute_script("window.__same_page = true")  # gone if the page reloads
        assert not browser.find_elements(By.CSS_SELECTOR, "#transcript li.item-agent")

        assert lab.reply(parent, "SEND-LIVE") in ("delivered", "started", "queued")
        wait_text(browser, "#transcript li.item-agent", "HELLO-LIVE", timeout=T)
        wait_text(browser, "#transcript", "KID-GOT-IT", timeout=T)
        assert browser.execute_script("return window.__same_page === true")  # no reload
        [agent] = browser.find_elements(By.CSS_SELECTOR, "#transcript li.item-agent")
        who = agent.find_element(By.CSS_SELECTOR, ".who").text
        # Framed as from its parent agent: a badge and the body, no wire tags, no framing text.
        assert who.startswith("message from web-parent (parent)"), who
        assert agent.find_element(By.CSS_SELECTOR, ".badge").text == "message from web-parent (parent)"
        assert "agent-message" not in agent.text and "another agent session" not in agent.text
        assert "from <b>the parent</b>" in agent.text  # the HTML stays text
        assert not agent.find_elements(By.CSS_SELECTOR, "b")
        users = browser.find_elements(By.CSS_SELECTOR, "#transcript li.item-user")
        assert not [u for u in users if "HELLO-LIVE" in u.text]  # never shown as the user's
        shots(browser, "agent-message")


def edit(line: str, message: str) -> str:
    return f"printf '%s\\n' '{line}' > f.txt && git commit -qam '{message}' && echo committed"


def test_merge_a_worktree_job_and_name_a_conflict(
    make_lab: Callable[..., Lab], browser: Any, shots: Callable[[Any, str], None]
) -> None:
    from selenium.webdriver.common.by import By

    lab = make_lab()
    repo = lab.work / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "test@example.invalid")
    git(repo, "config", "user.name", "roost test")
    (repo / "f.txt").write_text("base\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    llm = lab.llm
    for marker, line in (
        ("MK-WEBA", "from a </pre><script>window.__pwned=1</script>"),
        ("MK-WEBB", "from b"),
    ):
        llm.add(fresh(marker), tool_call("bash", {"command": edit(line, marker)}))
        llm.add(after_tool(marker, "bash"), text(f"{marker} done"))
    first = lab.run_job("--worktree", "--name", "wt-a", "MK-WEBA edit f.txt", cwd=repo)
    second = lab.run_job("--worktree", "--name", "wt-b", "MK-WEBB edit f.txt", cwd=repo)
    assert lab.wait(first, timeout=T) == "done" and lab.wait(second, timeout=T) == "done"

    with WebServer(lab) as web:
        browser.get(web.first_line)
        browser.get(f"{web.url}/job/{first}")
        click(browser, By.LINK_TEXT, "diff and merge")
        wait_text(browser, "pre.diff", "+from a </pre><script>window.__pwned=1</script>")
        added = browser.find_elements(By.CSS_SELECTOR, "pre.diff .d-add")
        assert [a.text for a in added] == ["+from a </pre><script>window.__pwned=1</script>"]
        # One line of the page a line of the diff (no empty line drawn between them).
        boxes = browser.execute_script(
            "return [...document.querySelectorAll('pre.diff span')]"
            ".map(s => [s.getBoundingClientRect().top, s.offsetHeight])"
        )
        steps = {round(b[0] - a[0]) for a, b in itertools.pairwise(boxes)}
        assert len(boxes) == 7 and steps == {round(boxes[0][1])}, boxes
        assert [d.text for d in browser.find_elements(By.CSS_SELECTOR, "pre.diff .d-del")] == ["-base"]
        assert browser.execute_script("return window.__pwned === undefined")
        shots(browser, "diff")
        click(browser, By.XPATH, "//form[contains(@action, '/merge')]//button")
        wait_text(browser, ".notice", "merged into main")
        assert "from a" in (repo / "f.txt").read_text()

        browser.get(f"{web.url}/job/{second}/diff")
        wait_text(browser, "pre.diff", "+from b")
        click(browser, By.XPATH, "//form[contains(@action, '/merge')]//button")
        wait_text(browser, ".notice", "conflicts in f.txt")
        assert "nothing was changed" in browser.find_element(By.CSS_SELECTOR, ".notice").text
        assert "from a" in (repo / "f.txt").read_text()  # untouched
        assert not (repo / ".git" / "MERGE_HEAD").exists()

        browser.get(f"{web.url}/inbox")
        wait_text(browser, "#inbox", "conflicts in f.txt")
        [entry] = [e for e in lab.cli_json("inbox", "--json") if e["kind"] == "conflict"]
        assert entry["job"] == {"id": second, "name": "wt-b"}
        # The inbox is a live part: each read finds the card again if an update swapped it.
        wait_text(browser, f"#entry-{entry['id']} .state", "conflict")
        wait_text(browser, f"#entry-{entry['id']}", "wt-b")
        shots(browser, "conflict")
