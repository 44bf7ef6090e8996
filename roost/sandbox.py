"""The bubblewrap sandbox of a job's bash tool (`roost run --sandbox`; docs/security.md).

Pure rules plus one probe. roostd decides a job's sandbox (`compose`: the request, its
agent definition, roost.json, and a spawning parent's, which a child can never loosen);
the worker turns it into a `Plan` (`plan`: bwrap's argument list, the writable roots,
the hidden paths, the pattern of the environment variables a command never sees) and hands
it to roost's pi extension as JSON in `ROOST_SANDBOX`. The extension stays thin: it
re-registers pi's `bash` tool with a spawn hook that runs each command as
`exec <argv> <command>` with those variables removed, and refuses `write`/`edit` outside
the roots and `read`/`grep`/`find`/`ls` of a hidden path.

Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PACKAGE = "bubblewrap"
"""The Debian (and most distributions') package that installs `bwrap`."""
NETWORKS = ("none", "host")
"""`--sandbox-network`: none (its own empty network namespace) or host (the machine's)."""
ENV_VAR = "ROOST_SANDBOX"
"""The worker's variable that hands the plan to the extension (which removes it)."""
BWRAP_VAR = "ROOST_BWRAP"
"""Names the bwrap program (default: `bwrap` on PATH)."""

SECRET_NAMES = (
    r".*(_API_KEY|_APIKEY|_KEY|_TOKEN|_SECRET|_SECRET_KEY|_PASSWORD|_PASSWD|_PASS"
    r"|_CREDENTIAL|_CREDENTIALS|_AUTH|_PAT)"
    r"|API_KEY|APIKEY|TOKEN|SECRET|PASSWORD|AWS_.*|AZURE_.*|GOOGLE_APPLICATION_CREDENTIALS"
    r"|SSH_AUTH_SOCK|GPG_AGENT_INFO"
)
"""The environment variables a sandboxed command never sees (matched whole, any case):
every `*_API_KEY`, `*_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, `*_CREDENTIALS`-style
name, and so every provider's (OPENAI_API_KEY, ANTHROPIC_API_KEY, ANTHROPIC_OAUTH_TOKEN,
GEMINI_API_KEY, GROQ_API_KEY, OPENROUTER_API_KEY, GH_TOKEN, COPILOT_GITHUB_TOKEN,
AWS_*, AZURE_* ...), and the agent sockets (ssh, gpg)."""
_SECRET_RE = re.compile(rf"(?:{SECRET_NAMES})", re.IGNORECASE)

HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".docker",
    ".kube",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
)
"""Files and folders under $HOME a sandboxed command cannot read (made empty)."""
AGENT_SECRETS = ("auth.json", "sessions", "roost")
"""Under pi's agent dir: its credentials, every session, roost's files there."""


class SandboxError(Exception):
    """No working bwrap, or a sandbox that cannot be set up; the message says what to do."""


@dataclass(frozen=True)
class Plan:
    argv: tuple[str, ...]
    """bwrap and its options, ending with `-- SHELL -c`: the command is the last argument."""
    roots: tuple[str, ...]
    """The writable folders (resolved): the job's directory first, then sandbox.writable."""
    hidden: tuple[str, ...]
    """The paths made empty (resolved): secrets, ROOST_HOME."""
    network: str

    def to_json(self) -> str:
        return json.dumps(
            {
                "argv": list(self.argv),
                "roots": list(self.roots),
                "hidden": list(self.hidden),
                "drop": SECRET_NAMES,
                "network": self.network,
            }
        )


def is_secret_name(name: str) -> bool:
    return _SECRET_RE.fullmatch(name) is not None


def filtered_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the variables a sandboxed command never sees (what the extension
    does with the same pattern)."""
    return {k: v for k, v in env.items() if not is_secret_name(k)}


def inside(path: str, root: str) -> bool:
    """`path` is `root` or below it (both resolved, absolute)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def locate(environ: Mapping[str, str] | None = None) -> str:
    """bwrap's path: `ROOST_BWRAP` if set, else `bwrap` on PATH; SandboxError if neither."""
    environ = os.environ if environ is None else environ
    explicit = environ.get(BWRAP_VAR)
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return os.path.abspath(explicit)
        raise SandboxError(f"{BWRAP_VAR}={explicit} is not an executable file: {install_hint()}")
    found = shutil.which("bwrap", path=environ.get("PATH", os.defpath))
    if found is None:
        raise SandboxError(f"bwrap is not installed: {install_hint()}")
    return found


def install_hint() -> str:
    return (
        f"--sandbox needs bubblewrap: install the {PACKAGE} package "
        f"(apt-get install {PACKAGE}), or set {BWRAP_VAR}"
    )


_probed: dict[tuple[str, str], str | None] = {}


