"""The wire between roostd's remote hub (supervise/remotehub.py) and a remote worker's end
(worker/remote.py): how a connection is opened and proved, its frames, TLS.

Every connection is TCP, on loopback or under TLS with roostd's certificate pinned. Its
first line is the opening (`opening`: which job and attempt, the attempt's secret, and
what the connection is for: `sync`, the files and the mailbox, or `link`, the worker's own
protocol relayed byte for byte). The hub answers a `sync` opening with a line, a `link`
with roostd's greeting; a wrong secret or an old attempt gets the connection closed.
Frames are JSON lines; bytes travel as base64. Standard library only.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import ssl
from typing import Any

ADDR_VAR = "ROOST_REMOTE_ADDR"
"""host:port of roostd's hub, as the node reaches it."""
JOB_VAR = "ROOST_REMOTE_JOB"
ATTEMPT_VAR = "ROOST_REMOTE_ATTEMPT"
SECRET_VAR = "ROOST_REMOTE_SECRET"
"""The attempt's secret: removed from the environment by the remote end before anything starts."""
CERT_VAR = "ROOST_REMOTE_CERT"
"""roostd's certificate (PEM) when the hub speaks TLS: the one the remote end accepts."""
DIR_VAR = "ROOST_REMOTE_DIR"
"""Where the remote end makes its mirror (default: the node's temporary folder)."""

SYNC, LINK = "sync", "link"
FRAME_LIMIT = 16 * 1024 * 1024
CHUNK = 1024 * 1024
"""Bytes of a file sent in one frame (4/3 of it as base64)."""
OPEN_TIMEOUT = 10.0


def encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError("expected base64 text")
    return base64.b64decode(text.encode("ascii"), validate=True)


def frame(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next frame, None at the end of the stream."""
    line = await reader.readline()
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise ConnectionError("the connection ended inside a frame")
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("a frame is a JSON object")
    return value


def opening(purpose: str, job: str, attempt: int, secret: str) -> dict[str, Any]:
    return {"remote": purpose, "job": job, "attempt": attempt, "secret": secret}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {addr!r}")
    return host.strip("[]"), int(port)


def server_context(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_cert_chain(cert, key)
    return context


def client_context(cert_pem: str) -> ssl.SSLContext:
    """Trust exactly roostd's certificate (self-signed, its own authority), by its bytes:
    no public CA, no host name (the node may reach roostd by any address)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=cert_pem)
    return context


async def connect(
    addr: str, cert_pem: str | None, first: dict[str, Any]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open a connection to the hub and send its opening. In the clear only to loopback."""
    host, port = split_addr(addr)
    if cert_pem is None and not is_loopback(host):
        raise ConnectionError(f"refusing to reach {addr} without TLS (only loopback goes in the clear)")
    context = client_context(cert_pem) if cert_pem else None
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port, ssl=context, limit=FRAME_LIMIT), OPEN_TIMEOUT
    )
    writer.write(frame(first))
    await writer.drain()
    return reader, writer
