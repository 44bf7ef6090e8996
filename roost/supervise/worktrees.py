"""roostd's worktree work: create one at spawn, and `merge`, `rm` and `gc`.

git runs in a thread (`asyncio.to_thread`): a 5,000-file checkout takes ~0.2 s, which
roostd's event loop must not spend blocked (deliveries to other jobs go on meanwhile).
What must not race is decided on the loop before the thread starts: the limit counts the
worktrees being made as well as those that exist (`_making`), and every change to git's
worktree records (add, remove, merge, gc) is one at a time (`_git_changes`): two at once in
one repository can fail, and two merges into one checkout would step on each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roost.host import paths
from roost.job.states import JobKind, JobState
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError
from roost.worktrees import checkout as fill
from roost.worktrees import git, policy, worktrees_dir

if TYPE_CHECKING:
    from roost.job.record import JobRecord
    from roost.supervise.base import JobTable

log = logging.getLogger(__name__)

REPOS_FILE = "worktree-repos.txt"
"""`$ROOST_HOME/worktree-repos.txt`: the repositories roost made worktrees in (gc prunes
their worktree records)."""

_making: dict[str, int] = {}
_git_changes = asyncio.Lock()
"""One change to git's worktree records at a time: two `git worktree add` in one repository
at once can fail (the second reads the first's half-made `.git/worktrees/<id>`), and a
merge makes a temporary worktree too."""


class MergeConflict(git.GitError):
    """A merge refused because the branches conflict."""


class MergeRefused(RequestError):
    """`merge`'s refusal on a conflict, as the client sees it (the inbox lists it)."""


def tree_key(record: JobRecord) -> str:
    return record.links.root_session or record.session or record.id


def in_tree(daemon: JobTable, key: str) -> int:
    made = sum(1 for r in daemon.jobs.values() if r.worktree and tree_key(r) == key)
    return made + _making.get(key, 0)


# -- creation ----------------------------------------------------------------------------
async def prepare(daemon: JobTable, record: JobRecord, request: dict[str, Any], spawned: bool) -> None:
    """Give a new (not yet launched) pi job its worktree when the request and the policy
    say so: the worktree is made, `record.worktree` set and `record.cwd` moved into it.
    RequestError (nothing made) otherwise."""
    settings = daemon.settings()
    try:
        want = policy.decide(request, settings.agentChildWorktrees, spawned)
    except policy.WorktreeRefused as exc:
        raise RequestError(REFUSED if spawned else BAD_REQUEST, str(exc)) from None
    if not want.wanted:
        return
    if record.kind != JobKind.PI:
        raise RequestError(BAD_REQUEST, "--worktree is for pi jobs, not --shell")
    key = tree_key(record)
    refusal = policy.limit_refusal(in_tree(daemon, key), settings.agentMaxWorktrees)
    if refusal:
        raise RequestError(REFUSED, refusal)
    _making[key] = _making.get(key, 0) + 1
    try:
        async with _git_changes:
            made = await asyncio.to_thread(
                _create, record.id, record.name, record.cwd, want.branch, want.base
            )
    except git.GitError as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None
    finally:
        _making[key] -= 1
        if not _making[key]:
            del _making[key]
    record.worktree = made
    record.cwd = policy.job_cwd(made["origin"], made["toplevel"], made["path"])
    if not os.path.isdir(record.cwd):  # a directory git does not track: the top level then
        record.cwd = made["path"]


def _create(job_id: str, name: str, cwd: str, branch: str | None, base: str | None) -> dict[str, Any]:
    """Check everything, then make the worktree (blocking). Nothing is made when a check
    fails; a failed `git worktree add` leaves nothing either (git cleans up after itself,
    and we remove what it may leave)."""
    origin = os.path.realpath(cwd)
    checkout = git.checkout_of(origin)
    branch = git.check_branch_name(branch or policy.default_branch(name, job_id))
    base_sha = git.resolve_commit(origin, base or "HEAD")
    root = paths.ensure_dir(worktrees_dir())
    path = root / job_id
    if os.path.lexists(path):
        raise git.GitError(f"{path} already exists: roost does not reuse it")
    rel = os.path.relpath(origin, checkout.toplevel)
    rel = "" if rel == "." or rel.startswith("..") else rel
    try:
        # Without a checkout: the worker writes the files while pi boots (see checkout.py).
        git.add_worktree(origin, path, branch, base_sha, no_checkout=True)
    except git.GitError:
        if os.path.lexists(path) and not git.branch_exists(origin, branch):
            import shutil

            shutil.rmtree(path, ignore_errors=True)
        raise
    made = {
        "path": str(path),
        "branch": branch,
        "base": base_sha,
        "origin": origin,
        "toplevel": checkout.toplevel,
        "repo": checkout.common_dir,
    }
    try:
        fill.start(str(path), rel)
        job_dir = paths.ensure_dir(paths.job_dir(job_id))
        (job_dir / fill.MARKER).write_text("the worker writes the worktree's files\n")
    except (git.GitError, OSError) as exc:
        with contextlib.suppress(git.GitError):
            git.remove_worktree(checkout.common_dir, str(path), force=True)
            git.delete_branch(origin, branch)
        raise git.GitError(f"preparing worktree {path}: {exc}") from None
    _remember_repo(checkout.common_dir)
    return made


async def discard(record: JobRecord) -> None:
    """Undo `prepare` for a job that could not be launched: the worktree and its new
    branch go (it has no commit of its own yet)."""
    wt = record.worktree
    if not wt:
        return

    def undo() -> None:
        with contextlib.suppress(git.GitError):
            git.remove_worktree(wt["repo"], wt["path"], force=True)
            git.delete_branch(wt["repo"], wt["branch"])

    async with _git_changes:
        await asyncio.to_thread(undo)


def _remember_repo(common_dir: str) -> None:
    path = paths.roost_home() / REPOS_FILE
    known = _known_repos()
    if common_dir in known:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(common_dir + "\n")


def _known_repos() -> list[str]:
    try:
        text = (paths.roost_home() / REPOS_FILE).read_text(encoding="utf-8")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()]


