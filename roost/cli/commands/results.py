"""Structured results on the command line: `roost run --output-schema FILE.json` (its
option and the file read here) and `roost result JOB [--json]` (README: Structured results)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from roost.cli.common import REFUSED, daemon, fail, usage_error

F = TypeVar("F", bound=Callable[..., Any])


def schema_option(func: F) -> F:
    """`roost run --output-schema FILE.json`."""
    return click.option(
        "--output-schema",
        "output_schema",
        type=click.Path(dir_okay=False),
        default=None,
        help="A JSON Schema file: the job's final answer must be JSON valid against it "
        "(roost result JOB prints it).",
    )(func)


def read_schema(path: str) -> dict[str, Any]:
    """The schema in `path` as JSON; one line and a usage error when it cannot be read.
    roostd checks that it is a usable JSON Schema (roost.job.results)."""
    import json

    try:
        schema = json.loads(Path(path).read_bytes().decode("utf-8"))
    except OSError as exc:
        usage_error(f"cannot read the output schema {path}: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        usage_error(f"the output schema {path} is not UTF-8 text ({exc.reason} at byte {exc.start})")
    except ValueError as exc:
        usage_error(f"the output schema {path} is not JSON: {exc}")
    if not isinstance(schema, dict):
        usage_error(f"the output schema {path} must hold a JSON object (a JSON Schema)")
    return schema


@click.command("result")
@click.argument("job")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON, as it is, on one line.")
def result(job: str, as_json: bool) -> None:
    """Print JOB's structured result: its last final answer that was valid against its
    output schema (roost run --output-schema). Exit 1 when it has none."""
    with daemon() as client:
        row = client.request("show", job=job)["job"]
    value = row.get("result")
    if value is None:
        if row.get("outputSchema") is None:
            fail(
                f"job {row['id']} has no output schema, so no structured result "
                "(roost run --output-schema FILE.json)",
                REFUSED,
            )
        fail(f"job {row['id']} has no valid result yet (state: {row.get('state')})", REFUSED)
    from roost.display import output

    if as_json:  # one line, for a pipe (jq, a script)
        click.echo(output.json_text(value, indent=None, compact=True))
        return

    if isinstance(value, str):  # a JSON string: its text, as a person reads it
        click.echo(output.visible(value))
    else:
        click.echo(output.json_text(value))


def register(group: click.Group) -> None:
    group.add_command(result)
