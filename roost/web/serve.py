"""Running `roost web`: the options checked, the pairing link printed, uvicorn in the
foreground.

The link is printed alone on one line of stdout (scripts read it); everything else goes to
stderr. uvicorn's proxy headers are off: a local client must not be able to claim another
scheme or address with X-Forwarded-*. uvicorn's access log is off: it would write every
URL, and a pairing link's code is in one (spent at its first use, but a log outlives that).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import sys
from typing import Any

from roost.errors import RoostError
from roost.web.bridge import Hub
from roost.web.devices import Store
from roost.web.guard import Settings

DEFAULT_PORT = 8477


class Refused(RoostError):
    """An option set `roost web` will not run with (one line says why)."""


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def hosts_for(bind: str, port: int, names: tuple[str, ...]) -> frozenset[str]:
    """The Host header values this server answers: its bound address (and `localhost` on
    loopback), and each --host NAME (a tailnet name, a tunnel's), all with the port."""
    bases = {bind, *names}
    if is_loopback(bind) or bind in ("0.0.0.0", "::"):
        # A wildcard bind listens on loopback too; its other addresses are named by --host
        # (a browser's Host is what it typed, never the wildcard).
        bases |= {"127.0.0.1", "localhost", "::1"}
    out: set[str] = set()
    for base in bases:
        shown = f"[{base}]" if ":" in base and not base.startswith("[") else base
        out.add(f"{shown}:{port}".lower())
    return frozenset(out)


def check(bind: str, tls_cert: str | None, tls_key: str | None, insecure_http: bool) -> bool:
    """Refused when the options cannot run safely; whether TLS is on."""
    if bool(tls_cert) != bool(tls_key):
        raise Refused("--tls-cert and --tls-key go together")
    tls = bool(tls_cert)
    if not is_loopback(bind) and not tls and not insecure_http:
        raise Refused(
            f"binding to {bind} (not loopback) needs TLS (--tls-cert F --tls-key F), "
            "or --insecure-http to accept that anyone on the network can read the traffic"
        )
    return tls


def url_of(bind: str, port: int, tls: bool) -> str:
    host = "127.0.0.1" if bind in ("0.0.0.0", "::") else bind
    host = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{host}:{port}"


class _EmitterRace(logging.Filter):
    """watchdog's inotify emitter logs an error when a watch is removed (a job page
    closed) while its thread was about to read: a race inside watchdog that loses
    nothing (the watch is going). Not a message for the person running `roost web`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


def quiet_watchdog() -> None:
    logging.getLogger("watchdog.observers.inotify").addFilter(_EmitterRace())


def pairing_link(url: str, store: Store) -> str:
    return f"{url}/pair?code={store.new_code()}"


def run(
    bind: str,
    port: int,
    read_only: bool,
    tls_cert: str | None,
    tls_key: str | None,
    insecure_http: bool,
    names: tuple[str, ...],
) -> None:
    import uvicorn

    from roost.web.app import create_app
    from roost.wire import protocol

    protocol.use_fast_json()  # long-lived, like roostd: its frames decoded with orjson
    quiet_watchdog()
    tls = check(bind, tls_cert, tls_key, insecure_http)
    if not is_loopback(bind) and not tls:
        print(
            f"roost web: WARNING: serving plain HTTP on {bind}: anyone on the network path "
            "can read the pages and take the session cookie (--insecure-http)",
            file=sys.stderr,
        )
    store = Store()
    settings = Settings(hosts=hosts_for(bind, port, names), tls=tls, read_only=read_only, store=store)
    url = url_of(bind, port, tls)
    hub = Hub()
    config = uvicorn.Config(
        create_app(settings, hub),
        host=bind,
        port=port,
        access_log=False,
        log_level="warning",
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        lifespan="on",
        timeout_graceful_shutdown=1,
        date_header=False,
        server_header=False,
        proxy_headers=False,
    )
    asyncio.run(_serve(uvicorn.Server(config), store, url, bind, port, hub))


async def _serve(server: Any, store: Store, url: str, bind: str, port: int, hub: Hub) -> None:
    """uvicorn's serve() without its main loop, which wakes ten times a second: this one
    sleeps until a signal (with no traffic, nothing runs)."""
    config = server.config
    config.load()
    server.lifespan = config.lifespan_class(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await server.startup()
    if server.should_exit or not server.started:  # the port is taken: uvicorn said why
        raise Refused(f"could not listen on {bind}:{port}")
    await server.on_tick(0)  # its default headers, computed once
    store.write_server(url)
    try:
        print(pairing_link(url, store), flush=True)
        print(
            f"roost web: serving {url} (pair a device with the link above; "
            "`roost web pair` prints a new one)",
            file=sys.stderr,
            flush=True,
        )
        await stop.wait()
    finally:
        store.clear_server()
        hub.close()  # the live streams end first: uvicorn has no request left to cancel
        server.should_exit = True
        await server.shutdown()
