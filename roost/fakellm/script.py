"""Rules from JSON: the script format of `python -m roost.fakellm --script FILE.json`.

```json
{
  "default": "ok",
  "rules": [
    {"name": "hello", "match": {"last_user_contains": "hello"}, "reply": "hi", "times": 1},
    {"match": {"first_user_contains": "job-a", "last_is_tool_result": "bash"},
     "reply": {"text": "done"}},
    {"match": {"any": [{"system_contains": "x"}, {"not": {"has_tool": "bash"}}]},
     "reply": {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}}
  ]
}
```

A match object with several keys means all of them; `"always"`, `{}` or a missing match
matches everything. The full format is documented in docs/pi-notes.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import roost.fakellm.matchers as m
from roost.fakellm.replies import Reply, from_json
from roost.fakellm.server import Rule

_STRING_MATCHERS = {
    "last_user_contains": m.last_user_contains,
    "first_user_contains": m.first_user_contains,
    "any_message_contains": m.any_message_contains,
    "system_contains": m.system_contains,
    "last_tool_result_contains": m.last_tool_result_contains,
    "has_tool": m.has_tool,
}


class ScriptError(ValueError):
    """The script JSON is not in the documented format (the message says where)."""


def matcher_from_json(obj: Any, where: str = "match") -> m.Matcher:
    if obj is None or obj == "always":
        return m.always()
    if not isinstance(obj, Mapping):
        raise ScriptError(f'{where}: expected an object or "always", got {obj!r}')
    parts: list[m.Matcher] = []
    for key, value in obj.items():
        here = f"{where}.{key}"
        if key in _STRING_MATCHERS:
            if not isinstance(value, str):
                raise ScriptError(f"{here}: expected a string, got {value!r}")
            parts.append(_STRING_MATCHERS[key](value))
        elif key == "last_is_tool_result":
            if value is None or value is True:
                parts.append(m.last_is_tool_result())
            elif isinstance(value, str):
                parts.append(m.last_is_tool_result(value))
            else:
                raise ScriptError(f"{here}: expected true or a tool name, got {value!r}")
        elif key in ("all", "any"):
            if not isinstance(value, list):
                raise ScriptError(f"{here}: expected a list")
            subs = [matcher_from_json(v, f"{here}[{i}]") for i, v in enumerate(value)]
            parts.append(m.all_of(*subs) if key == "all" else m.any_of(*subs))
        elif key == "not":
            parts.append(~matcher_from_json(value, here))
        else:
            known = sorted([*_STRING_MATCHERS, "last_is_tool_result", "all", "any", "not"])
            raise ScriptError(f"{here}: unknown matcher; known: {known}")
    if not parts:
        return m.always()
    return parts[0] if len(parts) == 1 else m.all_of(*parts)


def reply_from_json(obj: Any, where: str) -> Reply:
    try:
        return from_json(obj)
    except (ValueError, TypeError) as e:
        raise ScriptError(f"{where}: {e}") from e


def rule_from_json(obj: Any, index: int) -> Rule:
    where = f"rules[{index}]"
    if not isinstance(obj, Mapping):
        raise ScriptError(f"{where}: expected an object")
    unknown = set(obj) - {"name", "match", "reply", "times"}
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)}")
    if "reply" not in obj:
        raise ScriptError(f"{where}: a rule needs a reply")
    times = obj.get("times")
    if times is not None and (not isinstance(times, int) or times < 1):
        raise ScriptError(f"{where}.times: expected a positive integer or null")
    matcher = matcher_from_json(obj.get("match"), f"{where}.match")
    name = obj.get("name") or f"{where}:{matcher.desc}"
    return Rule(matcher, reply_from_json(obj["reply"], f"{where}.reply"), times, str(name))


def load_script(source: str | Path | Mapping[str, Any]) -> tuple[list[Rule], Reply | None]:
    """(rules, default reply or None) from a script file path or an already parsed object."""
    if isinstance(source, Mapping):
        data: Any = source
    else:
        path = Path(source)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ScriptError(f"while reading script {path}: {e}") from e
    if isinstance(data, list):
        data = {"rules": data}
    if not isinstance(data, Mapping):
        raise ScriptError('script: expected an object with "rules" (or a list of rules)')
    unknown = set(data) - {"rules", "default"}
    if unknown:
        raise ScriptError(f"script: unknown keys {sorted(unknown)}")
    rules = [rule_from_json(r, i) for i, r in enumerate(data.get("rules") or [])]
    default = reply_from_json(data["default"], "default") if "default" in data else None
    return rules, default
