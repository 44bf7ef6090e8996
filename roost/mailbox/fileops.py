"""Small file-system steps the mailbox is built from (POSIX only)."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path

from roost.host.fsutil import fsync

DIR_MODE = 0o700
FILE_MODE = 0o600


def ensure_private_dir(path: Path) -> None:
    """Create `path` (and parents) if needed and force mode 0700 on it."""
    try:  # most often it is there: one lstat (roostd opens every job's mailbox at start)
        st = os.lstat(path)
    except FileNotFoundError:
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        # A symlink planted as tmp/ or new/ would take every item outside the mailbox.
        raise OSError(f"{path} is a symlink or not a directory: refusing to use it")
    if stat.S_IMODE(st.st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)


def write_new_file(path: Path | str, data: bytes, dir_fd: int | None = None) -> None:
    """Create `path` exclusively (O_EXCL) with mode 0600 (whatever the umask), write
    `data`, fsync, close.

    On any failure the partly written file is removed before the error propagates.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE, dir_fd=dir_fd)
    try:
        os.fchmod(fd, FILE_MODE)  # a umask may have taken more than group and other bits
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path, dir_fd=dir_fd)
        raise
    os.close(fd)


class NotAnItemFile(Exception):
    """A directory entry that cannot hold an item (its reason is the message)."""


def keep_private(fd: int, info: os.stat_result) -> None:
    """Give the open file `fd` (its fstat `info`) mode 0600 unless it has it: a file roost
    keeps is its user's alone, whatever mode it arrived with. A failure (another owner)
    is left to the reader's other checks."""
    if stat.S_IMODE(info.st_mode) != FILE_MODE:
        with contextlib.suppress(OSError):
            os.fchmod(fd, FILE_MODE)


def read_small_file(path: Path | str, max_bytes: int) -> bytes:
    """The content of the regular file `path`, refusing anything else; a file read is
    given mode 0600 (`keep_private`).

    Symlinks, FIFOs, devices, directories and files over `max_bytes` raise
    NotAnItemFile; a vanished file raises FileNotFoundError. O_NONBLOCK keeps a
    FIFO dropped into new/ from blocking the reader.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise NotAnItemFile(f"cannot open: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAnItemFile("not a regular file")
        keep_private(fd, info)
        if info.st_size > max_bytes:
            raise NotAnItemFile(f"too large ({info.st_size} bytes, limit {max_bytes})")
        # One read sized from fstat (plus one byte to notice a file still growing).
        data = os.read(fd, info.st_size + 1)
        while len(data) <= info.st_size:
            chunk = os.read(fd, info.st_size + 1 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > info.st_size:
            raise NotAnItemFile("still being written (grew while read)")
        return data
    finally:
        os.close(fd)


def private_entry(path: Path | str) -> None:
    """Give `path` mode 0600 when it is a regular file or a FIFO (never following a
    symlink; a device is not opened). Other entries keep theirs (a symlink has none)."""
    try:
        st = os.lstat(path)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            return
        if stat.S_IMODE(st.st_mode) == FILE_MODE:
            return
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) == (st.st_dev, st.st_ino):  # still that entry
            keep_private(fd, info)
    finally:
        os.close(fd)


def quarantine(src_dir: Path, bad_dir: Path, name: str, reason: str) -> bool:
    """Move `src_dir/name` to `bad_dir/name` (or `name.1`, `name.2`, ... when taken),
    mode 0600 when it is a file (`private_entry`), and write the one-line `reason`
    beside it as `<name>.why`.

    Returns False when the entry was already gone (another scanner moved it first).
    """
    target = name
    counter = 0
    while os.path.lexists(bad_dir / target) or os.path.lexists(bad_dir / f"{target}.why"):
        counter += 1
        target = f"{name}.{counter}"
    try:
        os.rename(src_dir / name, bad_dir / target)
    except FileNotFoundError:
        return False
    private_entry(bad_dir / target)
    line = " ".join(reason.split()) + "\n"
    why = bad_dir / f"{target}.why"
    with contextlib.suppress(OSError):
        fd = os.open(why, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    return True


def sweep_stale(path: Path, max_age: float) -> int:
    """Remove entries of `path` whose mtime is older than `max_age` seconds; returns how many."""
    cutoff = time.time() - max_age
    removed = 0
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return 0
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                continue
            if entry.is_dir(follow_symlinks=False):
                continue
            os.unlink(entry.path)
            removed += 1
        except FileNotFoundError:
            continue
    return removed
