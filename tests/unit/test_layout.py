"""The layout rules of docs/architecture.md, checked on the source (ast, nothing imported):
no cycles between roost's packages, the worker never imports the daemon, `agents/` holds
pure rules, and the constants the TypeScript extension keeps equal Python's."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from roost import PROTOCOL_VERSION
from roost.protocol import CUSTOM_TYPE, NOTE_TYPE
from roost.states import EXIT_FATAL

ROOT = Path(__file__).resolve().parents[2] / "roost"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every roost module `path` imports, anywhere in it (inside functions and
    TYPE_CHECKING blocks too: a cycle held open by a late import is still a cycle)."""
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "roost")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if base == "roost":  # `from roost import paths`: the module is roost.paths
                found.update(f"roost.{a.name}" for a in node.names)
            elif base.split(".")[0] == "roost":
                found.add(base)
    return found


def package_of(module: str) -> str:
    """roost.supervise.handlers.jobs -> roost.supervise; roost.paths -> roost.paths."""
    return ".".join(module.split(".")[:2])


def module_graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in ROOT.rglob("*.py")}


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, imported in module_graph().items():
        for target in imported:
            if package_of(target) != package_of(module) and package_of(target) != "roost.__version__":
                graph[package_of(module)].add(package_of(target))
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_package_graph_has_no_cycles() -> None:
    graph = package_graph()
    assert "roost.supervise" in graph and "roost.worker" in graph  # the walk found the code
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph) or [])}"


def test_a_cycle_is_found_when_there_is_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_the_worker_never_imports_the_daemon() -> None:
    offenders = {m: sorted(t for t in imported if t.startswith("roost.supervise"))
                 for m, imported in module_graph().items() if m.startswith("roost.worker")}
    assert not {m: t for m, t in offenders.items() if t}


def test_agents_holds_pure_rules() -> None:
    """agents/ imports no roost I/O layer (and no I/O module of the standard library)."""
    allowed = {"roost.states", "roost.protocol", "roost.config", "roost.errors", "roost.usage"}
    io_modules = {"os", "socket", "subprocess", "asyncio", "shutil", "pathlib"}
    for path in (ROOT / "agents").glob("*.py"):
        imported = imports_of(path)
        assert {package_of(m) for m in imported if not m.startswith("roost.agents")} <= allowed, path
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names}
        names |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and not n.level}
        assert not names & io_modules, (path, names & io_modules)


def test_the_extension_keeps_the_same_constants() -> None:
    source = (ROOT / "extension" / "roost.ts").read_text(encoding="utf-8")

    def const(name: str) -> str:
        match = re.search(rf"^const {name} = (.+);$", source, re.M)
        assert match, f"roost.ts has no const {name}"
        return match.group(1)

    assert const("CUSTOM_TYPE") == f'"{CUSTOM_TYPE}"'
    assert const("NOTE_TYPE") == f'"{NOTE_TYPE}"'
    assert const("PROTOCOL") == str(PROTOCOL_VERSION)
    assert const("EXIT_FATAL") == str(EXIT_FATAL)


def test_the_cli_never_imports_the_daemon() -> None:
    """The CLI is a client: it runs roostd as a program (`python -m roost.supervise`) and
    shares with it only what sits below both (docs/architecture.md)."""
    offenders = {m: sorted(t for t in imported if t.startswith("roost.supervise"))
                 for m, imported in module_graph().items() if m.startswith("roost.cli")}
    assert "roost.cli.main" in offenders  # the walk found the CLI
    assert not {m: t for m, t in offenders.items() if t}


def submodule_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that `path` imports anywhere (`from roost.cli import views`
    is roost.cli.views, not the package)."""
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    found.add(f"{base}.{alias.name}")
                elif base in modules:
                    found.add(base)
    return found - {module_name(path)}


def test_the_cli_modules_have_no_cycle() -> None:
    """Inside roost/cli too (a late import inside a function counts): a command module
    imports `common` and the modules that draw, never `main` or another command."""
    paths = {module_name(p): p for p in (ROOT / "cli").rglob("*.py")}
    graph = {m: submodule_imports(p, set(paths)) for m, p in paths.items()}
    assert "roost.cli.fit" in graph["roost.cli.views"]  # `from roost.cli import fit` resolved
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph) or [])}"


MAX_LINES = 500
OVER_MAX_LINES = {"worker/main.py"}
"""Modules still over MAX_LINES, each to be split (remove it here once it is)."""


def test_no_module_is_over_500_lines() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in ROOT.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > MAX_LINES and p not in OVER_MAX_LINES} == {}
    assert {p: sizes.get(p) for p in OVER_MAX_LINES if sizes.get(p, 0) <= MAX_LINES} == {}, \
        "split: remove it from OVER_MAX_LINES"
