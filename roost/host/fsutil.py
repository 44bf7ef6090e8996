"""Small file and time helpers shared by the daemon, the worker and the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_one_sync_depth = 0


def utc_now() -> str:
    """ISO-8601 UTC with milliseconds, the timestamp format of every roost record."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fsync(fd: int) -> None:
    """os.fsync, unless inside `one_sync` (which makes everything durable once, at its end)."""
    if _one_sync_depth == 0:
        os.fsync(fd)


@contextlib.contextmanager
def one_sync() -> Iterator[None]:
    """Many durable writes, one sync: inside it `fsync` (so atomic writes and mailbox posts)
    skips its fsync, and on the way out one sync(2) makes them all durable, before the
    caller answers anyone (`roost run --each`: 200 jobs, ~9 fsyncs each). For work on one
    thread with no await inside. A crash of the process loses nothing (the kernel keeps what
    was written); a power loss before the sync may keep some files of the batch and not
    others, none of them acknowledged."""
    global _one_sync_depth
    _one_sync_depth += 1
    try:
        yield
    finally:
        _one_sync_depth -= 1
        if _one_sync_depth == 0:
            os.sync()


def fsync_dir(path: Path | str) -> None:
    """Make the entries of directory `path` (renames into or out of it) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, mode: int = 0o600) -> None:
    """A small file replaced atomically (mkstemp beside it: O_EXCL, never a symlink)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, data: Any, mode: int = 0o600) -> None:
    """Write `data` to `path` so a crash leaves either the old or the new file, never half.

    pueue's habit: write a partial file beside it, fsync, rename over, fsync the directory.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False, indent=1)
            handle.write("\n")
            handle.flush()
            fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
