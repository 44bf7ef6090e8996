"""The documented JSON shapes against real output (docs/reference/json.md, mailbox.md):
the JobRow table's keys and types against a real `roost ls --json` row, the detail fields
`roost show --json` adds, `roost daemon status --json`, and a mailbox item as stored and as
`roost mailbox --json` prints it. A key added, removed or retyped in the code without the
docs (or the other way round) fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from kit.lab import Lab

pytestmark = pytest.mark.timeout(180)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference"
JSON_PAGE = DOCS / "json.md"
MAILBOX_PAGE = DOCS / "mailbox.md"


def table(page: Path, header: str) -> list[tuple[str, str]]:
    """(first cell, second cell) of each row of the Markdown table whose header row starts
    with `| header |`."""
    lines = page.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows.append((cells[0], cells[1]))
    return rows


def accepts(documented: str, value: Any) -> bool:
    """Is `value` of the documented type (the JSON page's words: string, bool, object, …)?"""
    if documented.startswith("any JSON"):
        return True
    if value is None:
        return "null" in documented
    if isinstance(value, bool):
        return "bool" in documented
    if isinstance(value, str):
        return "string" in documented or documented.startswith('`"')
    if isinstance(value, int | float):
        return "int" in documented or "number" in documented
    if isinstance(value, dict):
        return "object" in documented or documented.startswith("`{")
    if isinstance(value, list):
        return "list" in documented
    return False


def job_row_spec() -> dict[str, str]:
    spec: dict[str, str] = {}
    for keys, kind in table(JSON_PAGE, "JobRow key"):
        for key in re.findall(r"`(\w+)`", keys):
            spec[key] = kind
    return spec


def signature(text: str) -> dict[str, str]:
    """`{"running": bool, "pid": int|null}` as the page writes it: key -> type words."""
    return dict(re.findall(r'"(\w+)": ([\w|]+)', text))


@pytest.fixture
def lab(fake_pi_env: Lab) -> Lab:
    return fake_pi_env


def test_job_rows_have_the_documented_keys_and_types(lab: Lab) -> None:
    job = lab.run("DOCS-ROW write the docs", name="docs-row")
    lab.wait(job)
    spec = job_row_spec()
    row = lab.row(job)
    assert set(row) == set(spec), (
        f"keys only in the output: {sorted(set(row) - set(spec))}; "
        f"only in docs/reference/json.md: {sorted(set(spec) - set(row))}"
    )
    wrong = {key: (spec[key], row[key]) for key in spec if not accepts(spec[key], row[key])}
    assert not wrong, wrong
    # `roost ls --tree --json` adds `depth`, and `roost show --json` the detail fields
    # the page lists before the table.
    assert set(lab.ls(tree=True)[0]) == set(spec) | {"depth"}
    text = JSON_PAGE.read_text(encoding="utf-8")
    detail = text.split("extra detail fields (", 1)[1].split("| JobRow key |", 1)[0]
    named = {
        "task",
        "command",
        "model",
        "thinking",
        "error",
        "exitCode",
        "worker",
        "dir",
        "mailbox",
        "depth",
        "agentDefinition",
        "environment",
        "outputSchema",
    }
    assert all(f"`{key}`" in detail for key in named)
    shown = lab.cli_json("show", job, "--json")
    assert set(shown) >= set(spec) | named, sorted(set(spec) | named - set(shown))
    assert set(shown["worker"]) == {"pid", "state", "crashes"}


def test_daemon_status_json_is_as_documented(lab: Lab) -> None:
    lab.roost_ok("daemon", "start")
    text = JSON_PAGE.read_text(encoding="utf-8")
    documented = signature(text.split("`roost daemon status --json` →", 1)[1].split("}`", 1)[0])
    assert documented, "no daemon status signature in docs/reference/json.md"
    status = lab.cli_json("daemon", "status", "--json")
    assert set(status) == set(documented), (sorted(status), sorted(documented))
    kinds = {"bool": bool, "int": int, "str": str, "null": type(None)}
    for key, words in documented.items():
        allowed = tuple(kinds[word] for word in words.split("|"))
        assert isinstance(status[key], allowed) and not (
            isinstance(status[key], bool) and bool not in allowed
        ), (key, status[key])


def test_a_mailbox_item_is_as_documented(lab: Lab) -> None:
    job = lab.run("DOCS-BOX a task", name="docs-box")
    lab.wait(job)
    own = [re.findall(r"`(\w+)`", key)[0] for key, _ in table(MAILBOX_PAGE, "key") if key != "extras"]
    assert own == ["seq", "id", "kind", "from", "text", "created"]
    # The page's example line has the documented keys, in order, then the report's extras.
    text = MAILBOX_PAGE.read_text(encoding="utf-8")
    example = json.loads(text.split("## Item format", 1)[1].split("```json\n", 1)[1].split("```", 1)[0])
    assert [key for key in example if key in own] == own
    # A stored item: one line, the documented keys in that order, and no other but extras.
    box = Path(lab.show(job)["mailbox"])
    stored = sorted((box / "cur").glob("*.json"))
    assert stored, list(box.rglob("*"))
    line = stored[0].read_text(encoding="utf-8")
    assert line.endswith("\n") and line.count("\n") == 1
    item = json.loads(line)
    extras = re.findall(r"`(\w+)`", dict(table(MAILBOX_PAGE, "key"))["extras"])
    undocumented = [
        key for key in item if key not in own and key not in extras and key != "cause"
    ]  # a reply's cause: see the JSON page's mailbox --json
    assert not undocumented, (
        f"a stored item's keys {undocumented} are not in docs/reference/mailbox.md's Item format"
    )
    assert [key for key in item if key in own] == own, list(item)
    assert item["kind"] == "reply" and item["from"] is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", item["created"])
    # `roost mailbox --json`: the documented keys, the rest under `extra`.
    printed = lab.cli_json("mailbox", job, "--all", "--json")
    page = JSON_PAGE.read_text(encoding="utf-8").split("`roost mailbox JOB [--all] --json` →", 1)[1]
    keys = re.findall(r'[{,]\s*"(\w+)"', page.split("}`", 1)[0])  # keys, not values
    assert keys == ["state", "seq", "kind", "from", "text", "created", "extra"], keys
    assert set(printed[0]) == set(keys), (sorted(printed[0]), keys)
