"""The job list's pages and the steps around a job's life that need a page of their own:
the list (`/`: grouped by folder, filtered by `?state=` and `?q=`, no script needed), a new
job's form (`/new`: the last directory first), Remove's confirmation (`/job/ID/rm`), and
the nav's count of what waits in the inbox (`counted`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response

from roost.web import bridge
from roost.web import pageparts as views
from roost.web.pagerender import render
from roost.wire.client import DaemonUnavailable
from roost.wire.protocol import RequestError

Page = Callable[[Request], Awaitable[Response]]
_COUNT: dict[str, Any] = {"version": None, "count": 0}


async def inbox_count(hub: bridge.Hub) -> int:
    """How many inbox entries wait (the nav's count): asked of roostd once per change of
    the jobs (`hub.version`), not once per page."""
    if _COUNT["version"] != (id(hub), hub.version) or not hub.connected:
        try:
            _COUNT["count"] = len((await bridge.request("inbox")).get("entries") or [])
            _COUNT["version"] = (id(hub), hub.version)
        except (DaemonUnavailable, RequestError, OSError):
            return int(_COUNT["count"])
    return int(_COUNT["count"])


def counted(page: Page) -> Page:
    """A page whose nav shows the inbox count."""

    async def endpoint(request: Request) -> Response:
        request.scope.setdefault("state", {})["waiting"] = await inbox_count(request.app.state.hub)
        return await page(request)

    return endpoint


def list_filter(request: Request) -> tuple[str, str]:
    state = request.query_params.get("state", "")
    return (state if state in views.STATE_FILTERS else ""), request.query_params.get("q", "")[:200]


async def tree_page(request: Request) -> Response:
    hub: bridge.Hub = request.app.state.hub
    rows, connected = hub.rows, hub.connected
    if not connected:  # the live link is (re)connecting: ask roostd itself
        try:
            rows = {r["id"]: r for r in (await bridge.request("list"))["jobs"]}
            connected = True
        except (DaemonUnavailable, RequestError, OSError):
            pass
    state, text = list_filter(request)
    query = "?" + urlencode({"state": state, "q": text}) if state or text else ""
    return render(
        request,
        "tree.html",
        groups=views.job_list(rows, state, text),
        connected=connected,
        notice=request.query_params.get("notice", ""),
        states=list(views.STATE_FILTERS),
        state=state,
        q=text,
        query=query,
        filtered=bool(state or text),
    )


async def new_page(request: Request) -> Response:
    hub: bridge.Hub = request.app.state.hub
    return render(
        request,
        "new.html",
        dirs=views.known_dirs(hub.rows)[:50],
        notice=request.query_params.get("notice", ""),
    )


async def remove_page(request: Request) -> Response:
    """Remove's confirmation: a page of its own (no script); the POST from its form removes."""
    try:
        row = (await bridge.request("show", job=request.path_params["job"]))["job"]
    except RequestError:
        return render(request, "missing.html", status=404)
    return render(request, "remove.html", row=row)


async def do_rm(request: Request, form: dict[str, str]) -> str:
    job = str(request.path_params["job"])
    if form.get("confirm") != "yes":  # only the confirmation page's form removes
        return f"/job/{quote(job)}/rm"
    row = (await bridge.request("show", job=job))["job"]
    await bridge.request("rm", job=row["id"])
    return "/?notice=" + quote(f"removed {row.get('name') or row['id']} ({row['id']})")
