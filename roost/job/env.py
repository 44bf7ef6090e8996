"""A job's environment: the variables of the command that created it (README: Environment).

`roost run` and `roost start` send the caller's environment (`caller_env`); a foreground
pi sends its own with `roost_spawn` and `/roost-bg`; a job's `roost_spawn` child gets its
parent's. roostd checks it (`checked`, which also drops what is roost's to decide) and
keeps it in `$ROOST_HOME/jobs/<id>/env.json` (0600, written atomically like job.json,
removed with the job), never in job.json, a row, an event or a log: it holds API keys.
Every (re)start of the job's worker reads it (`load`), so a restart after a crash or
after a roostd restart gets the same environment; `compose` lays roost's own variables
over it. A job without the file (made by an older roost, or by a client that sent none)
gets roostd's environment, as before.

Light on purpose: a worker reads this before it starts pi (roost.worker.launch).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any


FILE_NAME = "env.json"
MAX_BYTES = 1024 * 1024
"""The most a stored environment may hold (names and values); Linux allows ~2 MiB for all
of a program's arguments and environment together."""

OWN_PREFIXES = ("ROOST_",)
"""roost's own variables: a job gets roostd's (ROOST_HOME, ROOST_PI, ...) and the ones its
worker sets (ROOST_JOB_ID, ROOST_EXT_SOCK, ...), never a caller's (a `roost run` typed
inside a job's or an attached pi's shell would otherwise hand over that job's)."""
OWN_NAMES = frozenset(
    {
        "PI_JOB_TOKEN",  # a job secret of older roosts: never passed on
        "PI_CODING_AGENT_DIR",  # pi's agent dir is roostd's (its roost.json sets the limits)
        "PWD",
        "OLDPWD",  # the caller's directory, not the job's (--cwd)
    }
)


class BadEnvironment(ValueError):
    """A request's `env` that is not a mapping of variable names to values."""


def is_own(name: str) -> bool:
    return name in OWN_NAMES or name.startswith(OWN_PREFIXES)


def caller_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a client sends: its environment minus roost's own variables and anything that
    is not UTF-8 (the wire is JSON; such a variable stays behind)."""
    out = {}
    for name, value in (os.environ if environ is None else environ).items():
        if is_own(name):
            continue
        try:
            name.encode("utf-8")
            value.encode("utf-8")
        except UnicodeEncodeError:
            continue
        out[name] = value
    return out


def checked(value: Any) -> dict[str, str] | None:
    """A request's `env` as a job keeps it (roost's own names dropped); None when absent.
    BadEnvironment (its message names the problem, never a value) when it is not one."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadEnvironment("env must be an object of variable names to string values")
    out: dict[str, str] = {}
    size = 0
    for name, text in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise BadEnvironment(f"env: bad variable name {name!r}")
        if not isinstance(text, str) or "\0" in text:
            raise BadEnvironment(f"env: the value of {name} must be a string without NUL")
        size += len(name.encode()) + len(text.encode()) + 2
        if not is_own(name):
            out[name] = text
    if size > MAX_BYTES:
        raise BadEnvironment(f"env is {size} bytes; at most {MAX_BYTES} are kept")
    return out


def path_of(job_dir: Path) -> Path:
    return job_dir / FILE_NAME


def save(job_dir: Path, env: Mapping[str, str], source: str) -> None:
    """Keep `env` for the job (0600, atomic: a crash leaves the old file or the new one).
    `source`: what sent it (`roost run`, `roost start`, `roost_spawn`, ...). OSError
    (UnsafePath when the job's directory is not a real one) when it cannot."""
    from roost.host import paths
    from roost.host.fsutil import atomic_write_json, utc_now

    paths.check_real_dir(job_dir)  # UnsafePath: never written through a planted symlink
    atomic_write_json(path_of(job_dir), {"source": source, "saved": utc_now(), "env": dict(env)}, mode=0o600)


def read(job_dir: Path) -> dict[str, Any] | None:
    """The stored file as it is (`source`, `saved`, `env`); None when the job has none or it
    cannot be read (the job then gets roostd's environment)."""
    import json  # here: `roost run` imports this module for caller_env alone

    try:
        with open(path_of(job_dir), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    env = data.get("env") if isinstance(data, dict) else None
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        return None
    return data


def load(job_dir: Path) -> dict[str, str] | None:
    """The job's stored environment, None without one."""
    data = read(job_dir)
    return None if data is None else dict(data["env"])


def summary(job_dir: Path) -> dict[str, Any] | None:
    """What `roost show` says of it: where, from what, when, and the names (never a value)."""
    data = read(job_dir)
    if data is None:
        return None
    return {
        "path": str(path_of(job_dir)),
        "source": data.get("source"),
        "saved": data.get("saved"),
        "names": sorted(data["env"]),
    }


def compose(stored: Mapping[str, str] | None, own: Mapping[str, str]) -> dict[str, str]:
    """The environment a job's program runs with: the stored one (else this process's, which
    is roostd's), with this process's roost variables, then `own` (what the worker sets)
    over it. roost's names in `stored` cannot win: `checked` never kept them."""
    if stored is None:
        env = {k: v for k, v in os.environ.items() if k != "PI_JOB_TOKEN"}
    else:
        env = dict(stored)
        env.update((k, v) for k, v in os.environ.items() if k.startswith(OWN_PREFIXES))
    env.update(own)
    return env
