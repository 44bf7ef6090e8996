"""A blocking client of roostd's socket, used by the CLI, tests and benchmarks.

`connect()` starts roostd in the background when it is not answering (every CLI command
does that) and waits for its socket.

It speaks through `_socket`, the C module under `socket`: `socket`'s own import (its enums
and `selectors`, ~5 ms) would be a sixth of a `roost ls --json` (README: Start-up), and a
client of one Unix socket needs none of it.
"""

from __future__ import annotations

import _socket
import itertools
import os
import sys
import time

from roost.errors import RoostError
from roost.host import homes
from roost.host import trusted as trust
from roost.wire import protocol
from roost.wire.protocol import RequestError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

_CHUNK = 65536


START_TIMEOUT = 15.0


class DaemonUnavailable(RoostError):
    """roostd is not running and could not be started."""


class ForeignDaemon(DaemonUnavailable):
    """ROOST_HOME, its socket or the process behind it is not the user's: nothing is sent
    (and no roostd is started there)."""


def check_home() -> None:
    """ForeignDaemon unless ROOST_HOME (resolved) and its socket are the user's alone."""
    problem = trust.home_problem(homes.roost_home()) or trust.socket_problem(homes.socket_path())
    if problem:
        raise ForeignDaemon(problem)


def check_peer(sock: _socket.socket, path: str) -> None:
    """ForeignDaemon unless the process at the other end of `sock` runs as the user
    (SO_PEERCRED, from the kernel: a socket file's owner can be anyone's choosing)."""
    import struct

    raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    if uid != os.getuid():
        raise ForeignDaemon(
            f"the process answering on {path} (pid {pid}) runs as uid {uid}, "
            "not as you: refusing to talk to it"
        )


class Client:
    def __init__(self, sock: _socket.socket) -> None:  # a socket.socket too
        self._sock = sock
        self._buffer = bytearray()  # received, not yet read: the start of the next frame
        self._ids = itertools.count(1)
        self.greeting = self._read()
        protocol.check_greeting(self.greeting)

    def _read(self) -> dict[str, Any]:
        return protocol.decode(self._line())

    def _line(self) -> bytes:
        """The next frame, with its newline; at most MAX_FRAME + 1 bytes of it (decode then
        says it is too large)."""
        limit = protocol.MAX_FRAME + 1
        searched = 0
        while True:
            end = self._buffer.find(b"\n", searched, limit)
            if end >= 0 or len(self._buffer) >= limit:
                cut = end + 1 if end >= 0 else limit
                line = bytes(self._buffer[:cut])
                del self._buffer[:cut]
                return line
            searched = len(self._buffer)
            chunk = self._sock.recv(_CHUNK)
            if not chunk:
                raise DaemonUnavailable("roostd closed the connection")
            self._buffer += chunk

    def request(self, op: str, timeout: float | None = None, **args: Any) -> dict[str, Any]:
        """Send one request and return its result; RequestError when it failed.

        `timeout` bounds this client's wait for the answer (socket timeout); it is not
        sent. Use `call` to send arguments named like it (the `wait` op's `timeout`)."""
        return self.call(op, args, timeout)

    def call(self, op: str, args: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """`request` with the arguments as a dict (any names, `timeout` included)."""
        request_id = next(self._ids)
        self._sock.sendall(protocol.encode({"id": request_id, "op": op, **args}))
        self._sock.settimeout(timeout)
        try:
            while True:
                frame = self._read()
                if frame.get("type") == "response" and frame.get("id") in (request_id, None):
                    break
        finally:
            self._sock.settimeout(None)
        if not frame.get("ok"):
            error = frame.get("error") or {}
            raise RequestError(str(error.get("code")), str(error.get("message")))
        result = frame.get("result") or {}
        assert isinstance(result, dict)
        return result

    def events(self) -> Iterator[dict[str, Any]]:
        """Pushed events, after a `subscribe` request."""
        while True:
            frame = self._read()
            if frame.get("type") == "event":
                yield frame

    def follow(self, args: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The `events` op: each pushed event-log entry, in seq order, until the connection
        ends (DaemonUnavailable then). A refused request raises RequestError."""
        request_id = next(self._ids)
        self._sock.sendall(protocol.encode({"id": request_id, "op": "events", **args}))
        while True:
            frame = self._read()
            if frame.get("type") == "event" and frame.get("event") == "log":
                yield frame["entry"]
            elif (
                frame.get("type") == "response"
                and frame.get("id") in (request_id, None)
                and not frame.get("ok")
            ):
                error = frame.get("error") or {}
                raise RequestError(str(error.get("code")), str(error.get("message")))

    def interrupt(self) -> None:
        """End a read blocked in another thread (`events`): it sees the connection end."""
        try:
            self._sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _try_connect(path: str) -> Client | None:
    """A client of the roostd at `path`, None when none answers; ForeignDaemon (before a
    byte is read or sent) when the folder, the socket or its process is not the user's."""
    check_home()
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
        check_peer(sock, path)
        return Client(sock)
    except ForeignDaemon:
        sock.close()
        raise
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, DaemonUnavailable):
        # Reset before the greeting: a roostd killed a moment ago whose last thread still
        # held the listening socket took the connection and closed it: none answers.
        sock.close()
        return None


def start_daemon_background() -> None:
    """Start roostd (`roost daemon run`'s program) detached, logging to $ROOST_HOME/roostd.log."""
    import subprocess  # here: a CLI command with roostd already up never needs it

    from roost.host import paths

    check_home()
    home = paths.ensure_dir(paths.roost_home())
    fd = os.open(
        home / "roostd.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    with os.fdopen(fd, "ab") as log_file:
        subprocess.Popen(
            [sys.executable, "-m", "roost.supervise"],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            cwd=home,
        )


def connect(autostart: bool = True, timeout: float = START_TIMEOUT) -> Client:
    path = homes.socket_path()
    client = _try_connect(path)
    if client is not None:
        return client
    if not autostart:
        raise DaemonUnavailable(f"roostd is not running (no answer on {path})")
    if os.environ.get("ROOST_NO_AUTOSTART"):
        # roostd is managed elsewhere (supervisord, systemd): wait for it, never race it.
        pass
    else:
        start_daemon_background()
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        client = _try_connect(path)
        if client is not None:
            return client
        time.sleep(delay)  # start-up wait only: the socket appears once
        delay = min(delay * 2, 0.2)
    if os.environ.get("ROOST_NO_AUTOSTART"):
        raise DaemonUnavailable(
            f"roostd is not answering on {path} (ROOST_NO_AUTOSTART is set: start it with "
            "your service manager, or unset ROOST_NO_AUTOSTART)"
        )
    log = os.path.join(homes.roost_home(), "roostd.log")
    raise DaemonUnavailable(f"roostd did not start within {timeout:.0f}s; see {log}")


def daemon_running() -> bool:
    client = _try_connect(homes.socket_path())
    if client is None:
        return False
    client.close()
    return True
