"""Another local user, for the tests of what roost may trust (docs/security.md, door 1).

The tests run as root in CI: `ids()` creates the user `roost-intruder` (no home, no
login shell) when it is absent, and `run`/`popen` run a program as that user in a child
process (setgid, setuid, no supplementary groups). Not root: `skip_reason()` says why
the test cannot run. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

NAME = "roost-intruder"


def skip_reason() -> str | None:
    """Why there can be no second user here (None: there can)."""
    if os.getuid() != 0:
        return "needs root to create and become a second local user (CI runs as root)"
    if shutil.which("useradd") is None and _lookup() is None:
        return f"no user {NAME} and no useradd to create one"
    return None


def _lookup() -> tuple[int, int] | None:
    import pwd

    try:
        entry = pwd.getpwnam(NAME)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def ids() -> tuple[int, int]:
    """The intruder's (uid, gid), the user created first when absent."""
    found = _lookup()
    if found is None:
        # Another test process may create it at the same moment: then it exists.
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME],
            capture_output=True,
            check=False,
        )
        found = _lookup()
        if found is None:
            raise RuntimeError(f"could not create the user {NAME}")
    return found


def _as_intruder(kwargs: dict[str, Any]) -> dict[str, Any]:
    uid, gid = ids()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LC_ALL": "C"}
    return {"user": uid, "group": gid, "extra_groups": [], "env": env, "cwd": "/", **kwargs}


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`argv` run as the intruder (fails loudly unless it exits 0)."""
    kwargs.setdefault("check", True)
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, **_as_intruder(kwargs))


def popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, **_as_intruder(kwargs))


def sh(script: str) -> None:
    """A shell script run as the intruder (umask 022: its files readable by all)."""
    run(["/bin/sh", "-c", f"umask 022; {script}"])


def python() -> str:
    """A python3 the intruder may run (the test's own may lie in a folder only root reads)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate):
            return candidate
    raise RuntimeError("no system python3 the intruder can run")


def shared_dir(prefix: str = "roost-shared-") -> Path:
    """A new folder in /tmp that every user may write in, sticky like /tmp itself."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(path, 0o1777)
    return path


def own_dir(prefix: str = "roost-intruder-") -> Path:
    """A new folder in /tmp owned by the intruder (mode 0755: others may read it)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    uid, gid = ids()
    os.chown(path, uid, gid)
    os.chmod(path, 0o755)
    return path
