"""`roost mcp --http`: the MCP server over streamable HTTP, for a client that cannot start
a process (docs/guides/mcp.md, docs/security.md).

- It listens on loopback (127.0.0.1) unless told otherwise; any other address is refused
  without TLS (--tls-cert/--tls-key): the bearer token would cross the network in clear.
- Every request carries `Authorization: Bearer TOKEN`, TOKEN the content of a file of the
  user's alone (mode 0600: `$ROOST_HOME/mcp-token` by default, made on first use, kept
  across runs so a client's configuration stays valid; --token-file names another).
  Anything else is answered 401 before the MCP app sees it.
- The Host header must name this server (the SDK's DNS-rebinding protection).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import os
import secrets
import stat
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from roost.errors import RoostError
from roost.host import paths

DEFAULT_PORT = 8478
PATH = "/mcp"

Scope = MutableMapping[str, Any]
App = Callable[[Scope, Any, Any], Awaitable[None]]


class Refused(RoostError):
    """Options `roost mcp --http` will not run with (one line says why)."""


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check(bind: str, tls_cert: str | None, tls_key: str | None) -> bool:
    """Refused unless the options are safe; whether TLS is on."""
    if bool(tls_cert) != bool(tls_key):
        raise Refused("--tls-cert and --tls-key go together")
    if not is_loopback(bind) and not tls_cert:
        raise Refused(
            f"binding to {bind} (not loopback) needs TLS (--tls-cert F --tls-key F): "
            "the bearer token would cross the network in clear"
        )
    return bool(tls_cert)


def token_file(given: str | None) -> Path:
    return Path(given) if given else paths.roost_home() / "mcp-token"


def load_token(path: Path, create: bool) -> str:
    """The token in `path`: a regular file of the user's that no one else may read or
    write (0600); made (0600, 256 random bits) when missing and `create`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            raise Refused(f"no token file {path}") from None
        paths.ensure_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")
        return load_token(path, False)
    except OSError as exc:
        raise Refused(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "r", encoding="utf-8") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise Refused(f"the token file {path} is not a regular file of yours")
        if st.st_mode & 0o077:
            raise Refused(
                f"the token file {path} may be read or written by others "
                f"(mode {stat.S_IMODE(st.st_mode):o}): chmod 600 {path}"
            )
        token = handle.read(4096).strip()
    if len(token) < 16:
        raise Refused(f"the token in {path} is too short (16 characters at least)")
    return token


class Bearer:
    """ASGI middleware: an HTTP request without `Authorization: Bearer TOKEN` gets 401."""

    def __init__(self, app: App, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope.get("headers") or () if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self.expected):
                body = b"roost mcp: a bearer token is needed (Authorization: Bearer TOKEN)\n"
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"www-authenticate", b'Bearer realm="roost mcp"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def allowed_hosts(bind: str, port: int) -> list[str]:
    names = {bind} | ({"127.0.0.1", "localhost", "[::1]"} if is_loopback(bind) else set())
    return sorted(f"[{n}]:{port}" if ":" in n and not n.startswith("[") else f"{n}:{port}" for n in names)


def serve(
    server: Any, bind: str, port: int, token_path: Path, tls_cert: str | None, tls_key: str | None
) -> None:
    """Serve `server` (an MCPServer) until SIGINT or SIGTERM; the URL on stdout once it
    listens, where the token is on stderr."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    tls = check(bind, tls_cert, tls_key)
    token = load_token(token_path, create=True)

    def app_for(real_port: int) -> Any:
        security = TransportSecuritySettings(allowed_hosts=allowed_hosts(bind, real_port))
        return server.streamable_http_app(streamable_http_path=PATH, transport_security=security, host=bind)

    real_port = port or _free_port(bind)
    config = uvicorn.Config(
        Bearer(app_for(real_port), token),
        host=bind,
        port=real_port,
        access_log=False,
        log_level="warning",
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        lifespan="on",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=1,
    )
    host = f"[{bind}]" if ":" in bind else bind
    url = f"{'https' if tls else 'http'}://{host}:{real_port}{PATH}"
    asyncio.run(_serve(uvicorn.Server(config), url, token_path))


def _free_port(bind: str) -> int:
    import socket

    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((bind, 0))
        return int(probe.getsockname()[1])


async def _serve(server: Any, url: str, token_path: Path) -> None:
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.05)  # start-up only: uvicorn says nothing when it listens
    if server.started:
        print(url, flush=True)
        print(
            f"roost mcp: serving {url}; clients send Authorization: Bearer <the token in {token_path}>",
            file=sys.stderr,
            flush=True,
        )
    await task
    if not server.started:
        raise Refused(f"could not listen on {url}")
