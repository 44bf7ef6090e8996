"""`roost doctor` and the text of `roost --version`.

`version_text()` is on the path of `roost --version`, which is measured (benchmarks/
cli_bench.py): it reads package.json files only, never runs pi or node, and this module
imports only the standard library's light modules at the top.

`run_checks()` is the doctor: it may be slow. It runs `node --version`, starts the person's
own pi once (`--mode rpc --no-session --offline`, with the roost extension) to see that the
extension really loads, and asks a running roostd for its status. It never starts roostd,
never registers a peer and never opens a session: the extension talks to roostd only on a
`roost_*` tool call, and with `--no-session` it takes no session lock.

Each check has a level: `ok`, `warn` (works, but worth a look: the fix says what to do) or
`fail` (roost will not work as it should). The doctor exits 1 when any check fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from roost.cli.doctor.disk import existing_parent, write_problem
from roost.cli.doctor.pirpc import load_extension
from roost.host import paths
from roost.pi.locate import (
    LEGACY_PI_PACKAGE,
    LEGACY_PI_VERSION,
    PI_PACKAGE,
    PI_VERSION,
    PiInstall,
    PiNotFound,
    find_pi,
    prefix_node,
)

OLDEST_TESTED = LEGACY_PI_VERSION  # of the old package line
NEWEST_TESTED = PI_VERSION  # of the current one
ROOST_COMMAND = "roost-bg"  # registered in every pi (tools show only to a model); "roost-bg:2" if twice
# What a job's pi gets from its worker: the extension would step aside (ROOST_EXT_SOCK) or
# connect at once (ROOST_ATTACH_JOB), so the load check would not test the person's pi.
SETUP_FIX = (
    f"run scripts/setup (installs {PI_PACKAGE}@{PI_VERSION} into {{prefix}}), "
    "or set ROOST_PI to the pi command"
)


# Plain classes, not dataclasses: @dataclass costs ~2 ms each on `roost --version`'s path.
class Check:
    __slots__ = ("name", "level", "detail", "fix")

    def __init__(self, name: str, level: str, detail: str, fix: str | None = None) -> None:
        self.name = name
        self.level = level  # "ok" | "warn" | "fail"
        self.detail = detail
        self.fix = fix

    @property
    def ok(self) -> bool:
        return self.level != "fail"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "level": self.level, "detail": self.detail, "fix": self.fix}


class Report:
    __slots__ = ("checks", "pi", "features")

    def __init__(self) -> None:
        self.checks: list[Check] = []
        self.pi: dict[str, Any] | None = None  # what is known of the pi, for --json
        self.features: list[str] = []

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def add(self, name: str, level: str, detail: str, fix: str | None = None) -> None:
        self.checks.append(Check(name, level, detail, fix))

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [c.as_json() for c in self.checks],
            "pi": self.pi,
            "features": self.features,
        }


# -- `roost --version` -----------------------------------------------------------------------
def missing_program(argv: list[str]) -> str | None:
    """Why the command's program cannot run (None when it can)."""
    program = argv[0] if argv else ""
    if not program:
        return "an empty command"
    if os.sep in program:
        if not os.path.isfile(program):
            return f"{program} does not exist"
        if not os.access(program, os.X_OK):
            return f"{program} is not executable"
        return None
    import shutil

    return None if shutil.which(program) else f"{program} is not on PATH"


def node_label(install: PiInstall) -> str | None:
    """'node 22.23.3' for the prefix's node (its package.json), else 'node PATH'."""
    if not install.node:
        return None
    local = prefix_node()
    if local is not None and os.path.realpath(install.node) == os.path.realpath(local):
        try:
            with open(local.parent.parent / "package.json", encoding="utf-8") as handle:
                version = json.load(handle).get("version")
        except (OSError, ValueError, AttributeError):
            version = None
        if isinstance(version, str) and version:
            return f"node {version}"
    return f"node {install.node}"


