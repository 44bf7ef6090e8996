"""Idle pages cost `roost web` nothing: its CPU time (psutil, the process's own counters) with
the live streams of job pages (done, waiting, failed), the list and the inbox held open and
nothing happening; and such a page still wakes when its session file really grows.

A page that woke on any event of its session file woke on its own read of it (inotify
reports an open and a close without a write too) and spun a core (roost.host.contentwatch)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import psutil
import pytest
from kit.lab import Lab
from kit.procs import wait_until
from kit.webserver import WebServer

pytestmark = pytest.mark.timeout(180)

IDLE_SECONDS = 6.0
IDLE_CPU_LIMIT = 0.3
"""CPU seconds `roost web` may use over IDLE_SECONDS with every stream idle: a page that
reads itself awake uses about a core, 6 s; an idle one a few ms."""


@pytest.fixture
def web(fake_pi_env: Lab) -> Iterator[WebServer]:
    with WebServer(fake_pi_env) as server:
        yield server


class Page:
    """One live stream held open in a thread of its own, its events noted as they come."""

    def __init__(self, web: WebServer, cookies: httpx2.Cookies, path: str) -> None:
        self.events: list[tuple[str, float]] = []
        self._client = httpx2.Client(cookies=cookies)
        self._web, self._path = web, path
        threading.Thread(target=self._read, daemon=True, name=f"page {path}").start()

    def _read(self) -> None:
        try:
            for name, _ in self._web.live(self._client, self._path):
                self.events.append((name, time.monotonic()))
        except (httpx2.HTTPError, RuntimeError):
            pass  # closed at the end of the test

    def close(self) -> None:
        self._client.close()


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def test_idle_pages_cost_nothing_and_a_growing_session_still_wakes_its_page(
    web: WebServer, fake_pi_env: Lab
) -> None:
    lab = fake_pi_env
    done = lab.run_job("--name", "done", "hello")
    waiting = lab.run_job("--name", "waiting", "[[ask]] colours")
    failed = lab.run_job("--shell", "--name", "failed", "--", "sh", "-c", "exit 3")
    assert lab.wait(done) == "done"
    lab.wait_state(waiting, "needs_input")
    lab.wait_state(failed, "failed")
    cookies = web.paired().cookies
    paths = [f"/live/job/{done}", f"/live/job/{waiting}", f"/live/job/{failed}", "/live/tree", "/live/inbox"]
    pages = [Page(web, cookies, path) for path in paths]
    try:
        wait_until(lambda: all(page.events for page in pages), 30, "every page's first part")
        time.sleep(1.0)  # let the first reads settle before the idle window
        before = cpu_seconds(web.proc.pid)
        time.sleep(IDLE_SECONDS)  # the measured idle window itself
        used = cpu_seconds(web.proc.pid) - before
        assert used < IDLE_CPU_LIMIT, f"roost web used {used:.2f} s of CPU in {IDLE_SECONDS} s idle"

        # The done job's page still wakes when its transcript really grows.
        page = pages[0]
        seen = len(page.events)
        append_line(Path(lab.row(done)["session"]), "one more line")
        wait_until(
            lambda: any(name == "append" for name, _ in page.events[seen:]),
            30,
            "the page's append after its session grew",
        )
    finally:
        for page in pages:
            page.close()


def append_line(session: Path, text: str) -> None:
    with open(session, "a", encoding="utf-8") as handle:
        handle.write(
            json.dumps(
                {
                    "type": "message",
                    "timestamp": "2026-12-06T10:00:00Z",
                    "message": {"role": "user", "content": text},
                }
            )
            + "\n"
        )


def test_a_page_closing_leaves_the_other_pages_of_its_folder_awake(web: WebServer, fake_pi_env: Lab) -> None:
    """Two tabs of one job share the watch of its folder: closing one must not end it."""
    lab = fake_pi_env
    job = lab.run_job("--name", "twice", "hello")
    assert lab.wait(job) == "done"
    cookies = web.paired().cookies
    first, second = Page(web, cookies, f"/live/job/{job}"), Page(web, cookies, f"/live/job/{job}")
    try:
        wait_until(lambda: first.events and second.events, 30, "both pages' first part")
        first.close()
        time.sleep(1.0)  # the server has seen the first page go
        seen = len(second.events)
        append_line(Path(lab.row(job)["session"]), "after one tab closed")
        wait_until(
            lambda: any(name == "append" for name, _ in second.events[seen:]), 30, "the open page's append"
        )
    finally:
        second.close()
