"""The files and folders roost may trust, and the one way to read such a file.

Other local users are not trusted. Whatever roost reads that one of them could have
planted (an agent definition, roost.json, pi's settings, a project's folders, ROOST_HOME
and its socket) passes through here:

- a file is trusted when it is a regular file owned by the user or root and writable by
  neither its group nor others; it is opened with O_NONBLOCK (a FIFO never blocks, a
  device is refused after fstat, before any read) and read up to a limit;
- a folder is trusted when it is owned by the user or root and writable by neither its
  group nor others, unless it is sticky (/tmp: each may only rename or delete their own).

Standard library only: the CLI, roostd and the worker all import it.
"""

from __future__ import annotations

import errno
import os
import stat

DEFAULT_LIMIT = 1 << 20
"""The most a trusted file read may return (1 MiB): roost's own files are far smaller."""


class UntrustedFile(OSError):
    """A file or folder roost refuses to read; `str()` is one line that says why."""


def trusted_owner(uid: int) -> bool:
    return uid in (os.getuid(), 0)


def _who(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def file_problem(st: os.stat_result) -> str | None:
    """Why a file with this stat may not be trusted (None: it may)."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not trusted_owner(st.st_uid):
        return f"owned by another user, {_who(st.st_uid)}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by others (group or world)"
    return None


def dir_problem(st: os.stat_result) -> str | None:
    """Why a folder with this stat may not be trusted (None: it may)."""
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if not trusted_owner(st.st_uid):
        return f"owned by another user, {_who(st.st_uid)}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return "writable by others (group or world) and not sticky"
    return None


def trusted_dir(path: str | os.PathLike[str]) -> bool:
    """Whether `path` (followed if a symlink) is a folder the user may trust."""
    try:
        return dir_problem(os.stat(path)) is None
    except OSError:
        return False


def read_bytes(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT, *, follow: bool = True) -> bytes:
    """The bytes of a trusted file; UntrustedFile (one line) when it is not one or holds
    more than `limit` bytes, FileNotFoundError when it is missing. `follow=False` refuses
    a symlink (a repository's file must be the file itself)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink
            raise UntrustedFile(f"{path}: a symlink (refused: not read through)") from None
        raise
    try:
        problem = file_problem(os.fstat(fd))
        if problem:
            raise UntrustedFile(f"{path}: {problem} (refused: not read)")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(65536, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise UntrustedFile(f"{path}: larger than {limit} bytes (refused: not read)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT, *, follow: bool = True) -> str:
    """`read_bytes` decoded as UTF-8 (UnicodeDecodeError when it is not)."""
    return read_bytes(path, limit, follow=follow).decode("utf-8")


def dir_chain_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the folder `path` or one of the folders above it may not be trusted (symlinks
    resolved first); None when every one may. A folder someone else controls could swap
    what lies below it."""
    directory = os.path.realpath(path)
    while True:
        try:
            problem = dir_problem(os.stat(directory))
        except OSError as exc:
            return f"{directory}: {exc.strerror or exc}"
        if problem:
            return f"{directory} is {problem}"
        parent = os.path.dirname(directory)
        if parent == directory:  # the root
            return None
        directory = parent


def home_problem(home: str | os.PathLike[str]) -> str | None:
    """Why ROOST_HOME may not be used (None: it may). Resolved first: a symlink to a
    folder another user controls is refused. One not made yet is checked by the folder
    it would be made in."""
    if not os.path.lexists(home):
        parent = os.path.dirname(os.path.abspath(home))
        while not os.path.lexists(parent) and parent != os.path.dirname(parent):
            parent = os.path.dirname(parent)
        problem = dir_chain_problem(parent)
        return problem and f"ROOST_HOME {home} would be made where others can write: {problem}"
    try:
        st = os.stat(home)
    except OSError as exc:
        return f"ROOST_HOME {home}: {exc.strerror or exc}"
    if st.st_uid != os.getuid():
        return (
            f"ROOST_HOME {home} (resolved: {os.path.realpath(home)}) is owned by "
            f"{_who(st.st_uid)}, not by you: refusing to use it"
        )
    problem = dir_chain_problem(home)
    if problem:
        return f"ROOST_HOME {home} is not yours alone: {problem}"
    return None


def check_home(home: str | os.PathLike[str]) -> None:
    """UntrustedFile (one line) when `home_problem` finds one."""
    problem = home_problem(home)
    if problem:
        raise UntrustedFile(problem)


def socket_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the socket at `path` may not be spoken to (None: it may, or it is absent)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a socket: refusing to use it"
    if st.st_uid != os.getuid():
        return f"{path} is owned by {_who(st.st_uid)}, not by you: refusing to use it"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by others: refusing to use it"
    return None


def inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether `path`, symlinks resolved, is `root` (resolved) or lies below it."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip("/") + "/")