# -- merge ---------------------------------------------------------------------------------
def running(record: JobRecord) -> bool:
    return record.busy or record.state in (JobState.STARTING, JobState.RUNNING)


async def merge(daemon: JobTable, record: JobRecord, into: str | None, squash: bool) -> dict[str, Any]:
    wt = record.worktree
    if not wt:
        raise RequestError(REFUSED, f"job {record.id} has no worktree: nothing to merge")
    if into is not None and not isinstance(into, str):
        raise RequestError(BAD_REQUEST, "into must be a branch name")
    async with _git_changes:
        if running(record):
            raise RequestError(
                REFUSED,
                f"job {record.id} is {record.state.value} (a run is in "
                "progress): merge once it has settled (roost wait)",
            )
        try:
            return await asyncio.to_thread(_merge, record.id, record.name, wt, into, squash)
        except MergeConflict as exc:
            raise MergeRefused(REFUSED, str(exc)) from None
        except git.GitError as exc:
            raise RequestError(REFUSED, str(exc)) from None


def _repo_dir(wt: dict[str, Any]) -> str:
    """A directory to run repository-wide git commands in."""
    for candidate in (wt.get("path"), wt.get("toplevel"), wt.get("repo")):
        if candidate and os.path.isdir(candidate):
            return str(candidate)
    raise git.GitError(f"the repository of worktree {wt.get('path')} is gone")


