"""The web's search (`/search?q=...`): roostd's `search` op, its rows as a page of results,
each linking to its entry on the job's page (`/job/ID?at=ENTRY#e-ENTRY`: the transcript
around that entry). Every snippet is agent-, model- or user-written: it reaches the page
only through Jinja's autoescape, its matches as <mark> around escaped text."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response

from roost.web import bridge
from roost.web.pagerender import render
from roost.wire.protocol import RequestError

KINDS = ("user", "answer", "assistant", "tool", "message", "report", "result")
LIMIT = 50


def segments(row: dict[str, Any]) -> list[tuple[str, bool]]:
    """A row's snippet as (text, marked) pieces, for the template to escape and mark."""
    text, at = str(row.get("snippet") or ""), 0
    pieces: list[tuple[str, bool]] = []
    for start, end in row.get("marks") or []:
        pieces += [(text[at:start], False), (text[start:end], True)]
        at = end
    pieces.append((text[at:], False))
    return [(piece, marked) for piece, marked in pieces if piece]


def link(row: dict[str, Any]) -> str | None:
    """The entry on its job's page; None for a removed job (no page)."""
    if row.get("removed"):
        return None
    target = f"/job/{quote(str(row['job']))}"
    entry = row.get("entry")
    return f"{target}?at={quote(str(entry))}#e-{quote(str(entry))}" if entry else target


async def search_page(request: Request) -> Response:
    params = request.query_params
    query = params.get("q", "")[:500].strip()
    kind = params.get("kind", "")
    everything = params.get("all") == "1"
    results: list[dict[str, Any]] = []
    error = ""
    if query:
        args: dict[str, Any] = {"query": query, "limit": LIMIT, "all": everything}
        if kind in KINDS:
            args["kinds"] = [kind]
        try:
            results = (await bridge.request("search", **args))["results"]
        except RequestError as exc:
            error = exc.message
    rows = [{**row, "segments": segments(row), "link": link(row)} for row in results]
    return render(
        request,
        "search.html",
        q=query,
        kind=kind if kind in KINDS else "",
        kinds=KINDS,
        everything=everything,
        results=rows,
        error=error,
    )
