"""git, run as a program with an argument list (never a shell), and what roost asks of it.

Every call goes through `git()`: argv only, no terminal prompt, the C locale (messages
are parsed), and none of the caller's GIT_DIR / GIT_WORK_TREE / GIT_INDEX_FILE (a roostd
started from a git hook must not aim every command at that repository). Each function
raises GitError with git's own message and what roost was doing.

Nothing here force-pushes (nothing here pushes at all), and nothing deletes a branch with
commits that are not merged unless the caller says `force`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from roost.errors import RoostError

GIT_TIMEOUT = 120.0
_DROP_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)


class GitError(RoostError):
    """git failed (or is missing); the message says what roost was doing and what git said."""


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
        LANGUAGE="C",
        GIT_PAGER="cat",
        GIT_EDITOR="true",
        GIT_MERGE_AUTOEDIT="no",
    )
    env.update(extra or {})
    return env


def git(
    args: list[str],
    cwd: str | Path,
    *,
    doing: str,
    ok: tuple[int, ...] = (0,),
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`git ARGS` in `cwd`; GitError unless its exit code is in `ok`."""
    argv = ["git", *args]
    try:
        proc = subprocess.run(
            argv,
            cwd=str(cwd),
            env=_env(env),
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
            errors="replace",
        )
    except FileNotFoundError:
        raise GitError(f"{doing}: git is not installed (not on PATH)") from None
    except NotADirectoryError:
        raise GitError(f"{doing}: {cwd} is not a directory") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"{doing}: git {args[0]} took longer than {GIT_TIMEOUT:g}s") from None
    if proc.returncode not in ok:
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        detail = (
            "; ".join(line.removeprefix("fatal: ").removeprefix("error: ") for line in said[-3:])
            or f"exit {proc.returncode}"
        )
        raise GitError(f"{doing}: {detail}")
    return proc


# -- repositories ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Checkout:
    """Where a directory sits in git: its checkout's top level and the repository's
    common git dir (shared by every worktree of it)."""

    toplevel: str
    common_dir: str


def checkout_of(cwd: str) -> Checkout:
    """The checkout holding `cwd`; GitError (clear) when it is not inside one."""
    proc = git(
        ["rev-parse", "--show-toplevel", "--git-common-dir"],
        cwd,
        doing=f"finding the git repository of {cwd}",
        ok=(0, 128),
    )
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) < 2 or not lines[0]:
        raise GitError(
            f"{cwd} is not inside a git repository (a worktree needs one: "
            "run `git init` there, or choose another directory)"
        )
    common = lines[1]
    if not os.path.isabs(common):
        common = os.path.normpath(os.path.join(cwd, common))
    return Checkout(toplevel=lines[0], common_dir=common)


def resolve_commit(cwd: str, ref: str) -> str:
    """The commit `ref` names, as a full hash; GitError for a ref that names none."""
    if ref.startswith("-"):
        raise GitError(f"bad base {ref!r}: a ref cannot start with '-'")
    proc = git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
        cwd,
        doing=f"resolving base {ref!r}",
        ok=(0, 1, 128),
    )
    sha = proc.stdout.strip()
    if proc.returncode != 0 or not sha:
        if ref == "HEAD":
            raise GitError(
                f"the repository at {cwd} has no commit yet (HEAD names none): "
                "commit something first, or give a base"
            )
        raise GitError(f"bad base {ref!r}: it names no commit in the repository at {cwd}")
    return sha


def check_branch_name(name: str) -> str:
    """`name` when git accepts it as a new branch's name (`git check-ref-format --branch`,
    and no shorthand such as `@{-1}` that git would expand); GitError otherwise."""
    bad = f"bad branch name {name!r}"
    if (
        not name
        or name.startswith("-")
        or name in ("HEAD", "@")
        or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name)
    ):
        raise GitError(f"{bad}: see `git help check-ref-format`")
    # Run in / (only root may plant a `.git` there), never in the shared temp folder: an
    # empty `.git` any user can make in /tmp would fail every check; no repository is
    # looked for above it either.
    proc = git(
        ["check-ref-format", "--branch", name],
        "/",
        doing="checking the branch name",
        ok=(0, 1, 128),
        env={"GIT_CEILING_DIRECTORIES": "/"},
    )
    if proc.returncode != 0 or proc.stdout.strip() != name:
        raise GitError(f"{bad}: git refuses it as a branch name (see `git help check-ref-format`)")
    return name


