"""Agent definition files: where they live, loading them, writing new ones.

User-level: `<pi agent dir>/roost/agents/<name>.toml` (next to roost.json).
Project: `<repo>/.pi/roost/agents/<name>.toml`, where `<repo>` is the nearest ancestor of
the job's directory holding `.git`, reached through folders the user may trust only
(`roost.host.trusted`: else there is no project); read only when the user-level
`projectAgents` is true. The rules are in `roost.definitions.rules`.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from roost.definitions.rules import (
    Definition,
    DefinitionError,
    Merged,
    catalog,
    key_line,
    merge,
    parse,
    render,
)
from roost.host import paths
from roost.host import trusted as trust


def user_dir() -> Path:
    return paths.agent_dir() / "roost" / "agents"


def catalog_cache_path() -> Path:
    """The agent list a foreground pi's roost_spawn shows (user + builtin agents)."""
    return paths.agent_dir() / "roost" / "agents-catalog.txt"


def repo_root(cwd: str | os.PathLike[str]) -> Path | None:
    """The nearest folder at or above `cwd` that holds `.git` (none up to /: `cwd`
    itself), climbing only through folders the user may trust (`roost.host.trusted`).
    None when the climb meets a folder another user controls before it finds one: a
    `.git` planted in /tmp, or in any folder of another user, makes no project."""
    start = Path(os.path.realpath(cwd))  # the folders that hold it, not a link's names
    for directory in (start, *start.parents):
        if not trust.trusted_dir(directory):
            return None
        try:  # a `.git` another user planted (in /tmp, say) marks no repository
            if trust.trusted_owner(os.lstat(directory / ".git").st_uid):
                return directory
        except OSError:
            pass
    return start


def project_dir(cwd: str | os.PathLike[str]) -> Path | None:
    """`<repo>/.pi/roost/agents` when the repository is the user's to trust and every
    folder on the way is a real folder (no symlink) the user may trust; else None."""
    root = repo_root(cwd)
    if root is None:
        return None
    directory = root
    for part in (".pi", "roost", "agents"):
        directory = directory / part
        try:
            st = os.lstat(directory)
        except OSError:
            return None
        if trust.dir_problem(st) is not None:  # a symlink is "not a directory" here
            return None
    return directory


DEFINITION_MAX = 256 * 1024
"""The largest definition file read (its prompt may hold 20,000 characters)."""


def load_dir(directory: Path, source: str) -> tuple[list[Definition], list[DefinitionError]]:
    """The definitions in `directory`. Each file is read only when it is a regular file
    the user may trust, up to DEFINITION_MAX (a FIFO or a device is refused, never read);
    a project's files are never read through a symlink."""
    defs: list[Definition] = []
    errors: list[DefinitionError] = []
    try:
        files = sorted(p for p in directory.iterdir() if p.suffix == ".toml")
    except (FileNotFoundError, NotADirectoryError):
        return defs, errors
    except OSError as exc:
        return defs, [DefinitionError(str(directory), None, f"cannot list: {exc}")]
    for path in files:
        try:
            text = trust.read_text(path, DEFINITION_MAX, follow=source != "project")
        except trust.UntrustedFile as exc:
            errors.append(DefinitionError(str(path), None, str(exc).removeprefix(f"{path}: ")))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(DefinitionError(str(path), None, f"cannot read: {exc}"))
            continue
        defn, problems = parse(text, path.stem, source, str(path))
        if defn is not None and isinstance(defn.output_schema, str):
            defn = _schema_file(defn, path, text, source, problems)
        errors.extend(problems)
        if defn is not None:
            defs.append(defn)
    return defs, errors


def _schema_file(
    defn: Definition, path: Path, text: str, source: str, problems: list[DefinitionError]
) -> Definition | None:
    """`defn` with the schema its `output_schema` names read in (a JSON file beside the
    definition, read like the definition itself); None, with the problem, when it cannot be."""
    import json

    from roost.job.results import BadSchema, check_schema

    assert isinstance(defn.output_schema, str)
    target = path.parent / defn.output_schema
    try:
        schema = check_schema(json.loads(trust.read_text(target, DEFINITION_MAX, follow=source != "project")))
    except (trust.UntrustedFile, OSError, UnicodeDecodeError, ValueError) as exc:
        why = str(exc).removeprefix(f"{target}: ") if not isinstance(exc, BadSchema) else str(exc)
        problems.append(
            DefinitionError(
                str(path), key_line(text, "output_schema"), f"output_schema {defn.output_schema!r}: {why}"
            )
        )
        return None
    return replace(defn, output_schema=schema)


def load(cwd: str | os.PathLike[str] | None, allow_project: bool | None = None) -> Merged:
    """Every usable definition for a job in `cwd` (None: user and builtin only)."""
    from roost.config import load_settings

    if allow_project is None:
        allow_project = load_settings().projectAgents
    user, errors = load_dir(user_dir(), "user")
    project: list[Definition] = []
    directory = project_dir(cwd) if cwd is not None and allow_project else None
    if directory is not None:
        project, project_errors = load_dir(directory, "project")
        errors += project_errors
    return merge(
        user,
        project,
        allow_project and cwd is not None,
        [str(e) for e in errors],
        max_thinking=load_settings().projectAgentMaxThinking,
    )


def write_catalog_cache() -> str:
    """Refresh the cached list a foreground pi reads at start (user + builtin agents)."""
    text = catalog(load(None, allow_project=False))
    path = catalog_cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
    except OSError:
        pass  # a cache: the extension shows no list without it
    return text


def new_file(name: str, base: Definition | None) -> Path:
    """Write `<user dir>/<name>.toml` from `base` (or a stub); refuses to overwrite."""
    text = render(base or Definition(name=name, source="user"), name)
    path = user_dir() / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "x", encoding="utf-8") as handle:
        handle.write(text)
    return path


def to_json_list(merged: Merged) -> list[dict[str, Any]]:
    return [
        {"name": d.name, "source": d.source, "description": d.description, "path": d.path}
        for d in (merged.agents[n] for n in merged.names())
    ]
