"""`roost install`: put the roost pi extension where pi auto-discovers it.

pi loads `<agent dir>/extensions/*/index.ts` (docs/extensions.md, "Extension locations"),
so roost is installed as the directory extension `<agent dir>/extensions/roost/`:

    index.ts          the entry point written here (see INDEX_TS)
    roost.ts          copied from the package (it imports ./session_lock.ts, ./own_home.ts,
                      ./toolgate.ts)
    session_lock.ts   copied from the package
    own_home.ts       copied from the package
    toolgate.ts       copied from the package

A roost worker also passes its own copy with `-e`; the entry point steps aside in a roost job
(`ROOST_EXT_SOCK` set) so that the job always runs the extension of the roost that started
it, even when the installed copy is older. roost.ts itself also guards against being loaded
twice in one pi.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from roost.host import paths

MARKER = "Installed by `roost install`"
FILES = ("roost.ts", "session_lock.ts", "own_home.ts", "toolgate.ts")

DAEMON_COMMAND = json.dumps(json.dumps([sys.executable, "-m", "roost.cli.main", "daemon", "start"]))
INDEX_TS = f"""\
// {MARKER}; `roost install --uninstall` removes this directory.
// The roost pi extension: roost.ts (beside this file) holds the code.
//
// In a roost job the worker passes its own copy with -e (and sets ROOST_EXT_SOCK): step
// aside without loading roost.ts, whose module code consumes the job's token, so that the
// job runs the copy of the roost that started it.
export default async function roostEntry(pi: any) {{
\tif (process.env.ROOST_EXT_SOCK) return;
\t// How this pi starts roostd when none answers (the roost that installed this).
\tprocess.env.ROOST_DAEMON_COMMAND ??= {DAEMON_COMMAND};
\tconst mod = await import("./roost.ts");
\treturn mod.default(pi);
}}
"""


class InstallError(Exception):
    """The install directory is not ours, or could not be written."""


@dataclass
class Outcome:
    directory: Path
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    created: bool = False


def install_dir() -> Path:
    """`<pi agent dir>/extensions/roost` (PI_CODING_AGENT_DIR, default ~/.pi/agent)."""
    return paths.agent_dir() / "extensions" / "roost"


def wanted_files() -> dict[str, bytes]:
    """What the installed directory must hold, by file name."""
    source = paths.extension_path().parent
    files = {"index.ts": INDEX_TS.encode()}
    for name in FILES:
        files[name] = (source / name).read_bytes()
    return files


def is_ours(directory: Path) -> bool:
    try:
        return MARKER in (directory / "index.ts").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _write(path: Path, data: bytes) -> None:
    """Replace `path` atomically (a pi starting meanwhile never reads half a file)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(directory: Path | None = None) -> Outcome:
    """Install or update the extension; files already up to date are left alone."""
    directory = directory or install_dir()
    outcome = Outcome(directory)
    if directory.exists() and not directory.is_dir():
        raise InstallError(f"{directory} exists and is not a directory")
    if directory.is_dir() and any(directory.iterdir()) and not is_ours(directory):
        raise InstallError(f"{directory} exists and was not installed by roost; move it away first")
    outcome.created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    # index.ts last: until it is there (or when it is ours already) pi sees either the old
    # complete extension or none.
    items = sorted(wanted_files().items(), key=lambda item: item[0] == "index.ts")
    for name, data in items:
        target = directory / name
        try:
            current = target.read_bytes()
        except OSError:
            current = None
        if current == data:
            outcome.unchanged.append(name)
        else:
            _write(target, data)
            outcome.written.append(name)
    return outcome


def uninstall(directory: Path | None = None) -> bool:
    """Remove the installed extension; False when there was none."""
    directory = directory or install_dir()
    if not directory.exists():
        return False
    if not is_ours(directory):
        raise InstallError(f"{directory} was not installed by roost; not removing it")
    shutil.rmtree(directory)
    return True
