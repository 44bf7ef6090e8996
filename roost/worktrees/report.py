"""The worktree part of a child's report: its branch, its commits since base, a diffstat,
and what it has not committed (flagged as such: a merge would leave it behind)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SECTION_MAX = 3000
LOG_MAX = 15
STATUS_MAX = 20


@dataclass
class Changes:
    branch: str
    base: str
    path: str
    log: list[str] = field(default_factory=list)
    commits: int = 0
    diffstat: str = ""
    uncommitted: list[str] = field(default_factory=list)
    error: str | None = None


def format_section(changes: Changes) -> str:
    """The text appended to a report (pure)."""
    lines = [f"[worktree] branch {changes.branch} (base {changes.base[:12]}, worktree {changes.path})"]
    if changes.error:
        lines.append(f"could not read its changes: {changes.error}")
        return "\n".join(lines)
    if changes.commits:
        lines.append(f"commits since base ({changes.commits}):")
        lines += [f"  {entry}" for entry in changes.log[:LOG_MAX]]
        if changes.commits > LOG_MAX:
            lines.append(f"  … {changes.commits - LOG_MAX} more")
        lines.append("diffstat (base..branch):")
        lines += [f"  {entry}" for entry in changes.diffstat.splitlines()]
    else:
        lines.append("no commits since base")
    if changes.uncommitted:
        lines.append(
            f"UNCOMMITTED changes in the worktree ({len(changes.uncommitted)} files, "
            "not on the branch; a merge leaves them out):"
        )
        lines += [f"  {entry}" for entry in changes.uncommitted[:STATUS_MAX]]
        if len(changes.uncommitted) > STATUS_MAX:
            lines.append(f"  … {len(changes.uncommitted) - STATUS_MAX} more")
    text = "\n".join(lines)
    if len(text) > SECTION_MAX:
        text = text[: SECTION_MAX - 2].rstrip() + "\n…"
    return text


def gather(worktree: dict[str, Any]) -> Changes:
    """Read a job's changes from git (blocking: roostd calls it in a thread)."""
    from roost.worktrees import git

    changes = Changes(
        branch=str(worktree.get("branch")), base=str(worktree.get("base")), path=str(worktree.get("path"))
    )
    try:
        changes.commits = git.commit_count(changes.path, changes.base)
        if changes.commits:
            changes.log = git.short_log(changes.path, changes.base, LOG_MAX)
            changes.diffstat = git.diffstat(changes.path, changes.base)
        changes.uncommitted = git.status(changes.path)
    except git.GitError as exc:
        changes.error = str(exc)
    return changes


def with_section(result: str, worktree: dict[str, Any] | None, limit: int) -> str:
    """A report's result with the worktree section after it, within `limit` characters
    (the result is shortened, never the section) (blocking)."""
    if not worktree:
        return result[:limit]
    section = format_section(gather(worktree))
    room = limit - len(section) - 3
    result = result.rstrip()
    if len(result) > room:
        result = result[: max(room - 1, 0)].rstrip() + "…"
    return f"{result}\n\n{section}" if result else section
