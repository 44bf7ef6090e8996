"""`roost web`'s pages and actions (Starlette), behind the gate of roost.web.guard.

Pages are rendered on the server (Jinja2, autoescape on for every template: agent-written
text is always escaped). A live page holds one server-sent-events stream that sends the
page's changed parts, rendered by the same templates, when roostd pushes a change (or, on a
job page, when its session file grows); app.js swaps them in. Every action is a plain form
POST, checked by `form_of` (the per-session CSRF token) after the gate checked its origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from roost.pi.transcript import read_entries
from roost.tasks import first_of
from roost.web import bridge, jobpages, searchpage
from roost.web import pageparts as views
from roost.web.devices import csrf_token
from roost.web.entries import items, window
from roost.web.filewatch import Watcher
from roost.web.guard import TOO_MANY, Guard, Settings, client_address
from roost.web.pagerender import ENV as ENV
from roost.web.pagerender import fragment, render
from roost.wire.client import DaemonUnavailable
from roost.wire.protocol import RequestError

HERE = Path(__file__).resolve().parent
FORM_MAX = 256 * 1024
"""The largest form body read (a reply or a task)."""
TRANSCRIPT_PAGE = 2000
"""A job page shows the last this many transcript items (the rest: `roost logs`)."""


class Refused(Exception):
    """An action refused before it reached roostd (a bad form, a missing CSRF token)."""


async def form_of(request: Request) -> dict[str, str]:
    """The POSTed form, once its per-session CSRF token matched (else Refused)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_MAX:
            raise Refused("the form is too large")
    try:
        pairs = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError):
        raise Refused("the form could not be read") from None
    form = {k: v[-1] for k, v in pairs.items()}
    token = (request.scope.get("state") or {}).get("token") or ""
    if not token or not hmac.compare_digest(form.get("csrf", ""), csrf_token(token)):
        raise Refused("the form's CSRF token is missing or wrong: reload the page")
    return form


Action = Callable[[Request, dict[str, str]], Awaitable[str]]


def action(handler: Action, page: str = "job") -> Callable[[Request], Awaitable[Response]]:
    """A POST: the form checked, the handler's roostd request made, then to the page it
    names (303); refused, back to its `page` (the job's, its diff's, the inbox, the tree)
    with roostd's one line as the page's notice."""

    def back_of(request: Request) -> str:
        job = request.path_params.get("job")
        if page == "diff" and job:
            return f"/job/{quote(str(job))}/diff"
        if page == "job" and job:
            return f"/job/{quote(str(job))}"
        return "/inbox" if page == "inbox" else "/"

    async def endpoint(request: Request) -> Response:
        try:
            form = await form_of(request)
        except Refused as exc:
            return PlainTextResponse(f"roost web: {exc}\n", status_code=403)
        back = back_of(request)
        try:
            back = await handler(request, form)
            notice = ""
        except RequestError as exc:
            notice = exc.message
        except DaemonUnavailable as exc:
            notice = f"roostd is not answering: {exc}"
        except ValueError as exc:
            notice = str(exc)
        target, _, anchor = back.partition("#")
        if notice:
            target += ("&" if "?" in target else "?") + "notice=" + quote(notice[:300])
        elif anchor:
            target += "#" + anchor
        return RedirectResponse(target, status_code=303)

    return endpoint


# -- pages ------------------------------------------------------------------------------------------
async def _job_row(request: Request) -> dict[str, Any] | None:
    try:
        return (await bridge.request("show", job=request.path_params["job"]))["job"]
    except RequestError:
        return None


def _transcript(row: dict[str, Any], at: str | None = None) -> list[Any]:
    session = row.get("session")
    if row.get("kind") != "pi" or not session:
        return []
    return window(items(read_entries(session)), TRANSCRIPT_PAGE, at)  # at: a search's entry


async def job_page(request: Request) -> Response:
    row = await _job_row(request)
    if row is None:
        return render(request, "missing.html", status=404)
    entries = await asyncio.to_thread(_transcript, row, request.query_params.get("at"))
    hub: bridge.Hub = request.app.state.hub
    return render(
        request,
        "job.html",
        row=row,
        items=entries,
        partial=hub.partials.get(row["id"]),
        notice=request.query_params.get("notice", ""),
    )


async def inbox_page(request: Request) -> Response:
    entries = (await bridge.request("inbox"))["entries"]
    return render(request, "inbox.html", entries=entries, notice=request.query_params.get("notice", ""))


