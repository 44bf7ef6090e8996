"""Worktree rules as pure functions: whether a job gets one, its default branch, the limit.

No I/O here (the tests call these directly): the daemon side (`roost.worktrees.create`)
asks them and does the git work.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

POLICIES = ("never", "ask", "always")
"""`agentChildWorktrees`: never (children share their parent's directory), ask (the
model chooses per spawn with `worktree: true`), always (every child gets one)."""

DEFAULT_POLICY = "never"
BRANCH_PREFIX = "roost/"
_SLUG_DROP = re.compile(r"[^a-z0-9._-]+")


class WorktreeRefused(ValueError):
    """A run or spawn whose worktree arguments are not allowed or not well-formed."""


@dataclass(frozen=True)
class WorktreeRequest:
    """What a run or spawn asked for, checked: whether to make a worktree, and its
    branch and base when given."""

    wanted: bool
    branch: str | None = None
    base: str | None = None


def _opt_str(request: Mapping[str, Any], key: str) -> str | None:
    value = request.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise WorktreeRefused(f"{key} must be a string")
    return value


def decide(request: Mapping[str, Any], policy: str | None, spawned: bool) -> WorktreeRequest:
    """Whether the job gets a worktree. A user's `roost run --worktree` always may; a
    spawn follows the user-level `agentChildWorktrees` policy."""
    asked = request.get("worktree")
    if asked is not None and not isinstance(asked, bool):
        raise WorktreeRefused("worktree must be true or false")
    branch, base = _opt_str(request, "branch"), _opt_str(request, "base")
    if not spawned:
        wanted = bool(asked)
    else:
        policy = policy if policy in POLICIES else DEFAULT_POLICY
        if policy == "never":
            if asked:
                raise WorktreeRefused(
                    "worktrees for spawned sessions are off (the user's roost.json has "
                    'agentChildWorktrees "never"): spawn without worktree'
                )
            wanted = False
        elif policy == "always":
            if asked is False:
                raise WorktreeRefused(
                    "every spawned session gets a worktree here (agentChildWorktrees "
                    '"always"): leave worktree out'
                )
            wanted = True
        else:
            wanted = bool(asked)
    if not wanted and (branch or base):
        raise WorktreeRefused(
            "branch and base are for a job in a worktree: add worktree: true"
            if spawned
            else "--branch and --base need --worktree"
        )
    return WorktreeRequest(wanted=wanted, branch=branch, base=base)


def default_branch(name: str, job_id: str) -> str:
    """`roost/<name>-<id>`, the name reduced to what every ref accepts."""
    slug = _SLUG_DROP.sub("-", name.lower()).strip("-.")
    slug = re.sub(r"\.{2,}", ".", slug)[:40].strip("-.")
    return f"{BRANCH_PREFIX}{slug or 'job'}-{job_id}"


def limit_refusal(in_tree: int, limit: int) -> str | None:
    """A new worktree in a tree that already holds `in_tree` of them."""
    if in_tree >= limit:
        return (
            f"worktree limit: this session tree already has {in_tree} worktrees "
            f"(agentMaxWorktrees is {limit}); remove one with `roost rm JOB`"
        )
    return None


def job_cwd(origin: str, toplevel: str, worktree: str) -> str:
    """Where in the worktree the job runs: the same place relative to the checkout's top
    level as `origin` (a subdirectory maps to that subdirectory)."""
    import posixpath

    rel = posixpath.relpath(origin, toplevel)
    if rel == "." or rel.startswith(".."):
        return worktree
    return posixpath.join(worktree, rel)
