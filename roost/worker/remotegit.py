"""A remote job's worktree made on its node from the repository's remote (runner
`"worktrees": "node"`; docs/scale-out.md), the remote end's half; roostd's is
roost.supervise.nodegit. Blocking: the remote end runs it in a thread.

`clone`: the job's branch, as roostd pushed it, cloned into the mirror: the job runs there
(its directory within it as within roostd's worktree). `moved`/`push`: once the job has
committed (the clone's HEAD log changed), its branch goes back to the remote, and the
remote end tells roostd, which moves its own worktree of the job to it. Only commits
cross: what the job leaves uncommitted stays on the node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roost.worktrees import git
from roost.worktrees.git import GitError

__all__ = ["FOLDER", "GitError", "clone", "head", "mark", "push"]

FOLDER = "worktree"


def clone(offer: dict[str, Any], mirror: Path) -> tuple[Path, Path]:
    """The clone's top level and the job's directory in it."""
    tree = mirror / FOLDER
    branch, url = str(offer["branch"]), str(offer["url"])
    git.git(
        ["clone", "--quiet", "--single-branch", "--branch", branch, url, str(tree)],
        mirror,
        doing=f"cloning {offer['branch']} for the job",
    )
    rel = str(offer.get("rel") or "")
    return tree, (tree / rel if rel else tree)


def mark(tree: Path) -> tuple[int, int] | None:
    """What changes when the clone's HEAD moves (a commit, a reset): its log's size and time."""
    try:
        stat = (tree / ".git" / "logs" / "HEAD").stat()
    except FileNotFoundError:
        return None
    return stat.st_size, stat.st_mtime_ns


def head(tree: Path) -> str:
    return git.head(str(tree))


def push(tree: Path, branch: str) -> None:
    git.git(
        ["push", "--quiet", "origin", f"HEAD:refs/heads/{branch}"],
        tree,
        doing=f"pushing {branch} back for roostd",
    )
