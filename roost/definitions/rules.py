"""Named agent definitions: parsing, validation, merging and the rules (no I/O).

A definition is a small TOML file (README: Agent definitions). This module turns its text
into a `Definition` (or errors that name the file and the line), merges the three sources
(builtin < user; project agents only add names) and states what a project may not do.
`roost.definitions.store` reads and writes the files.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from roost.config import THINKING_LEVELS

KEYS = (
    "description",
    "model",
    "thinking",
    "tools",
    "prompt",
    "task_prefix",
    "output_schema",
    "approvals",
    "sandbox",
    "runner",
)
RUNNERS = ("local", "ray")
"""Where a definition's jobs run (roost.json's `runner` kinds; supervise/placement.py)."""
PI_TOOLS = ("read", "bash", "edit", "write", "grep", "find", "ls")
READ_ONLY_TOOLS = ("read", "grep", "find", "ls")
ROOST_TOOLS = ("roost_agents", "roost_send", "roost_spawn")
# What a job gets without an allowlist: pi's default tools plus roost's three.
DEFAULT_TOOLS = ("read", "bash", "edit", "write", *ROOST_TOOLS)
# A project definition may name only these: pi's built-in tools (grep/find/ls can do less
# than bash, which is on by default) and roost's. Never codemode, tool_search, MCP or an
# extension's tools that are off by default, and never a pattern.
PROJECT_TOOLS = PI_TOOLS + ROOST_TOOLS
SOURCES = ("builtin", "user", "project")

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DESCRIPTION_MAX = 200
PROMPT_MAX = 20_000
PREFIX_MAX = 4_000
CATALOG_ITEMS = 12
CATALOG_CHARS = 1_500


class DefinitionError(Exception):
    """A definition file that cannot be used; `str()` is `path:line: message`."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Definition:
    name: str
    source: str  # builtin | user | project
    path: str | None = None
    description: str = ""
    model: str | None = None
    thinking: str | None = None
    tools: tuple[str, ...] | None = None  # None: pi's defaults (and roost's tools)
    prompt: str | None = None
    task_prefix: str | None = None
    # The JSON Schema its jobs' final answers are checked against (roost.job.results): a TOML
    # table, or in a file the string names (beside the definition; read by the store).
    output_schema: dict[str, Any] | str | None = None
    # Its jobs' approval policy (roost.approvals.callrules.definition_policy): "auto", "ask"
    # or a table {mode, allow, ask, deny, timeout}.
    approvals: dict[str, Any] | str | None = None
    # Its jobs' bash runs under bubblewrap (roost.sandbox); false or left out: as run says.
    sandbox: bool | None = None
    # Where its jobs' workers run: "local" or "ray"; left out: roost.json's runner.
    runner: str | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)

    def body(self) -> dict[str, Any]:
        """The TOML keys that are set, in KEYS order (what a file would hold)."""
        out: dict[str, Any] = {}
        for key in KEYS:
            value = getattr(self, key)
            if value is None or (key == "description" and value == ""):
                continue
            out[key] = list(value) if key == "tools" else value
        return out

    def to_json(self) -> dict[str, Any]:
        """As stored in a job record and printed by `roost agents show --json`."""
        return {
            "name": self.name,
            "source": self.source,
            "path": self.path,
            **{
                key: (list(v) if key == "tools" and v is not None else v)
                for key in KEYS
                for v in [getattr(self, key)]
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Definition:
        tools = data.get("tools")
        return cls(
            name=str(data["name"]),
            source=str(data.get("source") or "user"),
            path=data.get("path"),
            description=str(data.get("description") or ""),
            model=data.get("model"),
            thinking=data.get("thinking"),
            tools=tuple(tools) if tools is not None else None,
            prompt=data.get("prompt"),
            task_prefix=data.get("task_prefix"),
            output_schema=data.get("output_schema"),
            approvals=data.get("approvals"),
            sandbox=data.get("sandbox"),
            runner=data.get("runner"),
        )

    def effective_tools(self) -> tuple[str, ...]:
        return self.tools if self.tools is not None else DEFAULT_TOOLS


# -- builtins -------------------------------------------------------------------------------
BUILTINS: dict[str, Definition] = {
    "scout": Definition(
        name="scout",
        source="builtin",
        description="Read-only: answers questions about the code (reads and searches, never edits).",
        tools=(*READ_ONLY_TOOLS, "roost_agents", "roost_send"),
        prompt=(
            "You are a scout: you answer questions about the code base. You can read and "
            "search files but not change them or run commands. Answer with file paths "
            "and line numbers, briefly."
        ),
    ),
    "worker": Definition(
        name="worker",
        source="builtin",
        description="The defaults: reads, edits, writes and runs commands to do a task.",
    ),
    "reviewer": Definition(
        name="reviewer",
        source="builtin",
        description="Read-only: reviews a diff or a branch and reports findings.",
        tools=(*READ_ONLY_TOOLS, "roost_agents", "roost_send"),
        prompt=(
            "You are a reviewer. Review the diff or branch you are given and report your "
            "findings: bugs first, then risks, then style, each with file and line. You "
            "cannot change files or run commands; say what should change instead."
        ),
    ),
}


# -- parsing --------------------------------------------------------------------------------
_TOML_AT = re.compile(r"\(at line (\d+), column \d+\)")
_TOML_END = re.compile(r"\(at end of document\)")


def key_line(text: str, key: str) -> int | None:
    """The line (1-based) where top-level `key` is set or opened as a table.

    tomllib reports no positions for keys, so this looks for `key =`, `key.x =`,
    `"key" =` or `[key]` / `[key.x]` / `[[key]]` at the start of a line.
    """
    quoted = rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"
    assignment = re.compile(rf"^\s*{quoted}\s*[=.]")
    table = re.compile(rf"^\s*\[\[?\s*{quoted}\s*[\].]")
    in_tables = False  # top-level keys come before the first table header
    for number, line in enumerate(text.splitlines(), 1):
        if table.match(line) or (not in_tables and assignment.match(line)):
            return number
        in_tables = in_tables or line.lstrip().startswith("[")
    return None


def parse(text: str, name: str, source: str, path: str) -> tuple[Definition | None, list[DefinitionError]]:
    """One definition file's text: the definition, or None and every error found."""
    errors: list[DefinitionError] = []
    if not NAME.match(name):
        errors.append(
            DefinitionError(
                path,
                None,
                f"bad agent name {name!r}: use 1-40 of a-z 0-9 _ - (starting with a letter or digit)",
            )
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_AT.search(message)
        line = (
            int(match.group(1))
            if match
            else (len(text.splitlines()) or 1 if _TOML_END.search(message) else None)
        )
        message = _TOML_AT.sub("", _TOML_END.sub("", message)).strip()
        errors.append(DefinitionError(path, line, f"invalid TOML: {message}"))
        return None, errors

    def err(key: str, message: str) -> None:
        errors.append(DefinitionError(path, key_line(text, key), message))

    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in KEYS:
            err(key, f"unknown key {key!r} (known: {', '.join(KEYS)})")
            continue
        problem = _check_value(key, value)
        if problem:
            err(key, f"{key}: {problem}")
            continue
        values[key] = tuple(value) if key == "tools" else value
    if errors:
        return None, errors
    return Definition(name=name, source=source, path=path, **values), []


def _check_value(key: str, value: Any) -> str | None:
    if key == "approvals":
        from roost.approvals.callrules import BadRule, definition_policy

        try:
            definition_policy(value)
        except BadRule as exc:
            return str(exc)
        return None
    if key == "sandbox":
        return None if isinstance(value, bool) else "expected true or false"
    if key == "runner":
        return None if value in RUNNERS else f"expected one of {', '.join(RUNNERS)}"
    if key == "output_schema":
        return _check_schema_value(value)
    if key == "tools":
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            return 'expected a list of tool names, e.g. ["read", "grep"]'
        if not value:
            return "an empty list: name at least one tool (or leave tools out for the defaults)"
        bad = [t for t in value if not TOOL_NAME.match(t)]
        if bad:
            return f"not a tool name: {', '.join(map(repr, bad))} (plain names, no patterns)"
        dupes = sorted({t for t in value if value.count(t) > 1})
        if dupes:
            return f"listed twice: {', '.join(dupes)}"
        return None
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    checks = {
        "description": (
            not value.strip() or "\n" in value.strip() or len(value) > DESCRIPTION_MAX,
            f"one line of at most {DESCRIPTION_MAX} characters",
        ),
        "model": (not re.fullmatch(r"[^\s/]+(/\S+)?", value), "expected provider/id (or an id), no spaces"),
        "thinking": (value not in THINKING_LEVELS, f"one of {', '.join(THINKING_LEVELS)}"),
        "prompt": (
            not value.strip() or len(value) > PROMPT_MAX,
            f"non-empty text of at most {PROMPT_MAX} characters",
        ),
        "task_prefix": (
            not value.strip() or len(value) > PREFIX_MAX,
            f"non-empty text of at most {PREFIX_MAX} characters",
        ),
    }
    failed, message = checks[key]
    return message if failed else None


def _check_schema_value(value: Any) -> str | None:
    """An inline schema (a table) must be a usable JSON Schema; a file's name must stay
    in the definition's folder (the store reads and checks the file)."""
    from roost.job.results import BadSchema, check_schema

    if isinstance(value, dict):
        try:
            check_schema(value)
        except BadSchema as exc:
            return str(exc)
        return None
    if not isinstance(value, str):
        return f"expected a table (the schema) or a file name, got {type(value).__name__}"
    parts = value.replace("\\", "/").split("/")
    if not value.strip() or value.startswith("/") or ".." in parts:
        return "a file name in the definition's folder (no absolute path, no ..)"
    return None


# -- rules ----------------------------------------------------------------------------------
def project_violations(defn: Definition, max_thinking: str = "off") -> list[str]:
    """What a project definition may not do: a repository never widens reach or raises
    limits. It may not choose the model (the user's provider and spending), may not ask
    for more thinking than the user's `projectAgentMaxThinking` allows (thinking is
    spending too), and may not name tools outside pi's built-in set and roost's own
    (nothing that is off by default beyond grep/find/ls). Budgets, spawn caps and rates
    are the user's settings only: a definition has no key for them."""
    problems = []
    if defn.model is not None:
        problems.append("a project agent may not set model (the user chooses providers)")
    if defn.runner is not None:
        problems.append("a project agent may not set runner (the user chooses where jobs run)")
    if defn.thinking is not None and thinking_rank(defn.thinking) > thinking_rank(max_thinking):
        problems.append(
            f"a project agent may not set thinking above {max_thinking!r} "
            f"(asks for {defn.thinking!r}; the user's projectAgentMaxThinking "
            "setting is the limit)"
        )
    if defn.tools is not None:
        extra = [t for t in defn.tools if t not in PROJECT_TOOLS]
        if extra:
            problems.append(
                f"a project agent may not grant tools beyond pi's built-in and roost's: {', '.join(extra)}"
            )
    return problems


def thinking_rank(level: str) -> int:
    """A thinking level's place in THINKING_LEVELS (an unknown one ranks above all)."""
    return THINKING_LEVELS.index(level) if level in THINKING_LEVELS else len(THINKING_LEVELS)


@dataclass
class Merged:
    """Every usable definition by name, plus what was wrong or left out (messages)."""

    agents: dict[str, Definition]
    errors: list[str]

    def names(self) -> list[str]:
        return sorted(self.agents)


def merge(
    user: Iterable[Definition],
    project: Iterable[Definition],
    allow_project: bool,
    errors: Iterable[str] = (),
    max_thinking: str = "off",
) -> Merged:
    """Builtins, overridden by user files of the same name; project files add new names
    only, and only when `allow_project` (a user-level setting). A project file that names
    an existing agent, or breaks a project rule (`max_thinking`: the user's limit on a
    project agent's thinking), is reported and left out."""
    agents = dict(BUILTINS)
    problems = list(errors)
    for defn in user:
        agents[defn.name] = defn
    if not allow_project:
        return Merged(agents, problems)
    for defn in project:
        where = defn.path or defn.name
        if defn.name in agents:
            problems.append(
                f"{where}: ignored: a {agents[defn.name].source} agent named "
                f"{defn.name!r} exists (a project cannot override it)"
            )
            continue
        broken = project_violations(defn, max_thinking)
        if broken:
            problems.extend(f"{where}: {p}" for p in broken)
            continue
        agents[defn.name] = defn
    return Merged(agents, problems)


def unknown_agent(name: str, merged: Merged) -> str:
    """The refusal for an unknown name: the available ones, and why a file of that name
    was not used (a broken or refused definition is the usual reason)."""
    why = [e for e in merged.errors if re.search(rf"/{re.escape(name)}\.toml(:|$)", e.split(": ")[0])]
    reason = f" ({'; '.join(why)})" if why else ""
    return f"unknown agent {name!r}{reason}; available: {', '.join(merged.names()) or 'none'}"


def compose_task(defn: Definition | None, task: str) -> str:
    """The task as the model receives it: the definition's task_prefix, a blank line, the task."""
    if defn is None or not defn.task_prefix:
        return task
    return f"{defn.task_prefix.rstrip()}\n\n{task}"


def pick(explicit: str | None, defn: Definition | None, key: str, default: str | None = None) -> str | None:
    """Explicit argument > the definition's value > the default (e.g. the parent's)."""
    if explicit:
        return explicit
    if defn is not None and getattr(defn, key):
        return str(getattr(defn, key))
    return default


def spawn_tools(
    parent: tuple[str, ...] | None, child: Definition | None
) -> tuple[tuple[str, ...] | None, str | None]:
    """The child's tool allowlist when a session with `parent` tools spawns it, or an error.

    A spawn never widens reach: a child of a restricted parent gets the parent's list
    (no agent, or one with the defaults) or a subset of it; more is refused."""
    wanted = child.tools if child is not None else None
    if parent is None:
        return wanted, None
    if wanted is None:
        return parent, None
    extra = [t for t in wanted if t not in parent]
    if extra:
        name = child.name if child is not None else "?"
        return None, (
            f"agent {name!r} has tools this session lacks ({', '.join(extra)}): "
            "a spawn cannot widen a session's tools"
        )
    return wanted, None


def catalog(merged: Merged, items: int = CATALOG_ITEMS, chars: int = CATALOG_CHARS) -> str:
    """The short list for roost_spawn's description: `name: description` lines, capped."""
    lines: list[str] = []
    names = merged.names()
    used = 0
    for index, name in enumerate(names):
        description = " ".join(merged.agents[name].description.split())[:100] or "(no description)"
        line = f"- {name}: {description}"
        if index >= items or used + len(line) + 1 > chars:
            lines.append(f"- … {len(names) - index} more (roost agents ls)")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


# -- writing --------------------------------------------------------------------------------
HEADER = """\
# roost agent definition "{name}": `roost run --agent {name} TASK`,
# or roost_spawn {{agent: "{name}", task}}. Check it with `roost agents check`.
#
# Keys (every one optional; any other key is an error):
#   description  one line, shown to models in roost_spawn's list of agents
#   model        provider/id; an explicit --model / model argument wins
#   thinking     off | minimal | low | medium | high | xhigh
#   tools        allowlist of pi tools (pi --tools), e.g. ["read", "grep", "find", "ls"];
#                left out: pi's defaults plus roost_agents, roost_send, roost_spawn
#   prompt       text appended to pi's system prompt (pi --append-system-prompt)
#   task_prefix  text put before every task, followed by a blank line
#   output_schema  a JSON Schema its final answers must be valid against: a table, or
#                the name of a .json file beside this one (roost run --output-schema)
#   approvals    "auto" | "ask", or a table {{mode, allow, ask, deny, timeout}} of rules
#                like bash:git push* or write:outside (roost run --approvals, --allow)
#   sandbox      true: its bash runs under bubblewrap (roost run --sandbox)
#   runner       "local" | "ray": where its jobs run (roost run --runner)
"""


def render(defn: Definition, name: str) -> str:
    """A file for `roost agents new`: the comment header, then the body by tomli-w."""
    import tomli_w

    body = replace(defn, name=name).body()
    if not body:
        body = {"description": f"{name}: what this agent is for"}
    return HEADER.format(name=name) + "\n" + tomli_w.dumps(body, multiline_strings=True)
