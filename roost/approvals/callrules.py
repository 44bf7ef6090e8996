"""The approval policy of a job, pure: what one tool call needs (`decide`).

A policy is a JSON object kept in the job record (`approvals`):

    {"mode": "auto" | "ask", "allow": [RULE...], "ask": [RULE...], "deny": [RULE...],
     "timeout": SECONDS}

A RULE is `TOOL` or `TOOL:PATTERN`. For `bash` the pattern is a glob over the command
(`bash:git push*`); for `write`/`edit` (and the read-only `read`, `grep`, `find`, `ls`) a
glob over the path, matched against the path as given, relative to the job's directory
and absolute; `write:outside` / `edit:outside` match any path outside the job's directory
(its worktree when it has one). A glob's `*` matches any characters, `/` and spaces too;
`?` one; `[...]` a set. A deny rule wins over an ask rule, an ask rule over an allow rule.
Without a matching rule the mode decides: `auto` runs every call, `ask` asks for every
call of a tool that can change something (bash, write, edit, any other extension's tool)
and never for a read-only one or roost's own tools.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass
from typing import Any

MODES = ("auto", "ask")
KINDS = ("deny", "ask", "allow")  # the order they are weighed in
READ_ONLY = frozenset({"read", "grep", "find", "ls"})
ROOST_TOOLS = frozenset({"roost_agents", "roost_send", "roost_spawn"})
PATH_TOOLS = frozenset({"write", "edit"}) | READ_ONLY
OUTSIDE = "outside"
DEFAULT_TIMEOUT = 30 * 60.0
SUMMARY_MAX = 120
_TOOL = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class BadRule(ValueError):
    """A rule or policy that cannot be used (the message says why)."""


@dataclass(frozen=True)
class Decision:
    action: str  # allow | ask | deny
    rule: str | None = None  # the rule that decided; None: the mode did


def parse_rule(rule: str) -> tuple[str, str | None]:
    """(tool, pattern or None); BadRule when it is not a rule."""
    if not isinstance(rule, str) or not rule.strip():
        raise BadRule("a rule is TOOL or TOOL:PATTERN (e.g. bash:git push*)")
    tool, sep, pattern = rule.partition(":")
    if not _TOOL.match(tool):
        raise BadRule(f"rule {rule!r}: {tool!r} is not a tool name")
    if not sep:
        return tool, None
    if not pattern:
        raise BadRule(f"rule {rule!r}: the pattern after ':' is empty")
    if tool != "bash" and tool not in PATH_TOOLS:
        raise BadRule(
            f"rule {rule!r}: only bash (a command) and {', '.join(sorted(PATH_TOOLS))} "
            "(a path) take a pattern; name the tool alone"
        )
    if pattern == OUTSIDE and tool not in ("write", "edit"):
        raise BadRule(f"rule {rule!r}: 'outside' is for write and edit")
    return tool, pattern


def check_policy(data: Any) -> dict[str, Any]:
    """A policy as the job record keeps it (every rule checked); BadRule when it is not one."""
    if not isinstance(data, dict):
        raise BadRule("approvals must be an object")
    mode = data.get("mode", "auto")
    if mode not in MODES:
        raise BadRule(f"approvals must be auto or ask, not {mode!r}")
    out: dict[str, Any] = {"mode": mode}
    for kind in KINDS:
        rules = data.get(kind) or []
        if not isinstance(rules, (list, tuple)):
            raise BadRule(f"{kind} must be a list of rules")
        for rule in rules:
            parse_rule(rule)
        out[kind] = list(dict.fromkeys(rules))
    timeout = data.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise BadRule("the approval timeout must be a positive number of seconds")
    out["timeout"] = float(timeout)
    return out


def gated(policy: dict[str, Any] | None) -> bool:
    """Whether any call of the job can need more than `auto` (else no call is looked at)."""
    if not policy:
        return False
    return policy.get("mode") == "ask" or any(policy.get(kind) for kind in ("deny", "ask"))


def combine(parent: dict[str, Any] | None, child: dict[str, Any] | None) -> dict[str, Any] | None:
    """A spawned child's policy: at least its parent's (no escalation): `ask` if either
    asks, the rules of both, the shorter timeout."""
    if not parent:
        return child
    if not child:
        return dict(parent)
    out: dict[str, Any] = {"mode": "ask" if "ask" in (parent.get("mode"), child.get("mode")) else "auto"}
    for kind in KINDS:
        out[kind] = list(dict.fromkeys([*(parent.get(kind) or []), *(child.get(kind) or [])]))
    out["timeout"] = min(
        float(parent.get("timeout", DEFAULT_TIMEOUT)), float(child.get("timeout", DEFAULT_TIMEOUT))
    )
    return out


def call_path(tool_input: dict[str, Any]) -> str | None:
    for key in ("path", "file_path"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _absolute(path: str, cwd: str) -> str:
    path = os.path.expanduser(path[1:] if path.startswith("@") else path)
    return os.path.realpath(os.path.join(cwd, path))


def outside(path: str, cwd: str) -> bool:
    """Whether `path` (as a tool got it, relative to `cwd`) is outside `cwd`."""
    root = os.path.realpath(cwd)
    target = _absolute(path, cwd)
    return not (target == root or target.startswith(root.rstrip("/") + "/"))


def matches(rule: str, tool: str, tool_input: dict[str, Any], cwd: str) -> bool:
    rule_tool, pattern = parse_rule(rule)
    if rule_tool != tool:
        return False
    if pattern is None:
        return True
    if tool == "bash":
        command = tool_input.get("command")
        return isinstance(command, str) and fnmatch.fnmatchcase(command.strip(), pattern)
    path = call_path(tool_input)
    if path is None:
        return False
    if pattern == OUTSIDE:
        return outside(path, cwd)
    absolute = _absolute(path, cwd)
    relative = os.path.relpath(absolute, os.path.realpath(cwd))
    return any(fnmatch.fnmatchcase(candidate, pattern) for candidate in (path, relative, absolute))


def decide(policy: dict[str, Any] | None, tool: str, tool_input: Any, cwd: str) -> Decision:
    """What one call needs: run it (`allow`), ask a person (`ask`) or refuse it (`deny`)."""
    if not isinstance(tool_input, dict):
        tool_input = {}
    policy = policy or {}
    for kind in KINDS:
        for rule in policy.get(kind) or []:
            if matches(rule, tool, tool_input, cwd):
                return Decision(kind, rule)
    if policy.get("mode") == "ask" and tool not in READ_ONLY and tool not in ROOST_TOOLS:
        return Decision("ask")
    return Decision("allow")


def _one_line(text: str) -> str:
    """Whitespace runs as one space; any other control, bidi or separator escaped."""
    from roost.text.escapes import FIELD, shown

    return shown(" ".join(text.split()), FIELD)


def summary(tool: str, tool_input: Any) -> str:
    """`approve bash: git push origin main`: what the job shows while it waits (one line)."""
    tool_input = tool_input if isinstance(tool_input, dict) else {}
    if tool == "bash" and isinstance(tool_input.get("command"), str):
        what = tool_input["command"]
    elif call_path(tool_input) is not None:
        what = str(call_path(tool_input))
    else:
        what = json.dumps(tool_input, ensure_ascii=False, sort_keys=True)
    line = f"approve {_one_line(tool)}: {_one_line(what)}"
    return line if len(line) <= SUMMARY_MAX else line[: SUMMARY_MAX - 1] + "…"


def always_rule(tool: str, tool_input: Any) -> str:
    """The allow rule `roost approve --always` adds: the exact command for bash (its glob
    characters escaped), the tool otherwise."""
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if tool == "bash" and isinstance(command, str) and command.strip():
        return "bash:" + re.sub(r"([*?\[])", r"[\1]", command.strip())
    return tool


def definition_policy(value: Any) -> dict[str, Any]:
    """An agent definition's `approvals`: "auto", "ask", or a table {mode, allow, ask, deny,
    timeout}; BadRule when it is neither."""
    if isinstance(value, str):
        value = {"mode": value}
    if not isinstance(value, dict):
        raise BadRule('approvals must be "auto", "ask" or a table {mode, allow, ask, deny}')
    unknown = set(value) - {"mode", "timeout", *KINDS}
    if unknown:
        raise BadRule(f"approvals: unknown key(s) {', '.join(sorted(unknown))}")
    return check_policy(value)


def compose(
    request: dict[str, Any],
    definition: dict[str, Any] | str | None,
    project: bool,
    settings_mode: str,
    settings_rules: dict[str, Any],
    settings_timeout: float,
    parent: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """A new job's policy: the request's mode (`approvals`), else its definition's, else
    roost.json's; the rules of all three; the request's timeout (`approvalTimeout`), else
    the definition's, else roost.json's. A project's definition only adds strictness (its
    allow rules and an `auto` are ignored). A spawned child's is combined with its
    parent's (`combine`). None: `auto` with no rule (nothing is gated)."""
    own = definition_policy(definition) if definition is not None else None
    if own is not None and project:
        own = {**own, "allow": [], "mode": "ask" if own["mode"] == "ask" else settings_mode}
    mode = request.get("approvals") or (
        own["mode"]
        if own is not None and definition not in (None, {}) and _names_mode(definition)
        else settings_mode
    )
    data: dict[str, Any] = {"mode": mode}
    for kind in KINDS:
        data[kind] = [
            *(settings_rules.get(kind) or []),
            *((own or {}).get(kind) or []),
            *(request.get(kind) or []),
        ]
    timeout = request.get("approvalTimeout")
    if timeout is None:
        timeout = own["timeout"] if own is not None and _names_timeout(definition) else settings_timeout
    data["timeout"] = timeout
    policy = combine(parent, check_policy(data))
    if policy and not gated(policy) and not policy.get("allow") and policy["timeout"] == DEFAULT_TIMEOUT:
        return None
    return policy


def _names_mode(definition: Any) -> bool:
    return isinstance(definition, str) or (isinstance(definition, dict) and "mode" in definition)


def _names_timeout(definition: Any) -> bool:
    return isinstance(definition, dict) and "timeout" in definition
