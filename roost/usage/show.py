"""How usage looks in the terminal: `roost ls`'s cost cells, `roost show`'s usage block,
`roost usage`'s table. The numbers come from JobRow `usage` as they are."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (`roost ls` imports this)
if TYPE_CHECKING:
    from typing import Any


def format_cost(cost: float | None) -> str:
    """`$0.42`, `$0.0042` under a cent, `<$0.0001` below that (never a `$0.0000` that reads
    as free); `—` when there are no prices."""
    if cost is None:
        return "—"
    if 0 < cost < 0.0001:
        return "<$0.0001"
    if 0 < cost < 0.01:
        return f"${cost:.4f}"
    return f"${cost:.2f}"


def format_tokens(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    if count >= 10_000:
        return f"{count / 1000:.0f}k"
    if count >= 1000:
        return f"{count / 1000:.1f}k"
    return str(count)


def cost_cell(row: dict[str, Any]) -> str:
    """`$0.42`; `—` without prices; the tokens when only tokens are counted."""
    usage = row.get("usage") or {}
    if row.get("kind") == "shell":
        return ""
    if usage.get("cost") is None:
        tokens = sum(int(usage.get(k) or 0) for k in ("input", "output", "cacheRead", "cacheWrite"))
        return f"— {format_tokens(tokens)}t" if tokens else "—"
    return format_cost(usage.get("cost"))


def tree_cell(row: dict[str, Any]) -> str:
    """The tree's total, on a root's row (`roost ls --tree`)."""
    usage = row.get("usage") or {}
    if row.get("depth") or row.get("parentSession") or row.get("kind") == "shell":
        return ""
    if usage.get("treeCost") is None:
        return "—"
    text = format_cost(usage.get("treeCost"))
    if usage.get("treeBudget") is not None:
        text += f"/{format_cost(usage['treeBudget'])}"
    return text


def usage_lines(row: dict[str, Any]) -> list[tuple[str, str]]:
    """`roost show`'s usage block: (label, value) pairs."""
    usage = row.get("usage")
    if not usage or row.get("kind") == "shell":
        return []
    lines = [
        (
            "tokens",
            f"{usage.get('input', 0)} in, {usage.get('output', 0)} out, "
            f"{usage.get('cacheRead', 0)} cache read, "
            f"{usage.get('cacheWrite', 0)} cache write",
        ),
        (
            "requests",
            str(usage.get("requests", 0))
            + (f" of {usage['maxTurns']}" if usage.get("maxTurns") is not None else ""),
        ),
        (
            "cost",
            format_cost(usage.get("cost"))
            + ("" if usage.get("cost") is not None else " (the model has no prices: tokens only)"),
        ),
        ("tree cost", format_cost(usage.get("treeCost"))),
    ]
    limits = []
    if usage.get("budget") is not None:
        limits.append(format_cost(usage["budget"]))
    if usage.get("budgetTokens") is not None:
        limits.append(f"{usage['budgetTokens']} tokens")
    if usage.get("treeBudget") is not None:
        limits.append(f"tree {format_cost(usage['treeBudget'])}")
    lines.append(("budget", ", ".join(limits) if limits else "none"))
    return lines
