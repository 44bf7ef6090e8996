"""`roost web`'s actions: each a plain form POST, its form read by `form_of` (a bounded body,
its per-session CSRF token matched; the gate checked its origin before), then roostd's
request made and the browser sent to the page the action names (303); refused, back to its
page with roostd's one line as the page's notice. roost.web.app routes them."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from roost.web import bridge
from roost.web import pageparts as views
from roost.web.devices import csrf_token
from roost.wire.client import DaemonUnavailable
from roost.wire.protocol import RequestError

FORM_MAX = 256 * 1024
"""The largest form body read (a reply or a task)."""


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


# -- the actions ------------------------------------------------------------------------------------
def _job(request: Request) -> str:
    return str(request.path_params["job"])


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