async def live_inbox(request: Request) -> Response:
    hub: bridge.Hub = request.app.state.hub
    token = (request.scope.get("state") or {}).get("token") or ""
    forms = {"csrf": csrf_token(token) if token else "", "read_only": request.app.state.read_only}

    async def body() -> AsyncIterator[bytes]:
        seen = hub.version
        yield b": live\n\n"
        while True:  # the first round: what changed between the page and this stream
            entries = (await bridge.request("inbox"))["entries"]
            yield sse(
                "parts",
                {
                    "inbox": fragment("_inbox.html", entries=entries, **forms),
                    "navcount": fragment("_navcount.html", waiting=len(entries)),
                },
            )
            seen = await hub.changed(seen)

    return stream(body())


async def do_answer(request: Request, form: dict[str, str]) -> str:
    device = (request.scope.get("state") or {}).get("device")
    args: dict[str, Any] = {
        "entry": request.path_params["entry"],
        "by": f"roost web ({device.name if device else 'a browser'})",
    }
    if form.get("choice", "").isdigit():
        args["choice"] = int(form["choice"])
    elif form.get("dismiss"):
        args["dismiss"] = True
    else:
        if not form.get("text", "").strip():
            raise ValueError("the answer is empty")
        args["text"] = form["text"]
    result = await bridge.request("answer", **args)
    if result.get("status") == "already answered":
        raise ValueError(f"already answered by {result.get('by')} at {result.get('at')}")
    return "/inbox"


async def do_decide(request: Request, form: dict[str, str]) -> str:
    """An approval's answer (docs/guides/approvals.md): `decision` approve, always or deny
    (`reason`); from the inbox, or from a job's page, which names the call it showed (its
    `summary`): the job's pending entry of that call is answered, once."""
    decision = form.get("decision", "")
    if decision not in ("approve", "always", "deny"):
        raise ValueError("approve or deny")
    entry, back = request.path_params.get("entry"), "/inbox"
    if entry is None:
        job, back = _job(request), f"/job/{_job(request)}"
        asked = [
            e
            for e in (await bridge.request("inbox"))["entries"]
            if e["kind"] == "approval" and e["job"]["id"] == job and e["text"] == form.get("summary")
        ]
        if not asked:
            raise ValueError("it no longer waits for that call's approval")
        entry = asked[0]["id"]
    result = await bridge.request(
        "approval_answer",
        entry=entry,
        decision="deny" if decision == "deny" else "approve",
        always=decision == "always",
        reason=form.get("reason") or None,
        by="web",
    )
    if result.get("status") == "already answered":
        raise ValueError(
            f"already answered ({result.get('decision')}) by {result.get('by')} at {result.get('at')}"
        )
    return back


async def diff_page(request: Request) -> Response:
    row = await _job_row(request)
    if row is None:
        return render(request, "missing.html", status=404)
    text, why = await asyncio.to_thread(views.job_diff, row)
    merged = await asyncio.to_thread(views.merge_state, row)
    return render(
        request,
        "diff.html",
        row=row,
        lines=views.diff_lines(text),
        why=why,
        merged=merged,
        notice=request.query_params.get("notice", ""),
    )


async def events_page(request: Request) -> Response:
    query = request.query_params
    types = tuple(t for t in query.get("type", "").split(",") if t.strip())
    job = query.get("job", "").strip() or None
    found = await asyncio.to_thread(views.recent_events, types, job)
    return render(request, "events.html", events=found, type=",".join(types), job=job or "")


async def pair(request: Request) -> Response:
    """The one page without a session: a pairing code buys this browser its cookie."""
    settings: Settings = request.app.state.settings
    code = request.query_params.get("code", "")
    # A valid code pairs whatever came before it: a flood of bad ones (from anywhere, this
    # address too) only makes the bad ones slow (guard.RateLimit), never locks the owner out.
    if not code or not settings.store.spend_code(code):
        if settings.limit.fail(client_address(request.scope)):
            await asyncio.sleep(settings.limit.penalty)
            return PlainTextResponse(TOO_MANY, status_code=429)
        return PlainTextResponse(
            "roost web: this pairing link is unknown, used or expired; run `roost web pair` for a new one\n",
            status_code=403,
        )
    agent = request.headers.get("user-agent", "browser")
    device, token = settings.store.add_device(views.device_name(agent))
    # The code is spent; the next URL holds no secret (the redirect drops the query).
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        settings.cookie_name,
        token,
        max_age=400 * 86400,
        httponly=True,
        samesite="strict",
        secure=settings.tls,
        path="/",
    )
    return response