def branch_exists(cwd: str, name: str) -> bool:
    proc = git(
        ["show-ref", "--verify", "--quiet", f"refs/heads/{name}"],
        cwd,
        doing=f"looking for branch {name}",
        ok=(0, 1),
    )
    return proc.returncode == 0


def current_branch(cwd: str) -> str | None:
    """The branch checked out at `cwd`, None when its HEAD is detached."""
    proc = git(
        ["symbolic-ref", "--quiet", "--short", "HEAD"], cwd, doing=f"reading the branch of {cwd}", ok=(0, 1)
    )
    return proc.stdout.strip() or None


def head(cwd: str) -> str:
    return git(["rev-parse", "HEAD"], cwd, doing=f"reading HEAD of {cwd}").stdout.strip()


# -- worktrees -----------------------------------------------------------------------------
def add_worktree(cwd: str, path: Path, branch: str, base: str, no_checkout: bool = False) -> None:
    """A new worktree at `path` on a new branch `branch` made at commit `base` (with
    `no_checkout`: its files are not written, nor its index filled)."""
    if branch_exists(cwd, branch):
        raise GitError(f"branch {branch!r} already exists: choose another name")
    git(
        [
            "worktree",
            "add",
            "--quiet",
            *(["--no-checkout"] if no_checkout else []),
            "-b",
            branch,
            str(path),
            base,
        ],
        cwd,
        doing=f"creating worktree {path} on branch {branch}",
    )


def worktree_checkouts(cwd: str) -> dict[str, str]:
    """branch name -> the checkout directory where it is checked out (every worktree)."""
    out: dict[str, str] = {}
    current: str | None = None
    proc = git(["worktree", "list", "--porcelain"], cwd, doing="listing worktrees")
    for line in proc.stdout.splitlines():
        if line.startswith("worktree "):
            current = line[len("worktree ") :]
        elif line.startswith("branch refs/heads/") and current is not None:
            out[line[len("branch refs/heads/") :]] = current
    return out


def remove_worktree(repo: str, path: str, force: bool = False) -> None:
    """`git worktree remove` (refuses untracked or modified files unless `force`); a
    directory git no longer knows is deleted and its record pruned."""
    args = ["worktree", "remove", *(["--force"] if force else []), path]
    if not os.path.lexists(path):  # deleted by hand: only git's record is left
        if os.path.isdir(repo):
            prune(repo)
        return
    if os.path.isdir(repo):
        try:
            git(args, repo, doing=f"removing worktree {path}")
            return
        except GitError:
            if _registered(repo, path):
                raise
        prune(repo)
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)


def _registered(repo: str, path: str) -> bool:
    proc = git(["worktree", "list", "--porcelain"], repo, doing="listing worktrees")
    real = os.path.realpath(path)
    return any(
        os.path.realpath(line[len("worktree ") :]) == real
        for line in proc.stdout.splitlines()
        if line.startswith("worktree ")
    )


def prune(repo: str) -> None:
    git(["worktree", "prune"], repo, doing=f"pruning worktree records of {repo}")


def unmerged_count(cwd: str, branch: str, into: str) -> int:
    """Commits on `branch` that `into` does not have."""
    proc = git(
        ["rev-list", "--count", f"refs/heads/{branch}", "--not", into, "--"],
        cwd,
        doing=f"counting the commits of {branch} not in {into}",
    )
    return int(proc.stdout.strip() or 0)


def delete_branch(cwd: str, branch: str) -> None:
    """Delete `branch` (the caller decided its commits may go)."""
    git(["branch", "-D", "--", branch], cwd, doing=f"deleting branch {branch}")


# -- changes -------------------------------------------------------------------------------
def status(cwd: str) -> list[str]:
    """`git status --porcelain` lines (untracked files included; ignored ones not)."""
    proc = git(["status", "--porcelain", "--untracked-files=all"], cwd, doing=f"reading the status of {cwd}")
    return [line for line in proc.stdout.splitlines() if line]


