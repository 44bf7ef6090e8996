"""Unit tests of agent definitions: parsing, errors with file and line, merging, the
project rules, spawn narrowing, the catalog and `roost agents new` round trips."""

from __future__ import annotations

import pytest

from roost.definitions import rules
from roost.definitions.rules import BUILTINS, Definition, merge, parse, render

P = "/u/agents/x.toml"


def ok(text: str, name: str = "x", source: str = "user") -> Definition:
    defn, errors = parse(text, name, source, P)
    assert not errors, errors
    assert defn is not None
    return defn


def errors_of(text: str, name: str = "x") -> list[str]:
    defn, errors = parse(text, name, "user", P)
    assert defn is None
    return [str(e) for e in errors]


def test_parse_every_key() -> None:
    defn = ok(
        'description = "Finds things"\nmodel = "openai/gpt-x"\nthinking = "low"\n'
        'tools = ["read", "grep"]\nprompt = """Be brief."""\ntask_prefix = "Scout:"\n'
    )
    assert defn.tools == ("read", "grep")
    assert defn.model == "openai/gpt-x" and defn.thinking == "low"
    assert defn.prompt == "Be brief." and defn.task_prefix == "Scout:"
    assert ok("").tools is None  # an empty file: the defaults


def test_unknown_keys_name_file_and_line() -> None:
    found = errors_of('description = "d"\n\nbudget = 3\n"tols" = ["read"]\n[worktree]\nbudget = 1\n')
    assert found == [
        f"{P}:3: unknown key 'budget' (known: {', '.join(rules.KEYS)})",
        f"{P}:4: unknown key 'tols' (known: {', '.join(rules.KEYS)})",
        f"{P}:5: unknown key 'worktree' (known: {', '.join(rules.KEYS)})",
    ]


def test_dotted_unknown_key_line() -> None:
    assert errors_of("# c\nfoo.bar = 1\n")[0].startswith(f"{P}:2: unknown key 'foo'")


def test_bad_toml_has_line() -> None:
    (message,) = errors_of('description = "d"\ntools = [read]\n')
    assert message.startswith(f"{P}:2: invalid TOML: ")
    (message,) = errors_of('prompt = """never closed\n')
    assert message.startswith(f"{P}:") and "invalid TOML" in message


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('tools = "read"', "expected a list"),
        ("tools = []", "empty list"),
        ('tools = ["re*"]', "no patterns"),
        ('tools = ["read", "read"]', "listed twice"),
        ('thinking = "huge"', "one of off"),
        ("model = 3", "expected a string"),
        ('model = "a b"', "provider/id"),
        ('description = "two\\nlines"', "one line"),
        ('prompt = ""', "non-empty"),
    ],
)
def test_bad_values(text: str, needle: str) -> None:
    (message,) = errors_of(f"# header\n{text}\n")
    assert message.startswith(f"{P}:2: ") and needle in message, message


def test_bad_name() -> None:
    assert "bad agent name" in errors_of("", name="Bad Name")[0]


def test_builtins_and_user_override() -> None:
    merged = merge([], [], False)
    assert merged.names() == ["reviewer", "scout", "worker"]
    assert set(BUILTINS["scout"].effective_tools()) == {
        "read",
        "grep",
        "find",
        "ls",
        "roost_agents",
        "roost_send",
    }
    assert BUILTINS["worker"].tools is None
    mine = ok('description = "my scout"\ntools = ["read"]\n', name="scout")
    merged = merge([mine], [], False)
    assert merged.agents["scout"].source == "user" and merged.agents["scout"].tools == ("read",)


def test_project_agents_only_when_allowed_and_never_override() -> None:
    user = ok('description = "mine"\n', name="helper")
    hostile = ok(
        'description = "evil"\ntools = ["read", "bash", "edit", "write"]\n', name="helper", source="project"
    )
    hostile_builtin = ok('description = "evil"\n', name="scout", source="project")
    extra = ok('description = "docs writer"\ntools = ["read", "write"]\n', name="docs", source="project")
    assert "docs" not in merge([user], [extra], False).agents
    merged = merge([user], [hostile, hostile_builtin, extra], True)
    assert merged.agents["helper"] is user
    assert merged.agents["scout"] is BUILTINS["scout"]
    assert merged.agents["docs"] is extra
    assert len(merged.errors) == 2 and all("cannot override" in e for e in merged.errors)


def test_project_may_not_raise_limits() -> None:
    wide = ok('tools = ["read", "codemode", "mcp_x"]\n', name="wide", source="project")
    costly = ok('model = "anthropic/opus"\n', name="costly", source="project")
    fine = ok('thinking = "low"\ntools = ["read", "bash", "roost_send"]\n', name="fine", source="project")
    merged = merge([], [wide, costly, fine], True, max_thinking="low")
    assert "wide" not in merged.agents and "costly" not in merged.agents
    assert "fine" in merged.agents
    assert any("codemode, mcp_x" in e for e in merged.errors)
    assert any("may not set model" in e for e in merged.errors)


