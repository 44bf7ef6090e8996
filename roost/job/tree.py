"""Job rows as a tree: each child right under its parent, with its `depth`. `roost ls
--tree` draws it (roost.display.views); roostd answers `list` with `tree` in this order, so
`roost ls --tree --json` prints roostd's document as it is."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from typing import Any


def _children(rows: list[dict[str, Any]]) -> dict[str | None, list[dict[str, Any]]]:
    sessions = {row["session"] for row in rows if row.get("session")}
    by_parent: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        parent = row.get("parentSession")
        key = parent if parent in sessions else None
        by_parent.setdefault(key, []).append(row)
    return by_parent


def tree_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows ordered parent first, each child right under its parent, with `depth`."""
    by_parent = _children(rows)
    out: list[dict[str, Any]] = []
    seen: set[int] = set()  # each row once, even when parent links form a cycle

    def walk(members: list[dict[str, Any]], depth: int) -> None:
        for row in members:
            if id(row) in seen:
                continue
            seen.add(id(row))
            out.append({**row, "depth": depth})
            if row.get("session"):
                walk(by_parent.get(row["session"], []), depth + 1)

    walk(by_parent.get(None, []), 0)
    walk([row for row in rows if id(row) not in seen], 0)  # unreachable (a cycle): top level
    return out


def group_folder(row: dict[str, Any]) -> str:
    """The folder a job is listed under (roost view's groups, the web's job list): its
    directory, or for a job in a git worktree (`$ROOST_HOME/worktrees/<id>`) the directory it
    was started in (`worktree.origin`), so worktree jobs sit under their repository."""
    worktree = row.get("worktree") or {}
    origin = worktree.get("origin") if isinstance(worktree, dict) else None
    return str(origin or row.get("cwd") or "")


def short_folder(folder: str, width: int) -> str:
    """A folder as a group label in `width` cells: whole when it fits, else its last two
    parts (`…/repo/sub`), else the end of those."""
    if len(folder) <= width:
        return folder
    parts = [p for p in folder.split("/") if p]
    tail = "…/" + "/".join(parts[-2:])
    if len(tail) <= width:
        return tail
    return "…" + tail[-(width - 1) :] if width > 1 else tail[:width]