def _merge(job_id: str, name: str, wt: dict[str, Any], into: str | None, squash: bool) -> dict[str, Any]:
    repo = _repo_dir(wt)
    branch = wt["branch"]
    if into is None:
        origin = wt.get("origin") or ""
        if not os.path.isdir(origin):
            raise git.GitError(f"the job's starting directory {origin} is gone: say --into BRANCH")
        into = git.current_branch(origin)
        if into is None:
            raise git.GitError(
                f"the checkout at {origin} is not on a branch (detached HEAD): say --into BRANCH"
            )
    else:
        git.check_branch_name(into)
    if into == branch:
        raise git.GitError(f"cannot merge branch {branch} into itself")
    if not git.branch_exists(repo, into):
        raise git.GitError(f"no branch {into!r} to merge into")
    if not git.branch_exists(repo, branch):
        raise git.GitError(f"the job's branch {branch} no longer exists")
    uncommitted = len(git.status(wt["path"])) if os.path.isdir(wt["path"]) else 0
    result: dict[str, Any] = {
        "id": job_id,
        "branch": branch,
        "into": into,
        "squash": squash,
        "uncommitted": uncommitted,
    }
    if git.is_ancestor(repo, f"refs/heads/{branch}", f"refs/heads/{into}"):
        committed = git.git(
            ["rev-list", "--count", f"{wt['base']}..refs/heads/{branch}", "--"],
            repo,
            doing="counting the branch's commits",
        ).stdout.strip()
        if committed in ("", "0"):  # not "already up to date": the job never committed
            files = f"{uncommitted} file{'s' if uncommitted != 1 else ''}"
            raise git.GitError(
                f"nothing to merge: job {job_id} committed nothing on {branch}"
                + (
                    f"; its worktree has uncommitted changes to {files}, which a merge "
                    f"leaves out (commit them there; roost diff {job_id} shows them)"
                    if uncommitted
                    else ""
                )
            )
        return {**result, "merged": False, "outcome": "already up to date", "commit": None}
    checkouts = git.worktree_checkouts(repo)
    target = checkouts.get(into)
    if target is not None:
        dirty = git.tracked_changes(target)
        if dirty:
            shown = ", ".join(line[3:] for line in dirty[:10]) + (" …" if len(dirty) > 10 else "")
            raise git.GitError(
                f"the checkout of {into} at {target} has uncommitted changes "
                f"({shown}): commit or stash them first; nothing was merged"
            )
    conflicted = git.conflicts(repo, into, branch)
    if conflicted:
        raise MergeConflict(
            f"merge aborted: merging {branch} into {into} conflicts in "
            f"{', '.join(conflicted)}; nothing was changed (both branches are as they were)"
        )
    count = git.commit_count(wt["path"], wt["base"]) if os.path.isdir(wt["path"]) else 0
    message = (
        f"Merge roost job {name} ({job_id}): {branch}"
        if not squash
        else f"roost job {name} ({job_id}): {branch}, squashed ({count} commits)"
    )
    temp: Path | None = None
    if target is None:  # not checked out anywhere: merge in a checkout of our own
        temp = paths.ensure_dir(worktrees_dir()) / f".merge-{job_id}"
        git.git(
            ["worktree", "add", "--quiet", str(temp), into],
            repo,
            doing=f"checking out {into} to merge into it",
        )
        target = str(temp)
    try:
        git.merge(target, branch, message, squash)
        commit = git.head(target)
    finally:
        if temp is not None:
            git.remove_worktree(repo, str(temp), force=True)
    return {
        **result,
        "merged": True,
        "outcome": "merged",
        "commit": commit,
        "checkout": None if temp is not None else target,
    }


# -- rm ------------------------------------------------------------------------------------
async def check_removable(record: JobRecord, force: bool, delete_branch: bool) -> None:
    """Refuse `roost rm` of a job whose worktree has uncommitted work (unless `force`), or
    whose branch has unmerged commits when `--delete-branch` (unless `force`)."""
    wt = record.worktree
    if not wt or force:
        return
    if fill.pending(record.dir):
        return  # its files are still being written: the agent has not run in it yet
    try:
        await asyncio.to_thread(_check_removable, wt, delete_branch)
    except git.GitError as exc:
        raise RequestError(REFUSED, f"job {record.id} not removed: {exc}") from None


def _check_removable(wt: dict[str, Any], delete_branch: bool) -> None:
    path = wt["path"]
    if os.path.isdir(path):
        changes = git.status(path)
        if changes:
            shown = ", ".join(line[3:] for line in changes[:10]) + (" …" if len(changes) > 10 else "")
            raise git.GitError(
                f"its worktree {path} has uncommitted changes ({shown}): "
                "commit them, or `roost rm --force` to discard them"
            )
    if delete_branch:
        repo = _repo_dir(wt)
        if not git.branch_exists(repo, wt["branch"]):
            return
        target = _merge_target_ref(wt)
        unmerged = git.unmerged_count(repo, wt["branch"], target)
        if unmerged:
            raise git.GitError(
                f"branch {wt['branch']} has {unmerged} commits not merged into "
                f"{target.removeprefix('refs/heads/')}: merge it first, or "
                "`roost rm --delete-branch --force` to delete them"
            )


def _merge_target_ref(wt: dict[str, Any]) -> str:
    origin = wt.get("origin") or ""
    if os.path.isdir(origin):
        branch = git.current_branch(origin)
        if branch:
            return f"refs/heads/{branch}"
        return git.head(origin)
    return "HEAD"


