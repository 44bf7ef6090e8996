"""Every path roost uses, computed in one place from the environment (the homes, as
strings, in roost.host.homes).

Nothing here creates files except `ensure_dir`; callers decide when state is made.
"""

from __future__ import annotations

import os
from pathlib import Path

from roost.host import homes

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = PACKAGE_DIR.parent


def roost_home() -> Path:
    """`ROOST_HOME`, else `${XDG_STATE_HOME:-~/.local/state}/roost`."""
    return Path(homes.roost_home())


class UnsafePath(OSError):
    """A directory roost writes in is a symlink (or not a directory): never followed."""


def ensure_dir(path: Path, mode: int = 0o700) -> Path:
    """Create `path` (and parents) and force its mode; returns it.

    A symlink planted where roost keeps a directory (a job's directory, `locks/`) is
    refused, not followed: everything written there would land outside ROOST_HOME.
    """
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    check_real_dir(path)
    os.chmod(path, mode)
    return path


def check_real_dir(path: Path) -> None:
    """UnsafePath unless `path` is a directory itself (not a symlink to one)."""
    import stat

    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path} is a symlink or not a directory: refusing to write there")


def socket_path() -> Path:
    return roost_home() / "roostd.sock"


def pid_file() -> Path:
    return roost_home() / "roostd.pid"


def jobs_dir() -> Path:
    return roost_home() / "jobs"


def job_dir(job_id: str) -> Path:
    return jobs_dir() / job_id


def schedules_file() -> Path:
    """Every schedule and when each last fired (roostd writes it; README: Schedules)."""
    return roost_home() / "schedules.json"


def locks_dir() -> Path:
    return roost_home() / "locks"


def normalise_session(session_path: str | os.PathLike[str]) -> str:
    """The absolute, lexically normalised path (symlinks kept), as Node's path.resolve."""
    p = os.path.abspath(os.fspath(session_path))
    # POSIX lets normpath keep exactly two leading slashes; path.resolve does not.
    return "/" + p.lstrip("/") if p.startswith("//") else p


def session_lock_path(session_path: str | os.PathLike[str], locks: Path | None = None) -> Path:
    """A session's writer lock file: `<locks dir>/<sha256 hex of the normalised path>.json`."""
    import hashlib  # here, not at the top: the CLI and a worker's launcher seldom need it

    digest = hashlib.sha256(normalise_session(session_path).encode("utf-8", "surrogateescape"))
    return (locks or locks_dir()) / f"{digest.hexdigest()}.json"


def agent_dir() -> Path:
    """pi's agent dir: `PI_CODING_AGENT_DIR`, default `~/.pi/agent`."""
    return Path(homes.agent_dir())


def pi_prefix() -> Path:
    """Where the project's setup installs the pinned pi (ignored by git)."""
    explicit = os.environ.get("ROOST_PI_PREFIX")
    if explicit:
        return Path(explicit).expanduser().absolute()
    return REPO_DIR / ".runtime" / "pi"


def extension_path() -> Path:
    """The roost pi extension shipped as package data."""
    return PACKAGE_DIR / "extension" / "roost.ts"
