"""Paths named in roostd's answers, checked before the CLI acts on them.

The client talks only to a roostd of the user's own (`roost.wire.client`: ROOST_HOME, its
socket and SO_PEERCRED). A path in an answer is still checked before a command reads,
writes, moves or deletes under it (`roost mailbox` opens a mailbox, which sweeps and
quarantines files; `roost attach` writes the job's prompt file and hands pi its
session; `roost diff` writes git objects; `roost logs` reads): it must lie inside the
user's own ROOST_HOME, symlinks resolved. Every such path goes through here, so no
answer can aim the CLI at the user's other files.

One exception: a job's session file. A session handed to a job with `/roost-bg` stays
where its foreground pi kept it (pi's session folder, or the file it was given), outside
ROOST_HOME. Such a path is used only when more than the answer vouches for it
(`session_file`): the job's own record on disk names it, and it is a pi session of the
user's own (regular file, no symlink, in folders no one else may write).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from roost.display.exits import fail
from roost.host import paths
from roost.host import trusted as trust


def owned(path: Any, what: str, root: Path | None = None) -> Path:
    """`path` when it lies inside `root` (default: ROOST_HOME), symlinks resolved; else
    the command fails with one line and touches nothing."""
    base = root if root is not None else paths.roost_home()
    if not isinstance(path, str) or not path or "\0" in path or not trust.inside(path, base):
        fail(f"roostd named a {what} outside {base} ({path!r}): refusing to use it")
    return Path(path)


def job_dir(job_id: Any) -> Path:
    """The directory of the job `job_id` (an id from an answer), inside ROOST_HOME/jobs."""
    jobs = paths.jobs_dir()
    path = owned(str(paths.job_dir(str(job_id))), "job directory", jobs)
    if trust.inside(jobs, path):  # the jobs folder itself ("." or "" as an id)
        fail(f"roostd named a job id that is no job's ({job_id!r}): refusing to use it")
    return path


HEADER_LIMIT = 64 * 1024
"""The most read of a session file to find its first line (pi's header: well under 1 KiB)."""


def session_file(job_id: Any, path: Any) -> Path:
    """The session file of the job `job_id`, named in an answer: a path inside ROOST_HOME
    (symlinks resolved), or the job's handed-off session outside it (`handed_off_problem`
    finds nothing wrong). Else the command fails with one line and the reason."""
    home = paths.roost_home()
    if not isinstance(path, str) or not path or "\0" in path:
        fail(f"roostd named a session file that is no path ({path!r}): refusing to use it")
    if trust.inside(path, home):
        return Path(path)
    problem = handed_off_problem(job_dir(job_id), path)
    if problem:
        fail(
            f"roostd named a session file outside {home} ({path!r}) that is not the job's "
            f"handed-off session: {problem}: refusing to use it"
        )
    return Path(path)


def handed_off_problem(directory: Path, path: str) -> str | None:
    """Why `path` is not the session the job in `directory` took over with `/roost-bg`
    (None: it is). Nothing here comes from the answer alone:

    - the job's own record (`job.json`, read as a trusted file, no symlink) names `path`
      as its session, as roostd wrote it at the hand-off;
    - every folder above the file is the user's (or root's) and writable by no one else
      unless sticky: no one else can swap the file between this check and pi's open;
    - the file itself is not a symlink, is a regular file owned by the user and writable
      by no one else, and its first line is a pi session header (pi opens, and appends to,
      only its own sessions). A file that is missing or empty (a session with no
      conversation yet: pi writes it at the first message) must be named `*.jsonl`.
    """
    import json

    if not os.path.isabs(path):
        return "not an absolute path"
    record_file = directory / "job.json"
    try:
        record = json.loads(trust.read_bytes(record_file, follow=False))
    except FileNotFoundError:
        return f"the job has no record ({record_file} is missing)"
    except trust.UntrustedFile as exc:
        return f"the job's record cannot be trusted ({exc})"
    except (OSError, ValueError) as exc:
        return f"the job's record cannot be read ({record_file}: {exc})"
    recorded = record.get("session") if isinstance(record, dict) else None
    if recorded != path:
        return f"the job's record names {recorded!r}"
    problem = trust.dir_chain_problem(os.path.dirname(path))
    if problem:
        return f"its folder is not yours alone ({problem})"
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None if path.endswith(".jsonl") else "missing, and not named *.jsonl"
    except OSError as exc:
        if stat.S_ISLNK(_lstat_mode(path)):
            return "a symlink"
        return exc.strerror or str(exc)
    try:
        st = os.fstat(fd)
        problem = trust.file_problem(st)
        if problem is None and st.st_uid != os.getuid():
            problem = "owned by root, not by you"
        if problem:
            return problem
        head = os.read(fd, HEADER_LIMIT)
    finally:
        os.close(fd)
    if not head:
        return None if path.endswith(".jsonl") else "empty, and not named *.jsonl"
    try:
        header = json.loads(head.split(b"\n", 1)[0])
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("type") != "session":
        return "not a pi session (its first line is no session header)"
    return None


def _lstat_mode(path: str) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0
