"""Where roost keeps its state and where pi keeps its agent dir, as plain strings.

The client and the CLI's quick path (roost.cli.entry) use these without pathlib, whose
import (with urllib.parse and ipaddress) is ~5 ms of a ~50 ms `roost ls` (README:
Start-up). roost.host.paths makes each a Path for everything else, so both agree.
"""

from __future__ import annotations

import os


def absolute(path: str) -> str:
    """`path` with `~` expanded, made absolute against the working directory: what
    `Path(path).expanduser().absolute()` names (a `..` is kept, as there)."""
    path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def roost_home() -> str:
    """`ROOST_HOME`, else `${XDG_STATE_HOME:-~/.local/state}/roost`."""
    explicit = os.environ.get("ROOST_HOME")
    if explicit:
        return absolute(explicit)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(absolute(state), "roost")


def socket_path() -> str:
    return os.path.join(roost_home(), "roostd.sock")


def agent_dir() -> str:
    """pi's agent dir: `PI_CODING_AGENT_DIR`, default `~/.pi/agent`."""
    explicit = os.environ.get("PI_CODING_AGENT_DIR")
    if explicit:
        return absolute(explicit)
    return os.path.join(os.path.expanduser("~"), ".pi", "agent")
