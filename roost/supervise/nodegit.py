"""A remote job's worktree made on its node from the repository's remote (runner
`"worktrees": "node"`; docs/scale-out.md), roostd's half. Blocking: the hub runs it in a thread.

`offer`, as the remote end asks for the job's kit (the hub has written the files of
roostd's own worktree of the job by then, roost.supervise.worktrees made it at its base):
its branch is pushed to the remote (`runner.gitRemote`, default `origin`), so
that the node clones that branch; the kit says where (`url`, `branch`, and `rel`: the job's
directory within the worktree). `take`, when the node says it pushed the branch again:
roostd's worktree fetches it and moves to it (fast-forward only), so `roost diff` and `roost
merge` see the node's commits where they always look. Only commits cross: what the node
leaves uncommitted stays there.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from roost.worktrees import git

if TYPE_CHECKING:
    from roost.job.record import JobRecord

log = logging.getLogger(__name__)


def offer(record: JobRecord, remote: str) -> dict[str, Any] | None:
    """Where the node clones the job's worktree from (None: the job has no worktree)."""
    wt = record.worktree
    if not wt:
        return None
    path, branch = str(wt["path"]), str(wt["branch"])
    url = git.git(["remote", "get-url", remote], path, doing=f"reading the remote {remote!r}").stdout.strip()
    git.git(
        ["push", "--quiet", remote, f"HEAD:refs/heads/{branch}"],
        path,
        doing=f"pushing {branch} to {remote} for the job's node",
    )
    rel = os.path.relpath(record.cwd, path)
    return {"url": url, "branch": branch, "rel": "" if rel == "." else rel}


def take(record: JobRecord, remote: str, head: str) -> str:
    """The node pushed `head` on the job's branch: roostd's worktree moves to it."""
    wt = record.worktree
    if not wt:
        raise ValueError(f"job {record.id} has no worktree")
    path, branch = str(wt["path"]), str(wt["branch"])
    git.git(["fetch", "--quiet", remote, f"refs/heads/{branch}"], path, doing=f"fetching {branch}")
    fetched = git.git(["rev-parse", "FETCH_HEAD"], path, doing="reading what was fetched").stdout.strip()
    if fetched != head:
        log.info("job %s: %s is at %s on the remote, not %s: taking it", record.id, branch, fetched, head)
    git.git(["merge", "--quiet", "--ff-only", "FETCH_HEAD"], path, doing=f"moving {branch} to the node's")
    return fetched