# -- live -------------------------------------------------------------------------------------------
def sse(name: str, data: dict[str, str]) -> bytes:
    lines = json.dumps(data).splitlines() or [""]
    return (f"event: {name}\n" + "".join(f"data: {line}\n" for line in lines) + "\n").encode()


class LiveStream(StreamingResponse):
    """A live page's stream. It ends, its response complete, when the server stops
    (`Hub.close`): Ctrl-C with pages open leaves uvicorn no request to cancel. Its body is
    closed when it ends however it ends (a page closed between two chunks left it waiting
    at a `yield`, closed later by the collector or at exit, with a trace)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        hub: bridge.Hub = scope["app"].state.hub
        body = self.body_iterator
        sent = {"started": False, "complete": False}

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                sent["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                sent["complete"] = True
            await send(message)

        try:
            with anyio.CancelScope() as stopping:
                closing = asyncio.ensure_future(hub.closing.wait())
                closing.add_done_callback(lambda f: None if f.cancelled() else stopping.cancel())
                try:
                    await super().__call__(scope, receive, sending)
                finally:
                    closing.cancel()
            if stopping.cancelled_caught and sent["started"] and not sent["complete"]:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if isinstance(body, AsyncGenerator):
                await body.aclose()


def stream(body: AsyncIterator[bytes]) -> StreamingResponse:
    return LiveStream(body, media_type="text/event-stream", headers={"x-accel-buffering": "no"})


async def live_tree(request: Request) -> Response:
    hub: bridge.Hub = request.app.state.hub
    state, text = jobpages.list_filter(request)

    async def body() -> AsyncIterator[bytes]:
        seen = hub.version
        yield b": live\n\n"
        while True:  # the first round: what changed between the page and this stream
            waiting = await jobpages.inbox_count(hub)
            yield sse(
                "parts",
                {
                    "tree": fragment(
                        "_tree.html",
                        groups=views.job_list(hub.rows, state, text),
                        connected=hub.connected,
                        filtered=bool(state or text),
                    ),
                    "navcount": fragment("_navcount.html", waiting=waiting),
                },
            )
            seen = await hub.changed(seen)

    return stream(body())


async def live_job(request: Request) -> Response:
    hub: bridge.Hub = request.app.state.hub
    watcher: Watcher = request.app.state.watcher
    try:
        shown = max(0, int(request.query_params.get("items", "0")))
    except ValueError:
        shown = 0

    token = (request.scope.get("state") or {}).get("token") or ""
    forms = {"csrf": csrf_token(token) if token else "", "read_only": request.app.state.read_only}

    async def body() -> AsyncIterator[bytes]:
        nonlocal shown
        row = await _job_row(request)
        if row is None:
            return
        seen, last = hub.version, hub.rows.get(row["id"])
        yield b": live\n\n"
        # What changed between the page and this stream.
        yield sse("parts", {"head": fragment("_head.html", row=row, **forms)})
        read = True
        streamed: Any = False  # the partial shown (hub.partials: the live text), None: none
        while True:  # once per session file (a new job's appears after its page opened)
            session = row.get("session") or ""
            with watcher.watch(session) as grew:
                while session == (row.get("session") or ""):
                    if read:  # the file grew, or the job moved: only then is it read again
                        entries = await asyncio.to_thread(_transcript, row)
                        if len(entries) != shown:
                            new = entries[shown:] if len(entries) > shown else entries
                            yield sse(
                                "append" if len(entries) > shown else "reset",
                                {"transcript": fragment("_items.html", items=new)},
                            )
                            shown = len(entries)
                    if hub.partials.get(row["id"]) is not streamed:  # what pi writes now
                        streamed = hub.partials.get(row["id"])
                        yield sse("parts", {"partial": fragment("_partial.html", partial=streamed)})
                    await first_of(hub.changed(seen), grew.wait(), hub.partial_changed(row["id"]))
                    read = grew.is_set()
                    grew.clear()
                    if hub.version == seen:
                        continue
                    seen = hub.version
                    fresh = hub.rows.get(row["id"])
                    if fresh is None:
                        yield sse("parts", {"head": fragment("_gone.html")})
                        return
                    if fresh != last:  # another job's change leaves this page alone
                        last, row, read = fresh, {**row, **fresh}, True
                        yield sse("parts", {"head": fragment("_head.html", row=row, **forms)})

    return stream(body())


# -- actions ----------------------------------------------------------------------------------------
def _job(request: Request) -> str:
    return str(request.path_params["job"])


def _answering(request: Request, form: dict[str, str]) -> dict[str, Any]:
    """Who answers, and the question the page showed (its head's hidden `question`, kept
    live): roostd delivers an answer to it once and says who answered it first."""
    device = (request.scope.get("state") or {}).get("device")
    args: dict[str, Any] = {"by": f"roost web ({device.name if device else 'a browser'})"}
    if form.get("question"):
        args["question"] = form["question"]
    return args


async def _reply(request: Request, **args: Any) -> str:
    result = await bridge.request("reply", job=_job(request), cause="reply", **args)
    if result.get("status") == "already answered":
        raise ValueError(f"already answered by {result.get('by')} at {result.get('at')}")
    return f"/job/{_job(request)}"


async def do_reply(request: Request, form: dict[str, str]) -> str:
    text = form.get("text", "")
    if not text.strip():
        raise ValueError("the reply is empty")
    return await _reply(request, text=text, **_answering(request, form)) + "#latest"


async def do_choice(request: Request, form: dict[str, str]) -> str:
    choice = form.get("choice", "")
    if not choice.isdigit():
        raise ValueError("no choice was picked")
    # roostd maps the choice to the dialog's answer (a confirm's yes or no, a select's
    # number), as for `roost answer --choice`.
    return await _reply(request, choice=int(choice), **_answering(request, form))


def simple(op: str, after: str = "job") -> Action:
    async def handler(request: Request, form: dict[str, str]) -> str:
        await bridge.request(op, job=_job(request))
        return "/" if after == "tree" else f"/job/{_job(request)}"

    return handler


async def do_run(request: Request, form: dict[str, str]) -> str:
    args = views.run_args(form)
    result = await bridge.request("run", **args)
    return f"/job/{result['id']}"


async def do_merge(request: Request, form: dict[str, str]) -> str:
    result = await bridge.request("merge", job=_job(request))
    done = (
        f"{result['branch']} merged into {result['into']} ({str(result['commit'])[:12]})"
        if result.get("merged")
        else f"{result['branch']}: {result['outcome']} ({result['into']})"
    )
    return f"/job/{_job(request)}/diff?notice=" + quote(done)


async def do_budget(request: Request, form: dict[str, str]) -> str:
    await bridge.request("budget", job=_job(request), **views.budget_args(form))
    return "/inbox" if form.get("back") == "inbox" else f"/job/{_job(request)}"


# -- the app ----------------------------------------------------------------------------------------
def create_app(settings: Settings, hub: bridge.Hub | None = None) -> Guard:
    hub = hub or bridge.Hub()
    watcher = Watcher()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        hub.start()
        try:
            yield
        finally:
            hub.stop()
            watcher.stop()

    routes = [
        Route("/", jobpages.counted(jobpages.tree_page)),
        Route("/pair", pair),
        Route("/job/{job}", jobpages.counted(job_page)),
        Route("/job/{job}/diff", jobpages.counted(diff_page)),
        Route("/events", jobpages.counted(events_page)),
        Route("/search", jobpages.counted(searchpage.search_page)),
        Route("/job/{job}/merge", action(do_merge, "diff"), methods=["POST"]),
        Route("/inbox", jobpages.counted(inbox_page)),
        Route("/live/tree", live_tree),
        Route("/live/inbox", live_inbox),
        Route("/inbox/{entry}/answer", action(do_answer, "inbox"), methods=["POST"]),
        Route("/inbox/{entry}/decide", action(do_decide, "inbox"), methods=["POST"]),
        Route("/job/{job}/decide", action(do_decide), methods=["POST"]),
        Route("/live/job/{job}", live_job),
        Route("/run", action(do_run, "tree"), methods=["POST"]),
        Route("/job/{job}/reply", action(do_reply), methods=["POST"]),
        Route("/job/{job}/choice", action(do_choice), methods=["POST"]),
        Route("/job/{job}/stop", action(simple("stop")), methods=["POST"]),
        Route("/job/{job}/start", action(simple("start")), methods=["POST"]),
        Route("/job/{job}/rm", jobpages.counted(jobpages.remove_page)),
        Route("/job/{job}/rm", action(jobpages.do_rm), methods=["POST"]),
        Route("/new", jobpages.counted(jobpages.new_page)),
        Route("/job/{job}/budget", action(do_budget), methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def roostd_away(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(
            f"roost web: roostd is not answering ({exc}); it is started "
            "by any roost command, or by your service manager\n",
            status_code=503,
        )

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={DaemonUnavailable: roostd_away, ConnectionError: roostd_away},
    )
    app.state.hub, app.state.watcher = hub, watcher
    app.state.settings, app.state.read_only = settings, settings.read_only
    return Guard(app, settings)