async def remove(record: JobRecord, force: bool, delete_branch: bool, unfinished: bool = False) -> list[str]:
    """Remove a removed job's worktree (and its branch when asked); what was done, or
    kept and why, as lines for the user. `unfinished`: its checkout was still pending
    (`checkout_pending`, asked before the job's directory went): it holds nothing of the
    agent's, but its missing files look like changes to git."""
    wt = record.worktree
    if not wt:
        return []
    async with _git_changes:
        return await asyncio.to_thread(_remove, wt, force or unfinished, delete_branch)


def checkout_pending(record: JobRecord) -> bool:
    return bool(record.worktree) and fill.pending(record.dir)


def _remove(wt: dict[str, Any], force: bool, delete_branch: bool) -> list[str]:
    notes = []
    try:
        git.remove_worktree(wt["repo"], wt["path"], force=force)
        notes.append(f"removed worktree {wt['path']}")
    except git.GitError as exc:
        notes.append(f"kept worktree {wt['path']} ({exc}); `roost gc` removes it")
        return notes
    if not delete_branch:
        notes.append(f"kept branch {wt['branch']}")
        return notes
    try:
        repo = _repo_dir(wt)
        if git.branch_exists(repo, wt["branch"]):
            if not force and git.unmerged_count(repo, wt["branch"], _merge_target_ref(wt)):
                notes.append(f"kept branch {wt['branch']}: it has unmerged commits")
                return notes
            git.delete_branch(repo, wt["branch"])
            notes.append(f"deleted branch {wt['branch']}")
    except git.GitError as exc:
        notes.append(f"kept branch {wt['branch']} ({exc})")
    return notes


# -- gc --------------------------------------------------------------------------------------
async def gc(daemon: JobTable, force: bool) -> dict[str, Any]:
    """Remove the worktrees of removed jobs (`$ROOST_HOME/worktrees/<id>` without a job)
    and prune git's worktree records in every repository roost made worktrees in."""
    live = {r.id for r in daemon.jobs.values()}
    repos = set(_known_repos()) | {str(r.worktree["repo"]) for r in daemon.jobs.values() if r.worktree}
    async with _git_changes:  # a merge's own temporary checkout is not a leftover
        return await asyncio.to_thread(_gc, live, repos, force)


def _gc(live: set[str], repos: set[str], force: bool) -> dict[str, Any]:
    removed: list[str] = []
    kept: list[str] = []
    root = worktrees_dir()
    entries = sorted(root.iterdir()) if root.is_dir() else []
    for entry in entries:
        # `.merge-<id>`: a merge's temporary checkout that a killed roostd left behind.
        if entry.name in live or entry.is_symlink() or not entry.is_dir():
            continue
        repo = None
        with contextlib.suppress(git.GitError):
            found = git.checkout_of(str(entry))
            if os.path.realpath(found.toplevel) == os.path.realpath(entry):
                repo = found.common_dir  # else a plain directory inside some other checkout
        if repo is None:  # not a worktree (any more): a leftover directory
            import shutil

            shutil.rmtree(entry, ignore_errors=True)
            removed.append(str(entry))
            continue
        repos.add(repo)
        try:
            changes = git.status(str(entry))
            if changes and not force and not entry.name.startswith(".merge-"):
                kept.append(f"{entry}: {len(changes)} uncommitted changes (gc --force removes it)")
                continue
            git.remove_worktree(repo, str(entry), force=True)
            removed.append(str(entry))
        except git.GitError as exc:
            kept.append(f"{entry}: {exc}")
    pruned = []
    for repo in sorted(repos):
        if os.path.isdir(repo):
            with contextlib.suppress(git.GitError):
                git.prune(repo)
                pruned.append(repo)
    _forget_repos(set(pruned))
    return {"removed": removed, "kept": kept, "pruned": pruned}


def _forget_repos(keep: set[str]) -> None:
    """Repositories that are gone drop out of the list."""
    known = _known_repos()
    still = [repo for repo in known if repo in keep or os.path.isdir(repo)]
    if still != known:
        from roost.host.fsutil import atomic_write_text

        atomic_write_text(paths.roost_home() / REPOS_FILE, "".join(f"{r}\n" for r in still))
