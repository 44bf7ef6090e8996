"""What every command module shares: the exit-code rule, one-line errors (`fail`,
`usage_error`), the connection to roostd that starts it when needed (`daemon`), and `print_json`.

Light on purpose (the standard library only, not even click: the entry's quick path,
roost.cli.entry, runs without it): every `roost` process imports it. The client, the
protocol and the socket are imported by `daemon()`, so `roost --help` never loads them.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any, NoReturn

    from roost.client import Client


# Exit codes, the same for every command (README: Exit codes).
REFUSED = 1
"""Understood, but not done: the job's state or kind, a limit, a conflict, a failure."""
USAGE = 2
"""A bad command line (an unknown option, a bad or missing value) or an unknown job."""
_EXIT_OF_ERROR = {"bad_request": USAGE, "not_found": USAGE}
"""roostd's error codes that are usage errors; every other code is a refusal."""


def exit_code(error: str) -> int:
    """The exit code for roostd's error code `error` (a RequestError's `code`)."""
    return _EXIT_OF_ERROR.get(error, REFUSED)


def echo(text: str, err: bool = False) -> None:
    """One line on stdout (stderr), written as click.echo writes it: through the output
    layer's guard (roost.cli.output), then flushed."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def fail(message: str, code: int = REFUSED) -> NoReturn:
    """One line on stderr, then exit `code`. It may quote roostd, pi, git or a model: its
    control characters are shown as escapes (roost.cli.output)."""
    from roost.cli.output import visible

    echo(f"roost: {visible(message)}", err=True)
    sys.exit(code)


def usage_error(message: str) -> NoReturn:
    fail(message, USAGE)


class daemon:  # a function to its callers: `with daemon() as client:`
    """`with daemon() as client:` a connection to roostd (started when needed, unless not
    `autostart`); a failure to connect or a refused request is `fail`ed with its exit code.
    (A class, not contextlib's decorator: contextlib's import is ~4 ms of a CLI start.)"""

    def __init__(self, autostart: bool = True) -> None:
        self.autostart = autostart

    def __enter__(self) -> Client:
        from roost.client import DaemonUnavailable, connect
        from roost.protocol import ProtocolError

        try:
            self.client = connect(autostart=self.autostart)
        except (DaemonUnavailable, ProtocolError, OSError) as exc:
            fail(str(exc))
        return self.client

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        from roost.client import DaemonUnavailable
        from roost.protocol import RequestError

        self.client.close()
        if isinstance(exc, RequestError):
            fail(exc.message, exit_code(exc.code))
        if isinstance(exc, (DaemonUnavailable, ConnectionError)):
            fail(f"lost the connection to roostd: {exc}")


def print_json(data: Any) -> None:
    """`data` as JSON, its strings' control and bidi characters escaped (roost.cli.output)."""
    from roost.cli.output import json_text

    echo(json_text(data))
