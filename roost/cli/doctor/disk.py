"""Whether roost can write in a folder: read-only, full, out of inodes, or refused, found by
writing there (roost doctor's check of ROOST_HOME)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

MIN_FREE = 1 << 20
"""Less free space than one mailbox item (1 MiB) is a full ROOST_HOME: posts would fail."""


def write_problem(directory: Path) -> str | None:
    """Why roost could not write in `directory` (read-only, full, no inodes, refused),
    found by writing, fsyncing and removing a small file there; None when it can."""
    try:
        fs = os.statvfs(directory)
    except OSError as exc:
        return f"cannot inspect {directory}: {exc.strerror or exc}"
    if fs.f_flag & os.ST_RDONLY:
        return f"{directory} is on a read-only filesystem"
    probe = directory / f".doctor-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, b"\0" * 4096)  # a block: creating an empty file needs no space
            os.fsync(fd)
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(probe)
    except OSError as exc:
        return f"cannot write in {directory}: {exc.strerror or exc}"
    free = fs.f_bavail * fs.f_frsize
    if free < MIN_FREE:
        return f"{directory} is full: {free // 1024} KiB free (roost needs at least 1 MiB)"
    if fs.f_files and not fs.f_favail:
        return f"{directory} has no free inodes: no file can be created"
    return None


def existing_parent(path: Path) -> Path:
    while not os.path.isdir(path) and path != path.parent:
        path = path.parent
    return path
