"""Isolation: a git worktree per job or child (README: Worktrees).

- `git`: every git call roost makes (argument lists, never a shell), with clear errors;
- `policy`: the pure rules (who gets a worktree, the default branch, the limit);
- `report`: the worktree section of a child's report;
- `checkout`: the worker writes a new worktree's files while pi boots.

roostd's side (create at spawn, merge, remove, gc; blocking git work runs in a thread, so
roostd keeps serving meanwhile) is `roost.supervise.worktrees`.

A job's `worktree` record (job.json) is `{path, branch, base, origin, toplevel, repo}`:
the worktree directory (`$ROOST_HOME/worktrees/<id>`), its branch (in the original
repository), the base commit (full hash), the directory the job was started from
(`roost merge`'s default target is the branch checked out there), that checkout's top
level and the repository's common git dir. The worker runs pi in the job's `cwd`, which
is inside the worktree.
"""

from __future__ import annotations

from pathlib import Path

CHECKOUT_MARKER = "checkout.pending"
"""`jobs/<id>/checkout.pending`: the worker is still writing the job's worktree (see
`checkout`). Here, not in `checkout`, so the light launcher can name it for pi."""


def worktrees_dir() -> Path:
    """`$ROOST_HOME/worktrees`: one directory per job that has a worktree."""
    from roost.host import paths

    return paths.roost_home() / "worktrees"


def row_fields(worktree: dict[str, object] | None) -> dict[str, object] | None:
    """The JobRow's `worktree`: `{path, branch, base, origin}` (README: JSON output)."""
    if not worktree:
        return None
    return {
        "path": worktree.get("path"),
        "branch": worktree.get("branch"),
        "base": worktree.get("base"),
        "origin": worktree.get("origin"),
    }
