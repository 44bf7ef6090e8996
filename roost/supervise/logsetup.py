"""roostd's log (README: Limits): `$ROOST_HOME/roostd.log`, rotated, with repeats summarised.

roostd's stdout and stderr are roostd.log when the CLI (or a lab) started it. Then logging
writes to it through a RotatingFileHandler (LOG_MAX_BYTES a file, LOG_KEEP older ones:
roostd.log.1 is the newest), and each rollover points fds 1 and 2 at the new file, so a
stray print or a crash's traceback lands there too. Run in a terminal or under a service
manager, roostd logs to stderr as before (the manager rotates).

A warning or error logged again and again (a client that floods, a full disk) is written
once per REPEAT_WINDOW; the first line logged after the window says how many were left
out ("… repeated N more times in 10s").
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import time
from io import TextIOWrapper
from pathlib import Path

LOG_MAX_BYTES = 10 * 1024 * 1024
"""roostd.log is rotated at this size: days of normal use, seconds of a flood."""
LOG_KEEP = 3
"""Older files kept (roostd.log.1 … .3): at most 40 MiB of log in all."""
REPEAT_WINDOW = 10.0
"""Seconds in which the same warning is written once."""
FORMAT = "%(asctime)s roostd[%(process)d] %(levelname)s %(name)s: %(message)s"


class RepeatFilter(logging.Filter):
    """Lets the first of a warning (same logger, level and text template) through per
    window and counts the rest; once the window is over, the next record logged (any)
    brings out one line "… repeated N more times"."""

    def __init__(self, handler: logging.Handler, window: float = REPEAT_WINDOW) -> None:
        super().__init__()
        self.handler = handler
        self.window = window
        self._seen: dict[tuple[str, int, str], list[float]] = {}  # [window start, left out]

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "roost_summary", False):
            return True
        now = time.monotonic()
        self.flush(now)
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, str(record.msg))
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.window:
            seen[1] += 1
            return False
        self._seen[key] = [now, 0]
        return True

    def flush(self, now: float | None = None) -> None:
        """Write the count of each finished window that left lines out."""
        now = time.monotonic() if now is None else now
        for key, seen in list(self._seen.items()):
            if now - seen[0] < self.window:
                continue
            del self._seen[key]
            if seen[1]:
                name, level, text = key
                summary = logging.LogRecord(
                    name,
                    level,
                    __file__,
                    0,
                    "%s [… repeated %d more times in %gs]",
                    (text, int(seen[1]), self.window),
                    None,
                )
                summary.roost_summary = True
                self.handler.handle(summary)


class _FollowingHandler(logging.handlers.RotatingFileHandler):
    """Rotates, then makes fds 1 and 2 the new file too. Files are made 0600."""

    def _open(self) -> TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return open(fd, "a", encoding=self.encoding)

    def doRollover(self) -> None:
        super().doRollover()
        if self.stream is not None:
            self.stream.flush()
            for fd in (1, 2):
                os.dup2(self.stream.fileno(), fd)


def _stderr_is(path: Path) -> bool:
    try:
        here, there = os.fstat(2), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def setup(log_path: Path, level: str) -> None:
    """roostd's logging: rotated into `log_path` when stderr is that file, else stderr."""
    handler: logging.Handler
    if _stderr_is(log_path):
        handler = _FollowingHandler(log_path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_KEEP, encoding="utf-8")
    else:
        handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(RepeatFilter(handler))
    logging.basicConfig(level=level, handlers=[handler])
