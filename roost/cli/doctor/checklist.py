"""The doctor's checklist: each check's name, level (`ok`, `warn` or `fail`), detail and fix,
and the report's lines on a terminal or a pipe (`render`: a mark, the name, the detail, and
`fix:` under each problem)."""

from __future__ import annotations

from typing import Any


# Plain classes, not dataclasses: @dataclass costs ~2 ms each on `roost --version`'s path.
class Check:
    __slots__ = ("detail", "fix", "level", "name")

    def __init__(self, name: str, level: str, detail: str, fix: str | None = None) -> None:
        self.name = name
        self.level = level  # "ok" | "warn" | "fail"
        self.detail = detail
        self.fix = fix

    @property
    def ok(self) -> bool:
        return self.level != "fail"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "level": self.level, "detail": self.detail, "fix": self.fix}


class Report:
    __slots__ = ("checks", "features", "pi")

    def __init__(self) -> None:
        self.checks: list[Check] = []
        self.pi: dict[str, Any] | None = None  # what is known of the pi, for --json
        self.features: list[str] = []

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def add(self, name: str, level: str, detail: str, fix: str | None = None) -> None:
        self.checks.append(Check(name, level, detail, fix))

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [c.as_json() for c in self.checks],
            "pi": self.pi,
            "features": self.features,
        }


MARKS = {True: {"ok": "✓", "warn": "!", "fail": "✗"}, False: {"ok": "ok", "warn": "warn", "fail": "FAIL"}}


def render(report: Report, tty: bool) -> list[str]:
    """One line per check (a mark, its name, the detail), and `fix:` under each problem."""
    import click

    from roost.display.output import field  # a detail may quote pi's or a model's words

    marks = MARKS[tty]
    width = max(len(check.name) for check in report.checks)
    mark_width = max(len(mark) for mark in marks.values())
    colours = {"ok": "green", "warn": "yellow", "fail": "red"}
    lines = []
    for check in report.checks:
        mark = marks[check.level].ljust(mark_width)
        if tty:
            mark = click.style(mark, fg=colours[check.level], bold=True)
        lines.append(f"{mark} {check.name.ljust(width)}  {field(check.detail)}")
        if check.fix and check.level != "ok":
            lines.append(f"{' ' * mark_width} {' ' * width}  fix: {field(check.fix)}")
    failed = sum(1 for c in report.checks if c.level == "fail")
    warned = sum(1 for c in report.checks if c.level == "warn")
    if failed:
        lines.append(
            f"{failed} problem{'s' * (failed != 1)}"
            + (f", {warned} warning{'s' * (warned != 1)}" if warned else "")
        )
    else:
        lines.append("all good" + (f" ({warned} warning{'s' * (warned != 1)})" if warned else ""))
    return lines