def version_text() -> str:
    """roost's version, then the pi it uses: from package.json files, nothing is run."""
    from roost import __version__

    lines = [f"roost {__version__}"]
    try:
        install = find_pi()
    except PiNotFound:
        lines.append(f"pi: not found (not in ROOST_PI, {paths.pi_prefix()} or PATH)")
        return "\n".join(lines)
    why = missing_program(install.argv)
    if why is not None:
        lines.append(f"pi: not found ({install.source}: {why})")
    elif install.package is None:
        lines.append(f"pi (unknown version: {' '.join(install.argv)}, from {install.source})")
    else:
        parts = [install.package, *filter(None, [node_label(install)])]
        lines.append(f"pi {install.version or '(unknown version)'} ({', '.join(parts)})")
    return "\n".join(lines)


# -- the checks ------------------------------------------------------------------------------
def run_checks(model: str | None = None, agent: str | None = None) -> Report:
    """Every check; `model` (`--model`) or `agent` (`--agent`, its definition's model)
    chooses the model to check instead of pi's default."""
    report = Report()
    install = check_pi(report)
    if install is not None:
        check_node(report, install)
        from roost.pi.compat import features_of

        report.features = features_of(install).names()
        report.add(
            "pi features", "ok", ", ".join(report.features) or "none: roost uses the behaviour every pi has"
        )
    extension, fix = check_installed(report)
    if install is not None:
        check_load(report, install, extension, fix)
        check_model(report, install, model, agent)
    check_daemon(report)
    check_home(report)
    check_sandbox(report)
    return report


def check_sandbox(report: Report) -> None:
    """Whether `roost run --sandbox` can work here: bwrap found and able to make a sandbox
    (a failure only when roost.json turns the sandbox on for every job)."""
    from roost import sandbox
    from roost.config import load_settings

    try:
        bwrap = sandbox.check()
    except sandbox.SandboxError as exc:
        level = "fail" if load_settings().sandbox else "warn"
        report.add(
            "sandbox",
            level,
            f"roost run --sandbox is refused: {exc}",
            f"apt-get install {sandbox.PACKAGE} (docs: Sandbox)",
        )
        return
    report.add("sandbox", "ok", f"bwrap ({bwrap}) makes sandboxes: roost run --sandbox works")


def check_pi(report: Report) -> PiInstall | None:
    from roost.pi.locate import parse_version

    prefix = paths.pi_prefix()
    try:
        install = find_pi()
    except PiNotFound:
        report.add(
            "pi", "fail", f"not found (not in ROOST_PI, {prefix} or PATH)", SETUP_FIX.format(prefix=prefix)
        )
        return None
    command = " ".join(install.argv)
    why = missing_program(install.argv)
    if why is not None:
        fix = (
            f"set ROOST_PI to a pi that exists, or unset it to use {prefix} or PATH"
            if install.source == "ROOST_PI"
            else SETUP_FIX.format(prefix=prefix)
        )
        report.add("pi", "fail", f"{command} (from {install.source}): {why}", fix)
        return None
    report.pi = {
        "argv": install.argv,
        "source": install.source,
        "package": install.package,
        "version": install.version,
        "root": str(install.root) if install.root else None,
        "node": install.node,
        "nodeVersion": None,
        "engines": install.engines,
    }
    if install.package is None:
        report.add(
            "pi",
            "warn",
            f"{command} (from {install.source}): not a pi package roost "
            "recognises, so its version is unknown and roost assumes the oldest behaviour",
            "point ROOST_PI at pi's own script (node_modules/.bin/pi) when it is a wrapper",
        )
        return install
    report.add("pi", "ok", f"{install.package} {install.version} (from {install.source}): {command}")
    version = parse_version(install.version)
    oldest, newest = parse_version(OLDEST_TESTED), parse_version(NEWEST_TESTED)
    assert oldest is not None and newest is not None
    tested = f"tested: {LEGACY_PI_PACKAGE} {OLDEST_TESTED} to {PI_PACKAGE} {NEWEST_TESTED}"
    upgrade = f"install {PI_PACKAGE}@{PI_VERSION} (scripts/setup does) or set ROOST_PI to it"
    if version is None:
        report.add("pi version", "warn", f"cannot read {install.version!r} ({tested})", upgrade)
    elif version < oldest:
        report.add(
            "pi version", "fail", f"{install.version} is older than roost supports ({tested})", upgrade
        )
    elif version > newest:
        report.add(
            "pi version",
            "warn",
            f"{install.version} is newer than roost was tested with ({tested})",
            f"if something misbehaves, set ROOST_PI to {PI_PACKAGE}@{PI_VERSION}",
        )
    else:
        report.add("pi version", "ok", f"{install.version} is supported ({tested})")
    return install


