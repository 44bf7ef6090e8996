"""End to end, the real pi and the scripted model: the README's quick start, as written.
Every `roost` line of its Quick start section runs in order (but `roost view` and `roost
web`, which take the terminal, and `roost demo`), each must exit 0, and the outputs are
what the README says they are. The first-steps guide's quick start uses the same lines."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from kit.lab import Lab

from roost.fakellm import FakeLLM, last_user_contains, text

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("real_pi")]

REPO = Path(__file__).resolve().parents[2]
INTERACTIVE = {"view", "web", "demo"}


def commands(page: Path, section: str) -> list[str]:
    """The `roost ...` lines of the ```sh blocks in `section` of `page`, comments cut."""
    body = page.read_text(encoding="utf-8").split(section + "\n", 1)[1]
    body = re.split(r"\n## ", body, maxsplit=1)[0]
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", body, flags=re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "roost":
                lines.append(shlex.join(words))
    return lines


def test_the_readme_quick_start_runs_as_written(make_lab, llm: FakeLLM) -> None:
    lines = commands(REPO / "README.md", "## Quick start")
    assert any(line.startswith("roost run ") for line in lines), lines
    llm.add(last_user_contains("List the files here"), text("A small project: a README and a src/ folder."))
    llm.add(last_user_contains("Now write that"), text("Wrote NOTES.md."))
    lab: Lab = make_lab(llm=llm)
    outputs: dict[str, list[str]] = {}
    for line in lines:
        words = shlex.split(line)[1:]
        if words[0] in INTERACTIVE:
            continue
        proc = lab.roost(*words, timeout=150)
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr, lab.diagnostics())
        outputs.setdefault(words[0], []).append(proc.stdout)
        if words[0] == "run":
            assert re.fullmatch(r"[0-9a-f]{8}\n", proc.stdout), proc.stdout
        elif words[0] == "wait":
            assert proc.stdout == "done\n", proc.stdout  # "prints done"
        elif words[0] == "reply":
            assert proc.stdout.strip() in ("started", "delivered"), proc.stdout
    assert {"doctor", "run", "wait", "ls", "logs", "reply", "show"} <= set(outputs), outputs
    assert "hello" in outputs["ls"][0] and "A small project" in outputs["ls"][0]
    assert "A small project" in outputs["logs"][0]
    assert "Wrote NOTES.md." in outputs["show"][0]
    assert any(line.startswith("roost view") for line in lines)
    # The guide's quick start is the same commands.
    guide = commands(REPO / "docs" / "guides" / "first-steps.md", "## Quick start")
    assert guide and set(guide) <= set(lines), sorted(set(guide) - set(lines))
