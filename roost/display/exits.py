"""The exit-code rule and one-line errors, the same for every command (`fail`,
`usage_error`): below the print layer's modules and the commands alike.

The standard library only (the entry's quick path, roost.cli.entry, runs without click):
every `roost` process imports it.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from typing import NoReturn


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
    layer's guard (roost.display.output), then flushed."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def fail(message: str, code: int = REFUSED) -> NoReturn:
    """One line on stderr, then exit `code`. It may quote roostd, pi, git or a model: its
    control characters are shown as escapes (roost.display.output)."""
    from roost.display.output import visible

    echo(f"roost: {visible(message)}", err=True)
    sys.exit(code)


def usage_error(message: str) -> NoReturn:
    fail(message, USAGE)
