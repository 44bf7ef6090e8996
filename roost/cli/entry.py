"""The `roost` command's entry point (its console script, and `python -m roost.cli`): the
plain forms of the commands run most often go to roostd without click; every other
command line is roost.cli.main's click group, unchanged.

A whole `roost` process is mostly Python's start-up and imports, and click's import is
about a third of a `roost ls --json` (README: Start-up). The plain forms are `ls`,
`ls --json`, `reply JOB TEXT...`, `run TASK...`, `search QUERY [--json]` and `wait JOB
[--timeout S]` where no argument after the command (but `--json`, and `--timeout S`)
starts with `-` (so no other option, no `--`, no `-` for stdin, no --help) and each one
is text that encodes: they run the same code as their click commands (roost.cli.jobcalls,
roost.cli.searchcalls), print the same and exit alike (click's rules for ^C and a closed
pipe included), then leave without the interpreter's teardown (`_exit_now`). Anything
else, a usage error too, goes to click, which says what is wrong as it always did.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from collections.abc import Callable


def _plain(words: list[str]) -> bool:
    for word in words:
        if word.startswith("-"):
            return False
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:  # bytes that are no UTF-8 (surrogate escapes): click's
            return False
    return True


def quick(argv: list[str]) -> Callable[[], None] | None:
    """The call that runs `roost ARGV` without click, or None when click must parse it."""
    if not argv or "_ROOST_COMPLETE" in os.environ:  # click's shell completion
        return None
    from roost.cli import jobcalls

    name, rest = argv[0], argv[1:]
    if name == "wait":
        return _wait(rest)
    if name == "ls" and rest in ([], ["--json"]):
        return lambda: jobcalls.list_jobs(as_json=bool(rest))
    if name == "search":
        words = [word for word in rest if word != "--json"]
        if len(words) == 1 and len(rest) <= 2 and _plain(words):
            return lambda: _search(words[0], "--json" in rest)
        return None
    if not _plain(rest):
        return None
    if name == "reply" and len(rest) >= 2:
        return lambda: jobcalls.reply(rest[0], " ".join(rest[1:]))
    if name == "run" and rest:
        return lambda: jobcalls.start(jobcalls.pi_task(" ".join(rest), os.getcwd()), False)
    return None


def _wait(rest: list[str]) -> Callable[[], None] | None:
    """`wait JOB` and `wait JOB --timeout S` (S a number as click reads it), else None."""
    from roost.cli import jobcalls

    if len(rest) not in (1, 3) or not _plain(rest[:1]):
        return None
    timeout = None
    if len(rest) == 3:
        if rest[1] != "--timeout":
            return None
        try:
            timeout = float(rest[2])
        except ValueError:  # click says what is wrong with it
            return None
    return lambda: jobcalls.wait_one(rest[0], timeout)


def _search(query: str, as_json: bool) -> None:
    from roost.cli import searchcalls

    searchcalls.search({"query": query, "limit": 20}, as_json)


def main() -> None:
    call = quick(sys.argv[1:])
    if call is None:
        from roost.cli.main import main as click_main

        click_main()
        return
    from roost.display.output import guard_streams

    guard_streams()
    try:
        call()
        code = 0
    except SystemExit as exc:  # fail(): its line is written
        if not isinstance(exc.code, int):
            raise
        code = exc.code
    except (EOFError, KeyboardInterrupt):
        sys.stderr.write("\n")  # as click does, before its exit 130
        code = 130
    except BrokenPipeError:
        code = _reader_gone()
    _exit_now(code)


def _reader_gone() -> int:
    """As click: the reader went away; nothing more is written (not even at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


def _exit_now(code: int) -> None:
    """Exit with `code` once stdout and stderr are flushed, skipping the interpreter's
    teardown: freeing every module it loaded is ~6 ms of a ~50 ms command (README:
    Start-up) and does nothing a finished command needs (no file is open for writing, the
    socket to roostd is closed, no atexit handler is registered on this path)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _reader_gone()
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)
