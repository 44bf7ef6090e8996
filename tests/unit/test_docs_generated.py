"""The documentation stays true to the code: the generated reference pages (the command
line, roost.json, the protocol) are what scripts/gen_docs.py makes from the code now, the
hand-written configuration table names every setting, and the README stays short with
links that lead somewhere. When a generated page is stale, the failure says the command
that rewrites it."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path
from types import ModuleType

from roost.config import Settings

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_pages_are_up_to_date() -> None:
    gen = generator()
    stale = [str(path.relative_to(REPO)) for path in gen.stale()]
    assert not stale, (
        f"stale generated docs: {', '.join(stale)}. Regenerate them with "
        f"`{gen.REGENERATE}` and commit the result."
    )


def test_the_generated_pages_cover_every_command_setting_and_op() -> None:
    import click

    from roost.cli.main import cli
    from roost.wire import protocol

    pages = generator().generate()
    cli_page = pages[DOCS / "reference" / "cli.md"]
    ctx = click.Context(cli, info_name="roost")
    for name in cli.list_commands(ctx):
        assert f"## roost {name}\n" in cli_page, name
    config_page = pages[DOCS / "reference" / "configuration.md"]
    for spec in dataclasses.fields(Settings):
        assert f"| `{spec.name}` |" in config_page, spec.name
    protocol_page = pages[DOCS / "reference" / "protocol.md"]
    for name in [*protocol.DAEMON_OPS, *protocol.PUSHED_EVENTS, *protocol.EVENT_TYPES]:
        assert f"| `{name}` |" in protocol_page, name


def test_the_messaging_guide_s_settings_table_names_every_setting() -> None:
    text = (DOCS / "guides" / "messaging.md").read_text(encoding="utf-8")
    rows = text.split("| key | default | meaning |", 1)[1].split("\n\n", 1)[0]
    documented = {key for line in rows.splitlines()[2:] for key in re.findall(r"`(\w+)`", line.split("|")[1])}
    fields = {spec.name for spec in dataclasses.fields(Settings)}
    assert documented == fields, (
        f"only in the guide: {sorted(documented - fields)}; "
        f"only in roost.config.Settings: {sorted(fields - documented)}"
    )


def slug(title: str) -> str:
    """A heading's anchor, as MkDocs' toc makes it (and GitHub, for these headings)."""
    title = re.sub(r"<[^>]+>", "", title.replace("`", ""))
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower())


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            found.add(slug(m.group(1)))
    return found


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    readme = REPO / "README.md"
    text = readme.read_text(encoding="utf-8")
    assert text.count("\n") <= 250
    for section in ("## Two commands on a fresh machine", "## Quick start", "## Documentation"):
        assert section in text
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        where = (REPO / path) if path else readme
        if not where.exists() or (anchor and anchor not in anchors(where)):
            broken.append(target)
    assert not broken, broken
