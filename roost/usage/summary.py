"""`roost usage`: every job's figures, removed jobs included, grouped by job, tree, model or
day. Live jobs are read from their session files (so a day or a model is exact), removed
jobs from the usage log (roost.usage.log); the two never overlap."""

from __future__ import annotations

import re
from typing import Any

from roost.usage import GROUPS
from roost.usage.account import Usage, breakdown

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_since(text: str | None) -> str | None:
    """`--since DATE`: YYYY-MM-DD (an ISO timestamp is cut to its day); ValueError if bad."""
    if text is None:
        return None
    day = text.strip()[:10]
    wanted = "a date as YYYY-MM-DD (UTC), e.g. 2026-11-30"
    if not _DATE.fullmatch(day):
        raise ValueError(f"--since {text!r} is not {wanted}")
    from datetime import date

    try:
        date.fromisoformat(day)  # 2026-02-30 is no date
    except ValueError as exc:
        raise ValueError(f"--since {text!r} is not a date ({exc}): give {wanted}") from None
    return day


def live_lines(rows: list[dict[str, Any]], read: Any) -> list[dict[str, Any]]:
    """Usage lines of live jobs (`read(session) -> entries`)."""
    out = []
    for row in rows:
        if row.get("kind") != "pi" or not row.get("session"):
            continue
        try:
            entries = read(row["session"])
        except OSError:
            continue
        for (day, model), usage in breakdown(entries).items():
            out.append(
                {
                    "job": row["id"],
                    "name": row.get("name"),
                    "session": row["session"],
                    "rootSession": row.get("rootSession"),
                    "day": day,
                    "model": model,
                    **usage.to_json(),
                    "removed": None,
                }
            )
    return out


def report(lines: list[dict[str, Any]], by: str = "job", since: str | None = None) -> dict[str, Any]:
    """The report (`roost usage --json`, README: JSON output)."""
    if by not in GROUPS:
        raise ValueError(f"--by must be one of {', '.join(GROUPS)}")
    names = {line.get("session"): line.get("name") for line in lines if line.get("session")}
    groups: dict[str, dict[str, Any]] = {}
    total = Usage()
    for line in lines:
        if since is not None and not (
            _DATE.fullmatch(str(line.get("day") or "")) and str(line["day"]) >= since
        ):
            continue
        if by == "job":
            key, name = str(line["job"]), line.get("name")
        elif by == "tree":
            key = str(line.get("rootSession") or line.get("session") or line["job"])
            name = names.get(key) or key
        else:
            key, name = str(line.get(by) or "unknown"), None
        group = groups.setdefault(key, {"usage": Usage(), "name": name, "jobs": set(), "removed": True})
        usage = Usage.from_json(line)
        group["usage"].add_usage(usage)
        group["jobs"].add(line["job"])
        group["removed"] = group["removed"] and bool(line.get("removed"))
        total.add_usage(usage)

    def shown(key: str) -> tuple[str, str]:
        # Rows are sorted by their first column as printed: by tree that is the root's name
        # (its session path, the key, only breaks a tie), else the key itself.
        return (str(groups[key]["name"]), key) if by == "tree" else (key, "")

    rows = []
    for key in sorted(groups, key=shown):
        group = groups[key]
        row: dict[str, Any] = {"key": key}
        if by in ("job", "tree"):
            row["name"] = group["name"]
        row.update(group["usage"].to_json())
        row["jobs"] = len(group["jobs"])
        if by == "job":
            row["removed"] = group["removed"]
        rows.append(row)
    return {"by": by, "since": since, "rows": rows, "total": total.to_json()}