def check_node(report: Report, install: PiInstall) -> None:
    import subprocess

    from roost.pi.locate import NODE_VERSION, engines_minimum, parse_version

    if not install.node:
        report.add("node", "ok", "not known: pi is started as given")
        return
    needs = f" (pi needs {install.engines})" if install.engines else ""
    fix_node = (
        f"set ROOST_NODE to a node {install.engines or 'that runs'}, or run "
        f"scripts/setup (it installs node {NODE_VERSION} beside pi when the system "
        "one is too old)"
    )
    try:
        done = subprocess.run(
            [install.node, "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        )
        text = done.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        report.add("node", "fail", f"{install.node} does not run: {exc}", fix_node)
        return
    found = parse_version(text)
    if report.pi is not None:
        report.pi["nodeVersion"] = text or None
    if done.returncode != 0 or found is None:
        report.add(
            "node",
            "fail",
            f"`{install.node} --version` gave {text or done.stderr.strip()!r} (exit {done.returncode})",
            fix_node,
        )
        return
    minimum = engines_minimum(install.engines)
    if minimum is not None and found < minimum:
        report.add("node", "fail", f"{text} at {install.node} is too old{needs}", fix_node)
        return
    report.add("node", "ok", f"{text} at {install.node}{needs}")


def check_installed(report: Report) -> tuple[Path, str]:
    """Is the extension installed for the person's own pi (and current)? The path to load
    and the fix when it does not load."""
    from roost.cli import install as installer

    directory = installer.install_dir()
    packaged = paths.extension_path()
    if not directory.exists():
        report.add(
            "extension installed",
            "warn",
            f"not in {directory}: your own pi sessions "
            "have no roost tools and no /roost-bg (jobs bring their own copy)",
            "roost install",
        )
        return packaged, "reinstall roost (its packaged extension does not load)"
    if not installer.is_ours(directory):
        report.add(
            "extension installed",
            "warn",
            f"{directory} was not installed by roost",
            f"move {directory} away, then run roost install",
        )
        entry = directory / "index.ts"
        return (entry if entry.is_file() else directory, f"move {directory} away, then run roost install")
    stale = [name for name, data in installer.wanted_files().items() if _read(directory / name) != data]
    if stale:
        report.add(
            "extension installed",
            "warn",
            f"{directory}: differs from this roost's copy ({', '.join(stale)})",
            "roost install",
        )
    else:
        report.add("extension installed", "ok", f"{directory} (up to date)")
    # index.ts, as pi's own discovery names it: pi then loads it once, as in the person's pi
    # (given as the directory, it would load a second copy beside the discovered one).
    return directory / "index.ts", f"roost install (rewrites {directory})"


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def check_load(report: Report, install: PiInstall, extension: Path, fix: str) -> None:
    """Start the person's pi with the extension and see it load and register /roost-bg."""
    outcome = load_extension(install.argv, extension)
    mine = [e for e in outcome.errors if _within(e.get("extensionPath"), extension)]
    others = [e for e in outcome.errors if e not in mine]
    note = f"; other extensions' errors: {_describe(others)}" if others else ""
    if outcome.failure is not None:
        if any(c.name == "node" and not c.ok for c in report.checks):
            fix = "the node check's fix (above) first"
        elif "extension" not in outcome.failure.lower():  # pi itself did not get that far
            import shlex

            fix = f'see why: {shlex.join(outcome.argv)} (then type {{"type":"get_state"}})'
        report.add("extension loads", "fail", f"{extension}: {outcome.failure}{note}", fix)
    elif mine:
        report.add("extension loads", "fail", f"{extension}: {_describe(mine)}{note}", fix)
    elif not any(name.split(":")[0] == ROOST_COMMAND for name in outcome.commands):
        report.add(
            "extension loads",
            "fail",
            f"{extension} loaded but registered no "
            f"/{ROOST_COMMAND} (commands: {', '.join(outcome.commands) or 'none'}){note}",
            fix,
        )
    else:
        report.add(
            "extension loads",
            "ok",
            f"{extension}: pi started with it and lists /{ROOST_COMMAND} ({outcome.seconds:.1f} s){note}",
        )


def check_model(report: Report, install: PiInstall, model: str | None, agent: str | None) -> None:
    """The model a job would use: pi knows it and has credentials for it (no network)."""
    from roost.cli.doctor import model as modelcheck

    source = "--model" if model else "pi's default"
    if agent and not model:
        from roost.definitions import rules, store

        merged = store.load(os.getcwd())
        definition = merged.agents.get(agent)
        if definition is None:
            report.add("model", "fail", rules.unknown_agent(agent, merged), "roost agents ls")
            return
        model, source = definition.model, f"agent {agent}"
        if not model:
            source = f"agent {agent} sets none: pi's default"
    level, detail, fix = modelcheck.check(install.argv, model, source)
    report.add("model", level, detail, fix)


def _within(path: Any, extension: Path) -> bool:
    if not isinstance(path, str):
        return False
    root = extension if extension.is_dir() else extension.parent
    return os.path.realpath(path).startswith(os.path.realpath(root))


def _describe(errors: list[dict[str, Any]]) -> str:
    return "; ".join(f"{e.get('extensionPath')} ({e.get('event')}): {e.get('error')}" for e in errors)[:500]


def check_daemon(report: Report) -> None:
    from roost import __version__
    from roost.wire.client import DaemonUnavailable, ForeignDaemon, connect
    from roost.wire.protocol import ProtocolError

    socket = paths.socket_path()
    try:
        with connect(autostart=False) as client:
            status = client.request("status", timeout=5)
    except ForeignDaemon as exc:
        report.add("roostd", "fail", str(exc), "point ROOST_HOME at a folder of your own")
        return
    except (DaemonUnavailable, ProtocolError, OSError):
        status = None
    if status is None:
        pid = _live_roostd_pid()
        if pid is not None:
            report.add(
                "roostd",
                "warn",
                f"pid {pid} holds {paths.pid_file()} but nothing answers on {socket}",
                f"see {paths.roost_home() / 'roostd.log'}; if roostd {pid} is stuck, kill {pid}",
            )
        else:
            report.add("roostd", "ok", f"not running (roost commands start it; socket {socket})")
        return
    detail = f"running, pid {status.get('pid')}, {status.get('jobs')} jobs, socket {status.get('socket')}"
    if status.get("version") != __version__:
        report.add(
            "roostd",
            "warn",
            f"{detail}; it is roost {status.get('version')}, this CLI {__version__}",
            "roost daemon stop, then roost daemon start (jobs keep running and are adopted)",
        )
    else:
        report.add("roostd", "ok", detail)


def _live_roostd_pid() -> int | None:
    try:
        pid = int(paths.pid_file().read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if any(b"roost" in part for part in cmdline) else None  # not a reused pid


def check_home(report: Report) -> None:
    """ROOST_HOME 0700 and the socket 0600, both the user's: anyone who reaches the socket
    can run jobs as this user."""
    import stat

    from roost.host.trusted import home_problem

    home = paths.roost_home()
    if problem := home_problem(home):  # before anything is written there
        report.add("ROOST_HOME", "fail", problem, "set ROOST_HOME to a folder of your own")
        return
    if not os.path.lexists(home):
        parent = existing_parent(home)
        problem = write_problem(parent)
        if problem:
            report.add("ROOST_HOME", "fail", f"{home} does not exist and cannot be made: {problem}", HOME_FIX)
        else:
            report.add("ROOST_HOME", "ok", f"{home} does not exist yet (made 0700 on first use)")
    elif os.path.isdir(home) and (problem := write_problem(home)):
        report.add("ROOST_HOME", "fail", problem, HOME_FIX)
    else:
        _private(
            report,
            "ROOST_HOME",
            home,
            0o700,
            stat.S_ISDIR,
            "a directory",
            f"move {home} away or set ROOST_HOME elsewhere",
        )
    socket = paths.socket_path()
    if os.path.lexists(socket):  # none: roostd is not running (the roostd check says so)
        _private(
            report,
            "socket",
            socket,
            0o600,
            stat.S_ISSOCK,
            "a socket",
            f"stop roostd, remove {socket}, start roostd",
        )


HOME_FIX = "free space there or remount it read-write, or set ROOST_HOME elsewhere"


def _private(
    report: Report, name: str, path: Path, mode: int, is_kind: Any, kind: str, fix_kind: str
) -> None:
    import stat

    try:
        info = os.lstat(path)
    except OSError as exc:
        report.add(name, "fail", f"{path}: {exc}", "check the path and its parents")
        return
    uid = os.getuid()
    has = stat.S_IMODE(info.st_mode)
    if not is_kind(info.st_mode):
        report.add(name, "fail", f"{path} is not {kind}", fix_kind)
    elif info.st_uid != uid:
        report.add(
            name,
            "fail",
            f"{path} belongs to uid {info.st_uid}, not you ({uid})",
            "set ROOST_HOME to a directory of your own",
        )
    elif has != mode:
        report.add(
            name, "fail", f"{path} has mode {has:04o}; others could reach roostd", f"chmod {mode:o} {path}"
        )
    else:
        report.add(name, "ok", f"{path} ({mode:04o}, yours)")


# -- output ------------------------------------------------------------------------------------
MARKS = {True: {"ok": "✓", "warn": "!", "fail": "✗"}, False: {"ok": "ok", "warn": "warn", "fail": "FAIL"}}


def render(report: Report, tty: bool) -> list[str]:
    """One line per check (a mark, its name, the detail), and `fix:` under each problem."""
    import click

    from roost.display.output import field  # a detail may quote pi's or a model's words

    marks = MARKS[tty]
    width = max(len(check.name) for check in report.checks)
    mark_width = max(len(mark) for mark in marks.values())
    colours = {"ok": "green", "warn": "yellow", "fail": "red"}
    lines = []
    for check in report.checks:
        mark = marks[check.level].ljust(mark_width)
        if tty:
            mark = click.style(mark, fg=colours[check.level], bold=True)
        lines.append(f"{mark} {check.name.ljust(width)}  {field(check.detail)}")
        if check.fix and check.level != "ok":
            lines.append(f"{' ' * mark_width} {' ' * width}  fix: {field(check.fix)}")
    failed = sum(1 for c in report.checks if c.level == "fail")
    warned = sum(1 for c in report.checks if c.level == "warn")
    if failed:
        lines.append(
            f"{failed} problem{'s' * (failed != 1)}"
            + (f", {warned} warning{'s' * (warned != 1)}" if warned else "")
        )
    else:
        lines.append("all good" + (f" ({warned} warning{'s' * (warned != 1)})" if warned else ""))
    return lines