def probe(bwrap: str, network: str = "none", *, cache: bool = True) -> None:
    """Check that `bwrap` can make a sandbox here (user namespaces may be unavailable,
    e.g. in a container); SandboxError says why not. A success is remembered."""
    key = (bwrap, network)
    if cache and key in _probed and _probed[key] is None:
        return
    argv = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--die-with-parent",
    ]
    if network == "none":
        argv.append("--unshare-net")
    argv += ["--", "true"]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=20,
            check=False,
        )
        error = (
            None
            if done.returncode == 0
            else (done.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit {done.returncode}"])[
                -1
            ]
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        error = str(exc)
    _probed[key] = error
    if error is not None:
        raise SandboxError(
            f"bwrap ({bwrap}) cannot make a sandbox here: {error} "
            "(user namespaces may be disabled; see docs: Sandbox)"
        )


def check(environ: Mapping[str, str] | None = None, network: str = "none") -> str:
    """A working bwrap's path, or SandboxError (naming the package to install)."""
    bwrap = locate(environ)
    probe(bwrap, network)
    return bwrap


def compose(
    on: bool | None,
    network: str | None,
    definition_on: bool,
    settings_on: bool,
    settings_network: str,
    writable: Iterable[str],
    parent: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """A job's sandbox, or None: {network, writable}. `on`: the request's (`roost run
    --sandbox`; None: not said); a definition's `sandbox = true` or roost.json's `sandbox`
    turn it on too. A sandboxed parent's child is sandboxed whatever it asks, never with
    more network or more writable folders than its parent."""
    if parent is not None:
        return {
            "network": parent.get("network", "none") if network in (None, "host") else network,
            "writable": list(parent.get("writable") or []),
        }
    if not (on or definition_on or (on is None and settings_on)):
        return None
    if network is None:
        network = settings_network if settings_network in NETWORKS else "none"
    if network not in NETWORKS:
        raise SandboxError(f"the sandbox network is one of {', '.join(NETWORKS)}, not {network!r}")
    return {"network": network, "writable": [os.path.expanduser(w) for w in writable]}


def child_cwd_allowed(
    cwd: str, parent_cwd: str, parent: Mapping[str, Any], realpath: Callable[[str], str] = os.path.realpath
) -> bool:
    """A sandboxed parent's child works inside the parent's writable roots (else a spawn
    would give a model a writable folder its sandbox denies it)."""
    target = realpath(cwd)
    return any(
        inside(target, realpath(os.path.expanduser(root)))
        for root in (parent_cwd, *(parent.get("writable") or []))
    )


def plan(
    bwrap: str,
    cwd: str,
    writable: Iterable[str],
    network: str,
    *,
    home: str,
    roost_home: str,
    agent_dir: str,
    shell: str = "/bin/bash",
    exists: Callable[[str], bool] = os.path.lexists,
    isdir: Callable[[str], bool] = os.path.isdir,
    realpath: Callable[[str], str] = os.path.realpath,
) -> Plan:
    """bwrap's argument list for one job. Everything is read-only but the roots (the job's
    directory and sandbox.writable) and a private /tmp; secrets and ROOST_HOME are made
    empty (a folder: a tmpfs; a file: /dev/null), the roots bound over them where they lie
    inside, and a secret inside a root hidden again. Its own pid namespace, dying with the
    shell pi started; no network unless `network` is host."""
    roots: list[str] = []
    for path in (cwd, *writable):
        resolved = realpath(os.path.expanduser(path))
        if exists(resolved) and resolved not in roots:
            roots.append(resolved)
    hidden: list[str] = []
    candidates = [os.path.join(home, name) for name in HOME_SECRETS]
    candidates += [os.path.join(agent_dir, name) for name in AGENT_SECRETS]
    candidates.append(roost_home)
    for path in candidates:
        resolved = realpath(path)
        if exists(resolved) and resolved not in hidden and resolved != "/":
            hidden.append(resolved)
    argv = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-pid",
        "--die-with-parent",
        "--new-session",
    ]
    if network == "none":
        argv.append("--unshare-net")

    def hide(path: str) -> list[str]:
        return ["--tmpfs", path] if isdir(path) else ["--ro-bind", "/dev/null", path]

    def bind(root: str) -> list[str]:
        return ["--bind", root, root]

    # Most general first: a hidden path that holds a root (ROOST_HOME holds worktrees), then
    # the roots, then what the roots would uncover (a root that holds ~/.ssh), then the
    # roots inside those again.
    for path in hidden:
        argv += hide(path)
    for root in roots:
        argv += bind(root)
    again = [path for path in hidden if any(inside(path, r) and path != r for r in roots)]
    for path in again:
        argv += hide(path)
    for root in roots:
        if any(inside(root, path) and root != path for path in again):
            argv += bind(root)
    argv += ["--chdir", roots[0] if roots else "/", "--", shell, "-c"]
    return Plan(tuple(argv), tuple(roots), tuple(hidden), network)


def job_plan(
    job: Mapping[str, Any],
    *,
    home: str,
    roost_home: str,
    agent_dir: str,
    environ: Mapping[str, str] | None = None,
) -> Plan:
    """The worker's plan for a job whose record says `sandbox` (SandboxError without a
    working bwrap: the job is never run unsandboxed)."""
    sandbox = job.get("sandbox") or {}
    network = sandbox.get("network", "none")
    bwrap = check(environ, network)
    shell = shutil.which("bash") or "/bin/sh"
    return plan(
        bwrap,
        str(job["cwd"]),
        sandbox.get("writable") or [],
        network,
        home=home,
        roost_home=roost_home,
        agent_dir=agent_dir,
        shell=shell,
    )
