"""The job page's live text: what the job's pi writes grows on an open page (a `partial`
part of its stream), a page opened mid-stream shows the text so far, and the complete
message replaces it once it is in the session file."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kit.lab import Lab
from kit.procs import wait_until
from kit.webserver import WebServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def web(fake_pi_env: Lab) -> Iterator[WebServer]:
    with WebServer(fake_pi_env) as server:
        yield server


def test_the_text_being_written_grows_on_the_job_page(web: WebServer, fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    job = lab.run_job("[[stream 8 30 web-gate]]")
    wait_until(
        lambda: "w8" in str(lab.request("follow_partials", job=job)["partials"]),
        30,
        "the whole text streamed",
    )
    http = web.paired()
    page = http.get(f"{web.url}/job/{job}").text  # opened mid-stream: the text so far
    assert 'id="partial"' in page and "streamed: w1 w2 w3 w4 w5 w6 w7 w8" in page
    assert "writing…" in page

    parts: list[dict[str, Any]] = []
    first = threading.Event()

    def read() -> None:
        for name, data in web.live(http, f"/live/job/{job}"):
            parts.append({"event": name, **data})
            if "partial" in data:
                first.set()

    threading.Thread(target=read, daemon=True).start()
    wait_until(first.is_set, 30, "the stream's first partial")
    assert "streamed: w1" in next(p for p in parts if "partial" in p)["partial"]
    (lab.work / "web-gate").touch()
    lab.wait_state(job, "done", timeout=30)
    wait_until(
        lambda: any("partial" in p and "writing" not in p["partial"] for p in parts),
        30,
        "the partial cleared",
    )
    wait_until(
        lambda: any("streamed: w1 w2 w3 w4 w5 w6 w7 w8" in p.get("transcript", "") for p in parts),
        30,
        "the complete message in the transcript",
    )
    final = http.get(f"{web.url}/job/{job}").text
    assert "writing…" not in final and final.count("streamed: w1 w2 w3 w4 w5 w6 w7 w8") == 1


def test_agent_text_in_a_partial_is_escaped(web: WebServer, fake_pi_env: Lab) -> None:
    """A partial is rendered by the same escaping templates: never raw HTML."""
    from roost.web.app import fragment

    html = fragment(
        "_partial.html",
        partial={
            "message": {
                "timestamp": 1,
                "content": [
                    {"type": "text", "text": "<script>alert(1)</script>"},
                    {"type": "toolCall", "id": "c", "name": "<b>x</b>", "summary": "<img src=x>"},
                ],
            },
            "tools": [{"id": "c", "name": "bash", "summary": "<i>ls</i>", "started": 0}],
        },
    )
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b>" not in html and "<img" not in html and "<i>" not in html
    assert "running…" in html