def test_project_thinking_only_up_to_the_users_limit() -> None:
    """Thinking is spending: a project agent asks for at most the user's
    projectAgentMaxThinking (default off); more leaves it out, with the reason."""
    for level in ("minimal", "low", "medium", "high", "xhigh"):
        asks = ok(f'thinking = "{level}"\n', name="deep", source="project")
        merged = merge([], [asks], True)
        assert "deep" not in merged.agents
        assert any("may not set thinking above 'off'" in e for e in merged.errors)
    calm = ok('thinking = "off"\n', name="calm", source="project")
    assert "calm" in merge([], [calm], True).agents
    xhigh = ok('thinking = "xhigh"\n', name="deep", source="project")
    assert "deep" not in merge([], [xhigh], True, max_thinking="high").agents
    assert "deep" in merge([], [xhigh], True, max_thinking="xhigh").agents
    # The user's own definitions are the user's choice: no limit.
    mine = ok('thinking = "xhigh"\n', name="mine", source="user")
    assert merge([mine], [], True).agents["mine"] is mine


def test_the_thinking_limit_is_a_checked_setting() -> None:
    from roost.config import Settings

    assert Settings().projectAgentMaxThinking == "off"
    assert Settings.from_dict({"projectAgentMaxThinking": "medium"}).projectAgentMaxThinking == "medium"
    assert Settings.from_dict({"projectAgentMaxThinking": "max"}).projectAgentMaxThinking == "off"
    assert Settings.from_dict({"projectAgentMaxThinking": 3}).projectAgentMaxThinking == "off"


def test_unknown_agent_lists_available() -> None:
    assert rules.unknown_agent("nope", merge([], [], False)) == (
        "unknown agent 'nope'; available: reviewer, scout, worker"
    )


def test_unknown_agent_says_why_its_file_was_not_used() -> None:
    merged = merge(
        [],
        [],
        False,
        errors=["/u/agents/broken.toml:3: unknown key 'budget'", "/u/agents/other.toml:1: invalid TOML: x"],
    )
    message = rules.unknown_agent("broken", merged)
    assert message.startswith("unknown agent 'broken' (/u/agents/broken.toml:3: unknown key")
    assert "other.toml" not in message and message.endswith("available: reviewer, scout, worker")


def test_pick_and_compose() -> None:
    defn = Definition(name="d", source="user", model="p/m", thinking="low", task_prefix="Do:\n")
    assert rules.pick("x/y", defn, "model", "parent/model") == "x/y"
    assert rules.pick(None, defn, "model", "parent/model") == "p/m"
    assert rules.pick(None, BUILTINS["worker"], "model", "parent/model") == "parent/model"
    assert rules.compose_task(defn, "the task") == "Do:\n\nthe task"
    assert rules.compose_task(None, "the task") == "the task"


def test_spawn_never_widens_tools() -> None:
    scout, worker = BUILTINS["scout"], BUILTINS["worker"]
    assert rules.spawn_tools(None, scout) == (scout.tools, None)
    assert rules.spawn_tools(None, None) == (None, None)
    narrow = ("read", "roost_spawn")
    assert rules.spawn_tools(narrow, None) == (narrow, None)
    assert rules.spawn_tools(narrow, worker) == (narrow, None)
    tools, error = rules.spawn_tools(narrow, scout)
    assert tools is None and error and "cannot widen" in error
    assert rules.spawn_tools(
        ("read", "grep", "roost_spawn"), Definition(name="r", source="user", tools=("read",))
    ) == (("read",), None)


def test_catalog_is_capped() -> None:
    many = [Definition(name=f"a{i:02}", source="user", description="x" * 150) for i in range(40)]
    text = rules.catalog(merge(many, [], False))
    assert len(text) <= rules.CATALOG_CHARS + 60
    assert text.splitlines()[-1].startswith("- … ") and "roost agents ls" in text
    short = rules.catalog(merge([], [], False))
    assert short.splitlines()[0].startswith("- reviewer: Read-only")


@pytest.mark.parametrize("name", ["scout", "worker", "reviewer"])
def test_render_loads_back_the_same(name: str) -> None:
    text = render(BUILTINS[name], "copy")
    assert text.startswith('# roost agent definition "copy"')
    back = ok(text, name="copy")
    assert back.body() == BUILTINS[name].body() or (name == "worker" and back.description)


def test_render_multiline_prompt_round_trip() -> None:
    defn = Definition(
        name="m",
        source="user",
        description="d",
        tools=("read",),
        prompt='Line one\nLine "two" \\ three\n',
        task_prefix="P:",
    )
    assert ok(render(defn, "m"), name="m").body() == defn.body()


def test_record_json_round_trip() -> None:
    defn = BUILTINS["scout"]
    assert Definition.from_json(defn.to_json()) == defn
