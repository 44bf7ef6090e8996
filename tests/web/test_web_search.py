"""The web's search without a browser (Starlette's TestClient, no roostd): the box on every
page, the results page (each result linking to its entry on the job page, a removed job's
without a link, a bad query said on the page), hostile snippets escaped, and the job page's
anchor per entry and its transcript around a linked entry."""

# ruff: noqa: F811  (home and calls: test_web_gate's fixtures, imported)
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_web_gate import JOB, calls, home, make, paired, row  # noqa: F401 (fixtures)

from roost.web import bridge
from roost.wire.protocol import BAD_REQUEST, RequestError

HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)> "payment" & retry'


def result(**over: Any) -> dict[str, Any]:
    snippet = "…fix the " + HOSTILE + " loop…"
    start = snippet.index("retry")
    base = {
        "job": JOB,
        "name": "payer <b>",
        "cwd": "/tmp",
        "removed": False,
        "kind": "assistant",
        "when": "2026-12-04T09:12:44Z",
        "entry": "ab12cd34",
        "score": 3.2,
        "snippet": snippet,
        "marks": [[start, start + 5]],
    }
    return {**base, **over}


@pytest.fixture
def searched(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    async def request(op: str, **args: Any) -> dict[str, Any]:
        if op == "inbox":
            return {"entries": []}
        if op == "search":
            seen.append(args)
            if args["query"] == "AND":
                raise RequestError(BAD_REQUEST, 'bad query: fts5: syntax error near "AND"')
            return {"results": [result(), result(job="deadbeef", name="gone", removed=True, entry="99")]}
        return {"job": row()}

    monkeypatch.setattr(bridge, "request", request)
    return seen


def test_every_page_has_the_search_box(home: Path, searched: list[Any]) -> None:
    with make(home) as client:
        paired(client)
        for path in ("/", "/inbox", "/events", f"/job/{JOB}"):
            page = client.get(path)
            assert page.status_code == 200, path
            assert '<form class="search" action="/search" method="get" role="search">' in page.text


def test_results_link_to_their_entry_and_stay_text(home: Path, searched: list[Any]) -> None:
    with make(home) as client:
        paired(client)
        page = client.get("/search", params={"q": "payment retr*", "kind": "assistant", "all": "1"})
    assert page.status_code == 200
    assert searched == [{"query": "payment retr*", "limit": 50, "all": True, "kinds": ["assistant"]}]
    html = page.text
    assert f'<a href="/job/{JOB}?at=ab12cd34#e-ab12cd34">payer &lt;b&gt;</a>' in html
    assert "<mark>retry</mark>" in html
    assert "<script>alert" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&amp; " in html
    assert 'href="/job/deadbeef' not in html and "removed</span>" in html  # no page to link


def test_a_bad_query_is_said_on_the_page(home: Path, searched: list[Any]) -> None:
    with make(home) as client:
        paired(client)
        page = client.get("/search", params={"q": "AND"})
    assert page.status_code == 200
    assert 'role="alert">bad query: fts5: syntax error near &#34;AND&#34;</p>' in page.text


def test_the_job_page_anchors_each_entry_and_opens_at_a_linked_one(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "session.jsonl"
    lines = [
        {
            "type": "message",
            "id": f"{n:08x}",
            "timestamp": "2026-12-01T10:00:00.000Z",
            "message": {"role": "user", "content": f"entry number {n}"},
        }
        for n in range(2100)
    ]
    session.write_text("".join(json.dumps(line) + "\n" for line in lines))

    async def request(op: str, **args: Any) -> dict[str, Any]:
        if op == "inbox":
            return {"entries": []}
        return {"job": row(session=str(session), state="done", question=None)}

    monkeypatch.setattr(bridge, "request", request)
    with make(home) as client:
        paired(client)
        latest = client.get(f"/job/{JOB}").text
        linked = client.get(f"/job/{JOB}?at={5:08x}").text
    assert f'id="e-{2099:08x}"' in latest and f'id="e-{5:08x}"' not in latest
    assert f'id="e-{5:08x}"' in linked and "entry number 5<" in linked
