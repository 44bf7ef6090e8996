"""The web's templates (Jinja2) and the two ways a handler renders one: a whole page
(`render`, with what every page shows: the CSRF token, the nav's waiting count and active
page) or a live part (`fragment`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from roost.web import mdrender
from roost.web import pageparts as views
from roost.web.devices import csrf_token

HERE = Path(__file__).resolve().parent

ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True
)
"""autoescape=True for every template, whatever its name: nothing agent-written is raw."""
ENV.filters["money"] = views.money
ENV.filters["state"] = views.state_text  # `reaped` shown as `idle`, as everywhere
ENV.filters["md"] = mdrender.render  # agent-written Markdown: raw HTML off, links checked
ENV.filters["badges"] = views.badges
ENV.filters["plain"] = views.plain  # an event's value as text (never Python's repr)


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    state = request.scope.get("state") or {}
    token = state.get("token")
    context.setdefault("waiting", (request.scope.get("state") or {}).get("waiting", 0))
    html = ENV.get_template(template).render(
        csrf=csrf_token(token) if token else "",
        read_only=request.app.state.read_only,
        device=state.get("device"),
        path=request.url.path,
        **context,
    )
    return HTMLResponse(html, status_code=status)


def fragment(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)
