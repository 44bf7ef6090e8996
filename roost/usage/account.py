"""A job's usage: tokens and cost as pi recorded them.

pi puts `usage` on every assistant message (`{input, output, cacheRead, cacheWrite,
totalTokens, cost: {..., total}}`, cost in the currency of the model's prices, per million
tokens in pi's registry or a `models.json` `cost`). pi 1.x also records usage on tool
results, compactions, branch summaries and `usage` entries (cache warming); its
`get_session_stats` sums all of them over the whole file. On both lines the job's figures
are the sum over its session file, so reading the file again gives the same figures, never
twice the figures.

`cost` is None while nothing was priced: a model without prices counts tokens only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TOKEN_KEYS = ("input", "output", "cacheRead", "cacheWrite")


def _num(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if value == value and value >= 0 else 0.0  # NaN, negatives: 0


@dataclass
class Usage:
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    cost: float = 0.0
    priced: bool = False  # some usage had a cost: the model has prices
    requests: int = 0  # model requests (assistant messages)

    @property
    def tokens(self) -> int:
        return self.input + self.output + self.cacheRead + self.cacheWrite

    def add(self, usage: Any, request: bool = False) -> None:
        """Add one pi `usage` object (malformed parts count as 0)."""
        if request:
            self.requests += 1
        if not isinstance(usage, dict):
            return
        self.input += int(_num(usage.get("input")))
        self.output += int(_num(usage.get("output")))
        self.cacheRead += int(_num(usage.get("cacheRead")))
        self.cacheWrite += int(_num(usage.get("cacheWrite")))
        cost = usage.get("cost")
        total = _num(cost.get("total")) if isinstance(cost, dict) else 0.0
        if total > 0:
            self.cost += total
            self.priced = True

    def add_usage(self, other: Usage) -> None:
        for key in TOKEN_KEYS:
            setattr(self, key, getattr(self, key) + getattr(other, key))
        self.cost += other.cost
        self.priced = self.priced or other.priced
        self.requests += other.requests

    def to_json(self) -> dict[str, Any]:
        """The stored and reported form (JobRow `usage` adds `treeCost`)."""
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cacheRead,
            "cacheWrite": self.cacheWrite,
            "cost": round(self.cost, 6) if self.priced else None,
            "requests": self.requests,
        }

    @classmethod
    def from_json(cls, data: Any) -> Usage:
        if not isinstance(data, dict):
            return cls()
        cost = data.get("cost")
        return cls(
            **{key: int(_num(data.get(key))) for key in TOKEN_KEYS},
            cost=_num(cost),
            priced=cost is not None and _num(cost) > 0,
            requests=int(_num(data.get("requests"))),
        )

    def apply_stats(self, stats: Any) -> None:
        """Take pi 1.x's `get_session_stats` figures (the same sum over the whole file, also
        counting what roost saw no event for: compaction and cache-warming usage)."""
        if not isinstance(stats, dict) or not isinstance(stats.get("tokens"), dict):
            return
        tokens = stats["tokens"]
        for key in TOKEN_KEYS:
            setattr(self, key, int(_num(tokens.get(key))))
        cost = _num(stats.get("cost"))
        self.cost, self.priced = cost, cost > 0 or self.priced


def entry_usage(entry: Any) -> tuple[Any, bool]:
    """The `usage` an entry of a session file carries, and whether it is a model request."""
    if not isinstance(entry, dict):
        return None, False
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return None, False
        role = message.get("role")
        if role == "assistant":
            return message.get("usage"), True
        if role == "toolResult":  # pi 1.x: a tool that called a model itself
            return message.get("usage"), False
        return None, False
    if kind in ("compaction", "branch_summary", "usage"):
        return entry.get("usage"), False
    return None, False


def message_usage(message: Any) -> tuple[Any, bool]:
    """`entry_usage` for a message as a `message_end` event carries it."""
    return entry_usage({"type": "message", "message": message})


def from_entries(entries: list[dict[str, Any]]) -> Usage:
    total = Usage()
    for entry in entries:
        usage, request = entry_usage(entry)
        if usage is not None or request:
            total.add(usage, request)
    return total


def model_of(entry: dict[str, Any]) -> str:
    message = entry.get("message") if entry.get("type") == "message" else entry
    if isinstance(message, dict) and message.get("model"):
        provider = message.get("provider")
        return f"{provider}/{message['model']}" if provider else str(message["model"])
    return "unknown"


def breakdown(entries: list[dict[str, Any]]) -> dict[tuple[str, str], Usage]:
    """Usage per (day, model) of a session's entries (`roost usage --by day|model`)."""
    parts: dict[tuple[str, str], Usage] = {}
    for entry in entries:
        usage, request = entry_usage(entry)
        if usage is None and not request:
            continue
        day = str(entry.get("timestamp") or "")[:10] or "unknown"
        parts.setdefault((day, model_of(entry)), Usage()).add(usage, request)
    return parts
