"""What every command module shares: the exit-code rule, one-line errors (`fail`,
`usage_error`), the connection to roostd that starts it when needed (`daemon`), and `print_json`.

Light on purpose (the standard library only, not even click: the entry's quick path,
roost.cli.entry, runs without it): every `roost` process imports it. The client, the
protocol and the socket are imported by `daemon()`, so `roost --help` never loads them.
"""

from __future__ import annotations

from roost.display.exits import REFUSED, USAGE, echo, exit_code, fail, usage_error

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

    from roost.wire.client import Client


__all__ = ["REFUSED", "USAGE", "daemon", "echo", "exit_code", "fail", "print_json", "usage_error"]


class daemon:  # a function to its callers: `with daemon() as client:`
    """`with daemon() as client:` a connection to roostd (started when needed, unless not
    `autostart`); a failure to connect or a refused request is `fail`ed with its exit code.
    (A class, not contextlib's decorator: contextlib's import is ~4 ms of a CLI start.)"""

    def __init__(self, autostart: bool = True) -> None:
        self.autostart = autostart

    def __enter__(self) -> Client:
        from roost.wire.client import DaemonUnavailable, connect
        from roost.wire.protocol import ProtocolError

        try:
            self.client = connect(autostart=self.autostart)
        except (DaemonUnavailable, ProtocolError, OSError) as exc:
            fail(str(exc))
        return self.client

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        from roost.wire.client import DaemonUnavailable
        from roost.wire.protocol import RequestError

        self.client.close()
        if isinstance(exc, RequestError):
            fail(exc.message, exit_code(exc.code))
        if isinstance(exc, (DaemonUnavailable, ConnectionError)):
            fail(f"lost the connection to roostd: {exc}")


def print_json(data: Any) -> None:
    """`data` as JSON, its strings' control and bidi characters escaped (roost.display.output)."""
    from roost.display.output import json_text

    echo(json_text(data))
