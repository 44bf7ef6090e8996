"""Every request to `roost web` passes this gate, in this order (README: roost web, the
threat model; docs/security.md, door 6):

1. the Host header names this server (a DNS-rebinding page's host does not): else 421;
2. security headers on every response, whatever answers it (CSP, nosniff, frame-ancestors,
   no caching, a same-origin referrer, HSTS under TLS);
3. the session cookie names a paired device: else 401, a page that says "not paired" and
   how to pair (whatever came before: a revoked browser is told so). Only `/pair` is
   reached without one. Failures (bad codes, unknown cookies) are counted per client
   address (`RateLimit`): past the limit they are answered late (and a bad code 429), but
   a valid pairing code always pairs: the limit slows a guesser, it never locks out;
4. a state-changing request (anything but GET and HEAD) comes from this origin (Origin, or
   Referer when a browser sends no Origin): else 403. Its per-session CSRF token is checked
   where its form is read (`actions.form_of`); `--read-only` refuses it here.

A pure ASGI middleware: the live pages stream (server-sent events) through it unbuffered.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any

from roost.web.devices import Store

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "roost_web"
"""The session cookie's name (under TLS `__Host-roost_web`: bound to this host and path)."""
PUBLIC_PATHS = frozenset({"/pair"})

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; manifest-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)


def security_headers(tls: bool) -> list[tuple[bytes, bytes]]:
    headers = {
        "content-security-policy": CSP,
        "x-content-type-options": "nosniff",
        "x-frame-options": "DENY",
        # same-origin: our own POSTs carry Referer and Origin; no other site learns a URL.
        "referrer-policy": "same-origin",
        "cache-control": "no-store",
        "cross-origin-opener-policy": "same-origin",
        "cross-origin-resource-policy": "same-origin",
        "permissions-policy": "camera=(), microphone=(), geolocation=()",
    }
    if tls:
        headers["strict-transport-security"] = "max-age=31536000"
    return [(k.encode(), v.encode()) for k, v in headers.items()]


class RateLimit:
    """Failures (bad pairing codes, unknown cookies) counted per client address: past
    `limit` in `window` seconds from one address, or past `total` from all together (far
    above what one person produces), each further failure is answered `penalty` seconds
    late (a bad code with 429). Nothing is refused for it: a valid pairing code always
    pairs, an unknown cookie is always told "not paired". A guess is useless anyway (a
    128-bit code, good for 5 minutes, once; a 256-bit token); the limit keeps a guesser
    slow and cheap to serve without letting anyone lock the owner out."""

    ADDRESSES = 4096
    """The most addresses remembered (the quietest forgotten first): bounded memory."""

    def __init__(
        self, limit: int = 10, window: float = 60.0, total: int = 1000, penalty: float = 1.0
    ) -> None:
        self.limit, self.window, self.total, self.penalty = limit, window, total, penalty
        self._by_address: OrderedDict[str, deque[float]] = OrderedDict()
        self._all: deque[float] = deque()

    def _trim(self, failures: deque[float], now: float) -> deque[float]:
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        return failures

    def blocked(self, address: str) -> bool:
        """Whether failures from `address` are over the limit (or all together are)."""
        now = time.monotonic()
        mine = self._by_address.get(address)
        return len(self._trim(self._all, now)) >= self.total or (
            mine is not None and len(self._trim(mine, now)) >= self.limit
        )

    def fail(self, address: str) -> bool:
        """Count a failure from `address`; whether it is over the limit (answer it late)."""
        over = self.blocked(address)
        now = time.monotonic()
        self._all.append(now)
        if len(self._all) > self.total * 2:  # a flood: only the last window's count matters
            self._all.popleft()
        mine = self._by_address.pop(address, None) or deque()
        mine.append(now)
        if len(mine) > self.limit * 2:
            mine.popleft()
        self._by_address[address] = mine  # the newest last: the quietest go first
        while len(self._by_address) > self.ADDRESSES:
            self._by_address.popitem(last=False)
        return over


@dataclass
class Settings:
    """What the gate checks against."""

    hosts: frozenset[str]
    """Accepted Host header values, with the port (`127.0.0.1:8477`, `localhost:8477`)."""
    tls: bool = False
    read_only: bool = False
    store: Store = field(default_factory=Store)
    limit: RateLimit = field(default_factory=RateLimit)

    @property
    def cookie_name(self) -> str:
        return f"__Host-{COOKIE}" if self.tls else COOKIE

    def origins(self, host: str) -> set[str]:
        return {f"{'https' if self.tls else 'http'}://{host}"}


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return str(value.decode("latin-1"))
    return None


def cookie_of(scope: Scope, name: str) -> str | None:
    raw = header(scope, b"cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is no session
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def client_address(scope: Scope) -> str:
    """The peer's address (not a header: uvicorn's proxy headers are off)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


async def plain(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


NOT_PAIRED = (
    "roost web: this browser is not paired. Run `roost web pair` on the machine "
    "roost runs on and open the link it prints.\n"
)
TOO_MANY = (
    "roost web: this pairing link is unknown, used or expired, and too many failed "
    "attempts came from your address; run `roost web pair` for a new link (a valid "
    "one works at once)\n"
)


class Guard:
    """The gate as ASGI middleware around the app (see the module doc)."""

    def __init__(self, app: App, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.headers = security_headers(settings.tls)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = self.headers

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        refusal = self.refusal(scope)
        if refusal is not None:
            if refusal[2]:  # over the failure limit: answered late, never refused for it
                await asyncio.sleep(self.settings.limit.penalty)
            await plain(send, refusal[0], refusal[1], extra)
            return
        await self.app(scope, receive, send_with_headers)

    def refusal(self, scope: Scope) -> tuple[int, str, bool] | None:
        """Why this request is refused, as (status, text, late: over the failure limit);
        None when it may pass."""
        s = self.settings
        host = header(scope, b"host")
        if host is None or host.lower() not in s.hosts:
            return 421, "roost web: unknown Host header (this server answers only its own names)\n", False
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if path in PUBLIC_PATHS:
            return None  # its code is checked first, whatever the counts (app.pair)
        token = cookie_of(scope, s.cookie_name)
        device = s.store.device_of(token) if token else None
        if device is None:
            late = bool(token) and s.limit.fail(client_address(scope))
            return 401, NOT_PAIRED, late
        scope.setdefault("state", {}).update(device=device, token=token)
        if method not in ("GET", "HEAD"):
            if s.read_only:
                return 403, "roost web: this server is read-only (--read-only)\n", False
            if not self.same_origin(scope, host):
                return 403, "roost web: refused a request from another origin\n", False
        return None

    def same_origin(self, scope: Scope, host: str) -> bool:
        origins = self.settings.origins(host.lower())
        origin = header(scope, b"origin")
        if origin is not None:
            return origin in origins
        referer = header(scope, b"referer")
        return referer is not None and any(referer.startswith(o + "/") for o in origins)
