"""roost's settings: one object, every field with a documented default.

Read from the user-level `<pi agent dir>/roost.json` only. A project-level
`<cwd>/.pi/roost.json` is deliberately never read for anything here: a repository must
not be able to widen an agent's reach or raise its limits.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roost.host import paths
from roost.host import trusted as trust
from roost.wire.protocol import EVENT_TYPES

log = logging.getLogger(__name__)

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
"""pi's thinking levels, lowest first (an agent definition's `thinking` is one of them)."""


def _choices(key: str) -> tuple[str, ...] | None:
    """The values a setting that names one of a few choices may take (None: not such a one)."""
    if key == "projectAgentMaxThinking":
        return THINKING_LEVELS
    if key == "agentChildWorktrees":
        from roost.worktrees.policy import POLICIES

        return POLICIES
    if key == "approvals":
        return ("auto", "ask")
    return None


# Fields filled from `sandbox`'s object, never keys of roost.json themselves.
SET_THROUGH_SANDBOX = frozenset({"sandboxWritable", "sandboxNetwork"})


@dataclass(frozen=True)
class Settings:
    agentTools: bool = True
    """Register roost_agents / roost_send / roost_spawn in pi sessions."""
    agentExternalMessages: bool = False
    """Allow messages to peers outside the sender's session tree (by exact id)."""
    agentMaxDepth: int = 3
    """Deepest spawn chain: root (0) -> 1 -> 2 -> 3."""
    agentMaxChildren: int = 8
    """Live children per parent."""
    agentMaxTreeSessions: int = 16
    """Live sessions per tree."""
    agentMaxSpawned: int = 32
    """Live spawned sessions overall."""
    agentSpawnsPerMinute: int = 10
    """Spawns per tree per minute."""
    agentMessagesPerMinute: int = 30
    """roost_send calls per sender per minute."""
    agentMessageMaxChars: int = 8000
    """Longest agent message."""
    warmSeconds: float = 60.0
    """A done job with an empty mailbox keeps its worker and pi this long (a reply reaches
    a live pi), then both are stopped (`reaped`); the next item starts them again.
    `reapAfterSeconds` is its older name, read when warmSeconds is not set."""
    maxLivePi: int | None = None
    """Live pis past which the least recently used idle ones are stopped at once; none
    set: a quarter of the machine's memory over one live job's (supervise.idle)."""
    maxRunning: int = 0
    """Jobs running a turn at once (starting or running); past it a job is queued. 0: from
    the machine, min(2 per core, available memory / 150 MB) (docs: Queue and limits)."""
    agentSpawnQueue: bool = False
    """A spawn past the tree caps (children, tree, spawned) is queued instead of refused,
    as if it asked with `queue: true`."""
    spareWorker: bool = True
    """Keep one pi worker started ahead of its job, so a new job's pi starts at once
    (docs: Start-up); false: every worker starts when its job does."""
    restartBackoffSeconds: float = 0.5
    """First delay before restarting a crashed worker; doubles per crash (cap 30 s)."""
    restartMaxCrashes: int = 5
    """Crashes within restartWindowSeconds after which roostd gives up (job failed)."""
    restartWindowSeconds: float = 120.0
    stopTimeoutSeconds: float = 10.0
    """How long a stopping worker may take before it is killed."""
    resumeInterrupted: bool = True
    """A run cut short by a crash of its worker or pi is continued by itself."""
    resumeMaxInRow: int = 2
    """Continuations of one run in a row; past that the job waits for a reply."""
    resultRepairs: int = 1
    """Notes an answer invalid against the job's output schema gets, in a row, each with
    the errors and a new turn; the next invalid answer fails the job (0: fail at once)."""
    projectAgents: bool = False
    """Read agent definitions from `<repo>/.pi/roost/agents/` (they only add names, and
    never widen tools or choose the model)."""
    projectAgentMaxThinking: str = "off"
    """The highest thinking level a project agent may ask for (off, minimal, low, medium,
    high, xhigh); one that asks for more is left out. A repository spends only what the
    user allows."""
    hooks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Event type -> the command roostd runs on it (program and arguments, no shell)."""
    hookTimeoutSeconds: float = 10.0
    """A hook still running after this long is killed."""
    hookMaxConcurrent: int = 4
    """Hooks running at once; the others wait in the backlog."""
    hookMaxBacklog: int = 100
    """Hooks waiting to run; past that an event's hook is dropped (with a log line)."""
    eventLog: bool = True
    """Append events to $ROOST_HOME/events.jsonl (false: only followers and hooks see
    them; for measurements)."""
    agentChildWorktrees: str = "never"
    """Spawned sessions in their own git worktree: "never", "ask" (the model chooses per
    spawn with `worktree: true`) or "always"."""
    agentMaxWorktrees: int = 8
    """Worktrees one session tree may hold (made at spawn, until `roost rm`)."""
    sandbox: bool = False
    """Run every pi job's bash tool under bubblewrap (`roost run --sandbox`; docs: Sandbox).
    true, or an object {"enabled": true, "writable": [PATH...], "network": "none"|"host"}:
    `writable` (sandbox.writable) lists folders besides the job's own that its commands may
    write, `network` whether they reach the network (default none)."""
    sandboxWritable: tuple[str, ...] = ()
    """The folders of `sandbox.writable` (set through `sandbox`)."""
    sandboxNetwork: str = "none"
    """The network of `sandbox.network` (set through `sandbox`): none or host."""
    approvals: str = "auto"
    """A job's approval policy when `roost run --approvals` and its agent definition say
    none: "auto" (every tool call runs) or "ask" (a call that can change something waits
    for `roost approve`; docs: Approvals)."""
    approvalRules: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Rules every job gets: {"allow": [RULE...], "ask": [...], "deny": [...]}, a RULE being
    TOOL or TOOL:PATTERN (`bash:git push*`, `write:outside`); deny wins over ask, ask over
    allow."""
    approvalTimeout: float = 1800.0
    """Seconds an approval waits for an answer before the call is denied (`roost run
    --approval-timeout`)."""
    runner: dict[str, Any] = field(default_factory=dict)
    """Where pi jobs' workers run (`roost run --runner` chooses per job; docs: Scale-out):
    {"kind": "local"} (the default) or {"kind": "ray", "address": URL of the Ray Jobs API
    (default http://127.0.0.1:8265), "python": the nodes' interpreter with roost, "numCpus",
    "resources": {NAME: AMOUNT} (custom resources pin jobs to nodes), "env": {VAR: VALUE}
    for the node, "listen": host:port of roostd's hub (default 127.0.0.1, a kept port),
    "advertise": host:port the nodes reach it at, "tls": {"cert", "key"} (needed off
    loopback), "worktrees": "shared" (the default: a worktree job's worktree is on a
    filesystem the nodes share) or "node" (made on the node from the repository's remote,
    "gitRemote" (default origin), and its branch pushed back)}."""
    webDeviceIdleDays: float = 14.0
    """A device paired with `roost web` and not used for this long must pair again (0: never)."""

    defaultJobBudget: float | None = None
    """Budget (in the currency of the model's prices) of a job started without one
    (`roost run --budget`, `roost_spawn {budget}`); none by default."""
    defaultTreeBudget: float | None = None
    """Budget a new tree root shares with all its descendants; none by default."""
    budgetWarnAt: float = 0.8
    """Share of a budget at which the job (and its parent) get one warning; 0 turns it off."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        if "reapAfterSeconds" in data and "warmSeconds" not in data:
            data = {**data, "warmSeconds": data["reapAfterSeconds"]}  # the older name
        for key, value in data.items():
            spec = fields.get(key)
            if spec is None or key in SET_THROUGH_SANDBOX:
                continue  # keys of other tools, or future ones; sandbox's parts come only through it
            if key == "sandbox":
                values.update(_sandbox(value))
                continue
            if key == "approvalRules":
                rules = _approval_rules(value)
                if rules is not None:
                    values[key] = rules
                continue
            if key == "runner":
                runner = _runner(value)
                if runner is not None:
                    values[key] = runner
                continue
            if key == "hooks":
                hooks = _hooks(value)
                if hooks is not None:
                    values[key] = hooks
                continue
            default = spec.default
            choices = _choices(key)
            if choices is not None:
                if value in choices:
                    values[key] = value
                else:
                    log.warning(
                        "roost.json: ignoring %s=%r (expected one of %s)", key, value, ", ".join(choices)
                    )
                continue
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            else:
                ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
            if not ok:
                log.warning(
                    "roost.json: ignoring %s=%r (expected %s)",
                    key,
                    value,
                    "a number" if default is None else type(default).__name__,
                )
                continue
            # An optional amount (a budget: None by default) is a float like the others.
            values[key] = float(value) if default is None or isinstance(default, float) else value
        return cls(**values)


def _sandbox(value: Any) -> dict[str, Any]:
    """`sandbox`: a boolean, or {enabled, writable, network}; what is wrong is dropped with
    a warning."""
    if isinstance(value, bool):
        return {"sandbox": value}
    if not isinstance(value, dict):
        log.warning("roost.json: ignoring sandbox=%r (expected true/false or an object)", value)
        return {}
    out: dict[str, Any] = {"sandbox": value.get("enabled", True) is True}
    writable = value.get("writable", [])
    if isinstance(writable, list) and all(isinstance(w, str) and w for w in writable):
        out["sandboxWritable"] = tuple(writable)
    else:
        log.warning("roost.json: ignoring sandbox.writable=%r (expected a list of paths)", writable)
    network = value.get("network", "none")
    if network in ("none", "host"):
        out["sandboxNetwork"] = network
    else:
        log.warning("roost.json: ignoring sandbox.network=%r (expected none or host)", network)
    return out


RUNNER_KEYS: dict[str, type | tuple[type, ...]] = {
    "kind": str,
    "address": str,
    "python": str,
    "numCpus": (int, float),
    "resources": dict,
    "env": dict,
    "listen": str,
    "advertise": str,
    "tls": dict,
    "worktrees": str,
    "gitRemote": str,
}


def _runner(value: Any) -> dict[str, Any] | None:
    """`runner` checked: an object whose kind is local or ray; a wrong field is dropped."""
    if not isinstance(value, dict) or value.get("kind", "local") not in ("local", "ray"):
        log.warning('roost.json: ignoring runner=%r (expected {"kind": "local" or "ray", ...})', value)
        return None
    runner: dict[str, Any] = {}
    for key, item in value.items():
        expected = RUNNER_KEYS.get(key)
        if expected is None or not isinstance(item, expected) or isinstance(item, bool):
            log.warning("roost.json: ignoring runner.%s=%r", key, item)
            continue
        runner[key] = item
    if runner.get("worktrees") not in (None, "shared", "node"):
        log.warning('roost.json: ignoring runner.worktrees=%r ("shared" or "node")', runner["worktrees"])
        del runner["worktrees"]
    tls = runner.get("tls")
    if tls is not None and not (isinstance(tls.get("cert"), str) and isinstance(tls.get("key"), str)):
        log.warning('roost.json: ignoring runner.tls (expected {"cert": PATH, "key": PATH})')
        del runner["tls"]
    return runner


def _hooks(value: Any) -> dict[str, tuple[str, ...]] | None:
    """`hooks` checked: an object of event type -> non-empty list of strings. A bad entry
    is dropped with a warning; the rest is kept."""
    if not isinstance(value, dict):
        log.warning("roost.json: ignoring hooks=%r (expected an object)", value)
        return None
    hooks: dict[str, tuple[str, ...]] = {}
    for kind, command in value.items():
        if kind not in EVENT_TYPES:
            log.warning(
                "roost.json: ignoring the hook for %r (not an event type: %s)", kind, ", ".join(EVENT_TYPES)
            )
        elif (
            not isinstance(command, list)
            or not command
            or not all(isinstance(part, str) and part for part in command)
        ):
            log.warning(
                "roost.json: ignoring the hook for %s=%r (expected a non-empty list "
                "of strings: the program and its arguments)",
                kind,
                command,
            )
        else:
            hooks[kind] = tuple(command)
    return hooks


def _approval_rules(value: Any) -> dict[str, tuple[str, ...]] | None:
    """`approvalRules` checked (roost.approvals.callrules): a bad rule is dropped with a warning."""
    from roost.approvals.callrules import KINDS, BadRule, parse_rule

    if not isinstance(value, dict):
        log.warning("roost.json: ignoring approvalRules=%r (expected an object)", value)
        return None
    rules: dict[str, tuple[str, ...]] = {}
    for kind, listed in value.items():
        if kind not in KINDS or not isinstance(listed, list):
            log.warning(
                "roost.json: ignoring approvalRules.%s (expected allow, ask or deny: a list of rules)", kind
            )
            continue
        kept = []
        for rule in listed:
            try:
                parse_rule(rule)
            except BadRule as exc:
                log.warning("roost.json: ignoring an approval rule: %s", exc)
            else:
                kept.append(rule)
        rules[kind] = tuple(kept)
    return rules


def user_config_path() -> Path:
    return paths.agent_dir() / "roost.json"


_cache: tuple[Path, float, Settings] | None = None


def load_settings() -> Settings:
    """The user-level settings, re-read only when roost.json changed (mtime)."""
    global _cache
    path = user_config_path()
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return Settings()
    if _cache is not None and _cache[0] == path and _cache[1] == mtime:
        return _cache[2]
    try:  # a regular file of the user's, bounded (roost.host.trusted)
        data = json.loads(trust.read_text(path))
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        settings = Settings.from_dict(data)
    except (OSError, ValueError) as exc:
        log.error("ignoring unreadable %s: %s", path, exc)
        settings = Settings()
    _cache = (path, mtime, settings)
    return settings
