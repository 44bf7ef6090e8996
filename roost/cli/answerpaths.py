"""Paths named in roostd's answers, checked before the CLI acts on them.

The client talks only to a roostd of the user's own (`roost.client`: ROOST_HOME, its
socket and SO_PEERCRED). A path in an answer is still checked before a command reads,
writes, moves or deletes under it (`roost mailbox` opens a mailbox, which sweeps and
quarantines files; `roost attach` writes the job's prompt file and hands pi its
session; `roost diff` writes git objects; `roost logs` reads): it must lie inside the
user's own ROOST_HOME, symlinks resolved. Every such path goes through here, so no
answer can aim the CLI at the user's other files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roost import paths
from roost import trustedfiles as trust
from roost.cli.common import fail


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
