"""`roost agents ls|show|new|check`: named agent definitions."""

from __future__ import annotations

import os
import sys

import click

from roost.cli.common import fail, print_json, usage_error
from roost.cli.groups import Group


@click.group(cls=Group, default="ls")
def agents() -> None:
    """Named agent definitions (TOML): list, show, create, check."""


@agents.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option(
    "--cwd",
    type=click.Path(file_okay=False),
    help="For jobs in this directory (its project agents, when projectAgents is on; default: .).",
)
def agents_ls(as_json: bool, cwd: str | None) -> None:
    """The agents a job here can use: name, source (builtin|user|project), description."""
    from roost.definitions import store

    merged = store.load(cwd or os.getcwd())
    rows = store.to_json_list(merged)
    if as_json:
        print_json(rows)
        return
    from roost.display.output import field  # a project file's text: controls shown, not run

    width = max(len(r["name"]) for r in rows) if rows else 4
    click.echo(f"{'NAME':<{width}}  SOURCE   DESCRIPTION")
    for r in rows:
        click.echo(f"{field(r['name']):<{width}}  {r['source']:<7}  {field(r['description'])}")
    for problem in merged.errors:
        click.echo(f"roost: {field(problem)}", err=True)


@agents.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the definition as JSON.")
@click.option("--cwd", type=click.Path(file_okay=False), help="For jobs in this directory (default: .).")
def agents_show(name: str, as_json: bool, cwd: str | None) -> None:
    """The merged definition NAME (what `roost run --agent NAME` would use)."""
    from roost.definitions import rules, store

    merged = store.load(cwd or os.getcwd())
    defn = merged.agents.get(name)
    if defn is None:
        usage_error(rules.unknown_agent(name, merged))
    if as_json:
        print_json(defn.to_json())
        return
    from roost.display.output import escaped, field

    click.echo(field(f"# {defn.name} ({defn.source}{': ' + defn.path if defn.path else ''})"))
    click.echo(
        field(
            f"# tools: {', '.join(defn.effective_tools())}"
            + (" (the defaults)" if defn.tools is None else "")
        )
    )
    import tomli_w

    click.echo(escaped(tomli_w.dumps(defn.body(), multiline_strings=True)), nl=False)


@agents.command("new")
@click.argument("name")
@click.option("--from", "base", metavar="NAME", help="Start from this agent's definition.")
def agents_new(name: str, base: str | None) -> None:
    """Write <agent dir>/roost/agents/NAME.toml to edit (with comments); prints its path."""
    from roost.definitions import rules, store

    if not rules.NAME.match(name):
        usage_error(f"bad agent name {name!r}: use 1-40 of a-z 0-9 _ - (starting with a letter or digit)")
    start_from = None
    if base is not None:
        merged = store.load(os.getcwd())
        start_from = merged.agents.get(base)
        if start_from is None:
            usage_error(rules.unknown_agent(base, merged))
    try:
        path = store.new_file(name, start_from)
    except FileExistsError:
        fail(f"{store.user_dir() / (name + '.toml')} exists; edit it or remove it first")
    except OSError as exc:
        fail(f"cannot write the definition: {exc}")
    store.write_catalog_cache()
    click.echo(path)


@agents.command("check")
@click.option(
    "--cwd",
    type=click.Path(file_okay=False),
    help="Also the project definitions of this directory (default: .).",
)
def agents_check(cwd: str | None) -> None:
    """Validate every definition (user, and project ones here); errors with file and line,
    and each model pi does not know."""
    from roost.config import load_settings
    from roost.definitions import store

    directory = cwd or os.getcwd()
    # Project files are checked even when projectAgents is off: a repository's author
    # wants to know, and nothing is used by checking.
    merged = store.load(directory, allow_project=True)
    from roost.cli.doctor.model import definition_problems

    errors = merged.errors + definition_problems(merged.agents)  # a model pi does not know
    from roost.display.output import field

    for problem in errors:
        click.echo(field(problem), err=True)
    store.write_catalog_cache()
    if errors:
        sys.exit(1)
    note = "" if load_settings().projectAgents else " (project agents are off: projectAgents)"
    click.echo(f"ok: {len(merged.agents)} agents{note}")


def register(group: click.Group) -> None:
    group.add_command(agents)
