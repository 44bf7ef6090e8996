"""Structured results: a job asked for a final answer that is JSON valid against a schema
(`roost run --output-schema FILE.json`, `roost_spawn {output_schema}`, an agent
definition's `output_schema`). No I/O.

What counts as the answer (`extract`): the run's final text is the JSON value as a whole,
or it holds exactly one fenced block tagged json (```json ... ```) and that block is the
value. Anything else is an invalid answer, like a value the schema rejects.

The checking is the `jsonschema` library's (imported when a schema is checked: a job
without one never loads it). The dialect is the schema's own `$schema`, Draft 2020-12 when
it names none; a `$ref` must point within the schema (`#/...`): nothing is fetched.
"""

from __future__ import annotations

import json
import re
from typing import Any

SCHEMA_MAX = 64 * 1024
"""The largest schema, in bytes of compact JSON: it goes into the task the model reads."""
EVENT_RESULT_MAX = 4096
"""A `job.result` event carries the result up to this many bytes of compact JSON; past it,
only its size (`large: true`): hooks and followers read `roost result ID --json`."""
ERRORS_SHOWN = 10
"""The most validation errors a note or a failure lists (then `… N more`)."""
ERROR_CHARS = 300
"""The longest one error's line (a long rejected value is cut)."""

_FENCE = re.compile(r"^```[ \t]*json[ \t]*\n(.*?)\n```[ \t]*$", re.DOTALL | re.MULTILINE | re.IGNORECASE)


class BadSchema(ValueError):
    """An output schema that cannot be used; `str()` is one line that says why."""


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def check_schema(schema: Any) -> dict[str, Any]:
    """`schema` when it is a usable JSON Schema (an object, valid against its dialect's
    meta-schema, at most SCHEMA_MAX); BadSchema otherwise."""
    if not isinstance(schema, dict):
        raise BadSchema(f"the output schema must be a JSON object, got {_type_name(schema)}")
    size = len(compact(schema).encode("utf-8"))
    if size > SCHEMA_MAX:
        raise BadSchema(f"the output schema is {size} bytes; the limit is {SCHEMA_MAX}")
    import jsonschema
    from jsonschema import validators

    dialect = schema.get("$schema")
    cls = (
        validators.validator_for(schema, default=None)
        if dialect is not None
        else validators.validator_for(schema)
    )
    if cls is None:
        raise BadSchema(
            f"the output schema's $schema {dialect!r} is not a JSON Schema "
            "dialect roost knows (drafts 3, 4, 6, 7, 2019-09, 2020-12)"
        )
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise BadSchema(
            f"the output schema is not a valid JSON Schema: at {exc.json_path}: {_short(exc.message)}"
        ) from None
    outside = next((ref for ref in _refs(schema) if not ref.startswith("#")), None)
    if outside is not None:
        raise BadSchema(
            f"the output schema's $ref {outside!r} points outside it: roost "
            "resolves only references within the schema (#/...)"
        )
    return schema


def _refs(value: Any) -> list[str]:
    """Every `$ref` string in a schema, at any depth."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                found.append(ref)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def extract(text: str) -> tuple[Any, str | None]:
    """(the value, None), or (None, why the answer holds no JSON value)."""
    whole = text.strip()
    if not whole:
        return None, "the answer is empty: it must be the JSON value"
    try:
        return json.loads(whole), None
    except ValueError:
        pass
    blocks = _FENCE.findall(whole)
    if len(blocks) > 1:
        return None, (
            f"the answer holds {len(blocks)} ```json blocks: give the value alone, or in exactly one block"
        )
    if not blocks:
        return None, ("the answer is not JSON: give the JSON value alone, or in one ```json block")
    try:
        return json.loads(blocks[0]), None
    except ValueError as exc:
        return None, f"the ```json block is not valid JSON: {exc}"


def errors_of(schema: dict[str, Any], value: Any) -> list[str]:
    """Every way `value` breaks `schema`, one line each (`at $.path: message`), in path order."""
    from jsonschema import validators
    from referencing import Registry

    cls = validators.validator_for(schema)
    # An empty registry: a reference is resolved within the schema, never fetched.
    found = sorted(
        cls(schema, registry=Registry()).iter_errors(value),
        key=lambda e: ([str(p) for p in e.absolute_path], e.message),
    )
    return [f"at {e.json_path}: {_short(e.message)}" for e in found]


def check(schema: dict[str, Any], text: str) -> tuple[Any, list[str]]:
    """The run's final `text` against `schema`: (the value, []) when it is valid, else
    (None, the errors)."""
    value, problem = extract(text)
    if problem is not None:
        return None, [problem]
    errors = errors_of(schema, value)
    return (None, errors) if errors else (value, [])


def listing(errors: list[str]) -> str:
    shown = [f"- {e}" for e in errors[:ERRORS_SHOWN]]
    if len(errors) > ERRORS_SHOWN:
        shown.append(f"- … {len(errors) - ERRORS_SHOWN} more")
    return "\n".join(shown)


def task_note(schema: dict[str, Any]) -> str:
    """What roost adds to a task whose job has an output schema (README quotes it)."""
    return (
        "\n\n[roost] This job's final answer must be a JSON value valid against the JSON "
        "Schema below: answer with the JSON value alone (or in a single ```json block), "
        "with no other text. roost checks it when the run ends. This note comes from "
        "roost, the supervisor.\n"
        f"```json\n{json.dumps(schema, ensure_ascii=False)}\n```"
    )


def repair_note(errors: list[str], left: int) -> str:
    """The framed note an invalid answer gets (`left`: further notes after this one)."""
    more = "" if left <= 0 else f" ({left} more chance{'s' if left != 1 else ''} after this)"
    return (
        "[roost] Your final answer is not valid against this job's output schema:\n"
        f"{listing(errors)}\n"
        "This note comes from roost, the supervisor, not from the user. Answer again with "
        "only the corrected JSON value (or a single ```json block); if this answer is "
        f"invalid too, the job fails{more}."
    )


def failure(errors: list[str]) -> str:
    """The job's error when its answer is still invalid after the repairs."""
    return "the final answer is not valid against the output schema:\n" + listing(errors)


def event_fields(value: Any) -> dict[str, Any]:
    """A `job.result` event's fields: `size` (bytes of compact JSON), `large`, and the
    `result` itself unless it is over EVENT_RESULT_MAX (then null)."""
    size = len(compact(value).encode("utf-8"))
    large = size > EVENT_RESULT_MAX
    return {"result": None if large else value, "size": size, "large": large}


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def _type_name(value: Any) -> str:
    return {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
        int: "a number",
        float: "a number",
    }.get(type(value), "?")