def tracked_changes(cwd: str) -> list[str]:
    """Staged or unstaged changes to tracked files (what a merge could clobber)."""
    proc = git(["status", "--porcelain", "--untracked-files=no"], cwd, doing=f"reading the status of {cwd}")
    return [line for line in proc.stdout.splitlines() if line]


def short_log(cwd: str, base: str, limit: int = 20) -> list[str]:
    proc = git(
        ["log", "--oneline", "--no-decorate", f"--max-count={limit}", f"{base}..HEAD", "--"],
        cwd,
        doing="reading the log",
    )
    return proc.stdout.splitlines()


def commit_count(cwd: str, base: str) -> int:
    proc = git(["rev-list", "--count", f"{base}..HEAD", "--"], cwd, doing="counting commits")
    return int(proc.stdout.strip() or 0)


def diffstat(cwd: str, base: str, target: str = "HEAD") -> str:
    return git(
        ["diff", "--stat", "--no-color", base, target, "--"], cwd, doing="computing the diffstat"
    ).stdout.rstrip()


def snapshot_tree(cwd: str) -> str:
    """The tree of the worktree as it is on disk (uncommitted and untracked files too,
    ignored ones not), written to the object store without touching the worktree's own
    index: a copy of it is updated with `add -A` and written out."""
    gitdir = git(["rev-parse", "--absolute-git-dir"], cwd, doing="finding the git dir")
    index = Path(gitdir.stdout.strip()) / "index"
    with tempfile.TemporaryDirectory(prefix="roost-index-") as tmp:
        copy = Path(tmp) / "index"
        if index.exists():
            shutil.copyfile(index, copy)  # its stat data spares rehashing unchanged files
        env = {"GIT_INDEX_FILE": str(copy)}
        git(["add", "-A", "--", "."], cwd, doing="reading the worktree's changes", env=env)
        return git(["write-tree"], cwd, doing="recording the worktree's changes", env=env).stdout.strip()


def diff(cwd: str, base: str, stat: bool = False, color: bool = False) -> str:
    """The worktree's changes against `base`: its commits and what is not committed."""
    tree = snapshot_tree(cwd)
    args = ["diff", "--stat" if stat else "--patch", "--color" if color else "--no-color", base, tree, "--"]
    return git(args, cwd, doing="computing the diff").stdout


# -- merging -------------------------------------------------------------------------------
def conflicts(cwd: str, into: str, branch: str) -> list[str]:
    """The files a merge of `branch` into `into` would conflict on ([] when clean),
    computed without a checkout (`git merge-tree --write-tree`): nothing is touched."""
    proc = git(
        [
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            f"refs/heads/{into}",
            f"refs/heads/{branch}",
        ],
        cwd,
        doing=f"checking {branch} against {into}",
        ok=(0, 1),
    )
    if proc.returncode == 0:
        return []
    return [line for line in proc.stdout.splitlines()[1:] if line]


def is_ancestor(cwd: str, commit: str, of: str) -> bool:
    proc = git(["merge-base", "--is-ancestor", commit, of], cwd, doing="comparing branches", ok=(0, 1))
    return proc.returncode == 0


def merge(checkout: str, branch: str, message: str, squash: bool) -> None:
    """Merge `branch` into the branch checked out at `checkout`. On failure the merge is
    undone (`git merge --abort` / `reset --merge`) and GitError says why."""
    if squash:
        args = ["merge", "--squash", "--no-edit", f"refs/heads/{branch}"]
    else:
        args = ["merge", "--no-ff", "--no-edit", "-m", message, f"refs/heads/{branch}"]
    try:
        git(args, checkout, doing=f"merging {branch}")
        if squash:
            git(["commit", "--no-edit", "-m", message], checkout, doing=f"committing the squashed {branch}")
    except GitError:
        undo = ["reset", "--merge"] if squash else ["merge", "--abort"]
        git(undo, checkout, doing="undoing the failed merge", ok=(0, 1, 128))
        raise
