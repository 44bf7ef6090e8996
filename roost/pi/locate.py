"""Find pi and the node that runs it.

Order for pi: `ROOST_PI` (a command, split like a shell would), then the project's pinned
install (`scripts/setup` puts it in `.runtime/pi`, or `ROOST_PI_PREFIX`), then `pi` on PATH.
Both package lines are recognised: the current `@earendil-works/pi-coding-agent` and the
old `@mariozechner/pi-coding-agent` (which ended at 0.73.1).

Order for node, when pi is a node package's script: `ROOST_NODE`, then the node that setup
installed into the same prefix (it does so only when the system node is older than pi's
`engines.node`), then `node` on PATH. pi is then started as `NODE --import PRELOAD CLI.js`
rather than through its `#!/usr/bin/env node` script, so the right node runs it whatever
PATH says, and PATH is left alone for the agent's own tools. PRELOAD (preload.mjs) keeps
pi's code caches (node's compile cache, jiti's) out of the temp folder every user shares;
`--import` is in every node that either pi line's `engines.node` admits (>= 20.6).

This runs on a worker's way to starting pi: no subprocess, only a few small file reads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from roost.host import paths

PI_PACKAGE = "@earendil-works/pi-coding-agent"  # the current line, the default
PI_VERSION = "1.6.0"
LEGACY_PI_PACKAGE = "@mariozechner/pi-coding-agent"  # ended at 0.73.1
LEGACY_PI_VERSION = "0.73.1"
PI_PACKAGES = (PI_PACKAGE, LEGACY_PI_PACKAGE)
NODE_VERSION = "22.23.3"  # npm's `node` package, installed beside pi when the system node is too old
PRELOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preload.mjs")


class PiNotFound(FileNotFoundError):
    """No pi could be found (ROOST_PI, the project's install, PATH)."""


class PiInstall:
    """How to start pi, and what is known about it without running it."""

    __slots__ = ("argv", "engines", "node", "package", "root", "source", "version")

    def __init__(
        self,
        argv: list[str],
        source: str,
        package: str | None = None,
        version: str | None = None,
        root: Path | None = None,
        node: str | None = None,
        engines: str | None = None,
    ) -> None:
        self.argv = argv  # the command that starts pi (add pi's own arguments after it)
        self.source = source  # "ROOST_PI" | "project" | "PATH"
        self.package = package  # npm package name, None when not a known pi package
        self.version = version
        self.root = root  # the package's directory
        self.node = node  # the node binary pi runs on (None: whatever the command does)
        self.engines = engines  # the package's engines.node, e.g. ">=22.19.0"

    def __repr__(self) -> str:
        return (
            f"PiInstall(argv={self.argv!r}, source={self.source!r}, package={self.package!r}, "
            f"version={self.version!r}, node={self.node!r})"
        )


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def package_of(file: Path) -> tuple[Path, dict[str, Any]] | None:
    """The pi package a file belongs to: (its directory, its package.json), or None."""
    for directory in file.resolve().parents:
        manifest = _read_json(directory / "package.json")
        if manifest is not None and manifest.get("name") in PI_PACKAGES:
            return directory, manifest
        if directory.name == "node_modules":
            return None
    return None


def _bin_of(root: Path, manifest: dict[str, Any]) -> Path | None:
    entry = manifest.get("bin")
    if isinstance(entry, dict):
        entry = entry.get("pi")
    return root / entry if isinstance(entry, str) else None


def prefix_node(prefix: Path | None = None) -> Path | None:
    """The node binary that setup installed into the pi prefix (npm's `node` package)."""
    node = (prefix or paths.pi_prefix()) / "node_modules" / "node" / "bin" / "node"
    return node if node.is_file() else None


def node_binary() -> str:
    """The node that runs pi: ROOST_NODE, the prefix's node, else `node` on PATH."""
    explicit = os.environ.get("ROOST_NODE")
    if explicit:
        return explicit
    local = prefix_node()
    if local is not None:
        return str(local)
    import shutil  # here, not at the top: the worker's start-up path avoids it when it can

    return shutil.which("node") or "node"


def _from_package(
    root: Path, manifest: dict[str, Any], source: str, extra: list[str] | None = None
) -> PiInstall | None:
    script = _bin_of(root, manifest)
    if script is None or not script.is_file():
        return None
    node = node_binary()
    engines = (manifest.get("engines") or {}).get("node")
    return PiInstall(
        [node, "--import", PRELOAD, str(script), *(extra or [])],
        source,
        str(manifest["name"]),
        str(manifest.get("version") or "") or None,
        root,
        node,
        engines if isinstance(engines, str) else None,
    )


def _from_command(argv: list[str], source: str) -> PiInstall:
    """A given command: recognised as a pi package when its program is one's script."""
    import shutil

    program = argv[0]
    found = shutil.which(program) if os.sep not in program else program
    if found and os.path.isfile(found):
        owner = package_of(Path(found))
        if owner is not None:
            root, manifest = owner
            script = _bin_of(root, manifest)
            if script is not None and script.resolve() == Path(found).resolve():
                install = _from_package(root, manifest, source, argv[1:])
                if install is not None:
                    return install
    # Something else (a wrapper, `node cli.js`, a test double): run it as given, but still
    # say which pi it is when one of its arguments is a pi package's file.
    for arg in argv[1:]:
        if os.path.isfile(arg):
            owner = package_of(Path(arg))
            if owner is not None:
                root, manifest = owner
                return PiInstall(
                    list(argv),
                    source,
                    str(manifest["name"]),
                    str(manifest.get("version") or "") or None,
                    root,
                    argv[0],
                )
    return PiInstall(list(argv), source)


def find_pi() -> PiInstall:
    """The pi roost starts: ROOST_PI, the project's pinned install, or `pi` on PATH."""
    explicit = os.environ.get("ROOST_PI")
    if explicit:
        import shlex

        return _from_command(shlex.split(explicit), "ROOST_PI")
    modules = paths.pi_prefix() / "node_modules"
    for package in PI_PACKAGES:
        root = modules / package
        manifest = _read_json(root / "package.json")
        if manifest is not None:
            install = _from_package(root, manifest, "project")
            if install is not None:
                return install
    import shutil

    found = shutil.which("pi")
    if found:
        return _from_command([found], "PATH")
    raise PiNotFound(
        f"pi not found: set ROOST_PI, run scripts/setup (installs {PI_PACKAGE}@{PI_VERSION} "
        f"into {paths.pi_prefix()}), or put pi on PATH"
    )


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """'1.6.0' (or 'v22.19.0', '1.6.0-beta.1') as (1, 6, 0); None when it is not one."""
    if not text:
        return None
    core = text.strip().lstrip("v").split("-", 1)[0].split("+", 1)[0]
    parts = core.split(".")
    try:
        numbers = [int(p) for p in parts[:3]]
    except ValueError:
        return None
    while len(numbers) < 3:
        numbers.append(0)
    return numbers[0], numbers[1], numbers[2]


def engines_minimum(engines: str | None) -> tuple[int, int, int] | None:
    """The lowest node an `engines.node` range like '>=22.19.0' admits."""
    if not engines:
        return None
    for token in engines.replace(">=", " ").replace(">", " ").replace("^", " ").split():
        version = parse_version(token)
        if version is not None:
            return version
    return None
