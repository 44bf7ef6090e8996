"""`roost web` in normal use says nothing on stderr but its one "serving" line: no false
"no roostd" while roostd is up (a connection it kept idle was closed by roostd, whose
first frame must come within 30 s), no asyncio or watchdog noise from pages opened and
closed, and Ctrl-C with live pages open ends it at once, exit 0, without a traceback
(real roostd, fake pi, the real `roost web`)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from kit.lab import Lab
from kit.procs import wait_until
from kit.webserver import WebServer

pytestmark = pytest.mark.timeout(180)

ROOSTD_FRAME_TIMEOUT = 30.0
"""roostd closes a connection whose first frame has not come by then (admission.py)."""


@pytest.fixture
def lab(fake_pi_env: Lab) -> Iterator[Lab]:
    yield fake_pi_env


def quiet(stderr: str, web: WebServer) -> bool:
    """Only the serving line."""
    return stderr.strip().splitlines() == [
        f"roost web: serving {web.url} (pair a device with the link above; `roost web pair` prints a new one)"
    ]


def roostd_log(lab: Lab) -> str:
    return (lab.roost_home / "roostd.log").read_text(errors="replace")


def open_live(web: WebServer, http: object, path: str) -> threading.Event:
    """A live stream held open in a thread; set once its first part came."""
    got = threading.Event()

    def hold() -> None:
        try:
            for _ in web.live(http, path):  # type: ignore[arg-type]
                got.set()
        except Exception:  # the server went away: the test looks at its side
            pass

    threading.Thread(target=hold, daemon=True).start()
    return got


def test_no_false_alarm_after_a_long_quiet_spell(lab: Lab) -> None:
    with WebServer(lab) as web:
        http = web.paired()
        assert http.get(web.url + "/").status_code == 200
        # Quiet for longer than roostd gives a connection for its first frame: no job
        # changes, so the live link has nothing to ask. roostd closes no connection of it.
        quiet_until = time.monotonic() + ROOSTD_FRAME_TIMEOUT + 6
        while time.monotonic() < quiet_until:
            assert "a first frame did not arrive" not in roostd_log(lab), roostd_log(lab)
            time.sleep(0.5)
        job = lab.run_job("--shell", "--name", "after-the-quiet", "--", "true")
        wait_until(lambda: job in http.get(web.url + "/").text, 30, "the new job on the page")
        wait_until(lambda: lab.row(job)["state"] == "done", 30, "the job done")
        stderr = web.stop()
    assert quiet(stderr, web), stderr
    assert "a first frame did not arrive" not in roostd_log(lab)


def test_ctrl_c_with_live_pages_open_exits_0_quietly(lab: Lab) -> None:
    job = lab.run_job("--name", "asker", "[[ask]] colours")
    lab.wait_state(job, "needs_input")
    web = WebServer(lab)
    try:
        http = web.paired()
        # Pages opened and closed (a reader that leaves after the first part: its stream
        # waits at a chunk when the page goes), then three left open.
        for _ in range(5):
            with http.stream("GET", f"{web.url}/live/job/{job}") as answer:
                for line in answer.iter_lines():
                    if line.startswith("event:"):
                        break
        lab.reply(job, "[[ask]] again")
        lab.wait_state(job, "needs_input")
        opened = [open_live(web, http, path) for path in (f"/live/job/{job}", "/live/tree", "/live/inbox")]
        for got in opened:
            assert got.wait(30), "a live page's first part"
        started = time.monotonic()
        web.proc.send_signal(signal.SIGINT)
        assert web.proc.wait(30) == 0
        took = time.monotonic() - started
        stderr = web.stop()
    finally:
        web.stop()
    assert quiet(stderr, web), stderr
    assert took < 20, took  # not held until a graceful-shutdown timeout and beyond


def test_watchdogs_emitter_race_is_not_printed(caplog: pytest.LogCaptureFixture) -> None:
    from roost.web.serve import quiet_watchdog

    quiet_watchdog()
    emitter = logging.getLogger("watchdog.observers.inotify")
    with caplog.at_level(logging.ERROR, logger="watchdog.observers.inotify"):
        emitter.error("InotifyEmitter.queue_events() called when the thread is inactive")
        emitter.error("something else")
    assert [r.getMessage() for r in caplog.records] == ["something else"]
