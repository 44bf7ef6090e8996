"""Unit tests of the worktree feature (issue 13): the pure rules, the settings, and the git
layer against real git in temporary repositories (no roostd, no pi)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from roost.config import Settings
from roost.worktrees import git, policy, report


def sh_git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    sh_git(path, "init", "-q", "-b", "main")
    sh_git(path, "config", "user.email", "test@example.invalid")
    sh_git(path, "config", "user.name", "roost test")
    for name, text in (files or {"README": "hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    sh_git(path, "add", "-A")
    sh_git(path, "commit", "-q", "-m", "base")
    return path


# -- policy --------------------------------------------------------------------------------
def test_decide_follows_the_policy_for_spawns_only() -> None:
    assert policy.decide({"worktree": True}, "never", spawned=False).wanted
    assert not policy.decide({}, "always", spawned=False).wanted
    assert not policy.decide({}, "never", spawned=True).wanted
    with pytest.raises(policy.WorktreeRefused, match="agentChildWorktrees"):
        policy.decide({"worktree": True}, "never", spawned=True)
    assert policy.decide({"worktree": True}, "ask", spawned=True).wanted
    assert not policy.decide({"worktree": False}, "ask", spawned=True).wanted
    assert not policy.decide({}, "ask", spawned=True).wanted
    assert policy.decide({}, "always", spawned=True).wanted
    with pytest.raises(policy.WorktreeRefused, match="always"):
        policy.decide({"worktree": False}, "always", spawned=True)
    # An unknown policy is the default (never).
    with pytest.raises(policy.WorktreeRefused):
        policy.decide({"worktree": True}, "sometimes", spawned=True)


def test_decide_checks_its_arguments() -> None:
    with pytest.raises(policy.WorktreeRefused, match="true or false"):
        policy.decide({"worktree": "yes"}, "ask", spawned=True)
    with pytest.raises(policy.WorktreeRefused, match="string"):
        policy.decide({"worktree": True, "branch": 3}, "ask", spawned=True)
    with pytest.raises(policy.WorktreeRefused, match="need --worktree"):
        policy.decide({"branch": "x"}, "never", spawned=False)
    with pytest.raises(policy.WorktreeRefused, match="worktree: true"):
        policy.decide({"base": "HEAD~1"}, "ask", spawned=True)
    got = policy.decide({"worktree": True, "branch": "b", "base": "HEAD"}, "ask", spawned=True)
    assert (got.branch, got.base) == ("b", "HEAD")


def test_default_branch_is_a_valid_ref_for_any_name() -> None:
    assert policy.default_branch("kid-a", "1234abcd") == "roost/kid-a-1234abcd"
    for name in (
        "Count the TODOs!",
        "..",
        "a..b",
        "ünïcödé ✓",
        "-x",
        "x.lock",
        "",
        "@{-1}",
        "a" * 200,
        "tab\there",
        "~^:?*[\\",
    ):
        branch = policy.default_branch(name, "1234abcd")
        assert branch.startswith("roost/") and branch.endswith("-1234abcd")
        assert git.check_branch_name(branch) == branch, name


def test_limit_and_job_cwd() -> None:
    assert policy.limit_refusal(7, 8) is None
    refusal = policy.limit_refusal(8, 8)
    assert refusal and "agentMaxWorktrees is 8" in refusal
    assert policy.job_cwd("/r", "/r", "/w/1") == "/w/1"
    assert policy.job_cwd("/r/src/a", "/r", "/w/1") == "/w/1/src/a"
    assert policy.job_cwd("/elsewhere", "/r", "/w/1") == "/w/1"


def test_settings_policy_is_checked_and_user_level_only(tmp_path: Path, monkeypatch) -> None:
    assert Settings().agentChildWorktrees == "never"
    assert Settings().agentMaxWorktrees == 8
    assert Settings.from_dict({"agentChildWorktrees": "ask"}).agentChildWorktrees == "ask"
    assert Settings.from_dict({"agentChildWorktrees": "sometimes"}).agentChildWorktrees == "never"
    assert Settings.from_dict({"agentChildWorktrees": True}).agentChildWorktrees == "never"
    assert Settings.from_dict({"agentMaxWorktrees": 2}).agentMaxWorktrees == 2
    assert Settings.from_dict({"agentMaxWorktrees": "9"}).agentMaxWorktrees == 8
    # A project's .pi/roost.json cannot widen it: only the user-level file is read.
    from roost import config

    agent = tmp_path / "agent"
    agent.mkdir()
    project = tmp_path / "project"
    (project / ".pi").mkdir(parents=True)
    (project / ".pi" / "roost.json").write_text(
        json.dumps({"agentChildWorktrees": "always", "agentMaxWorktrees": 99})
    )
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.chdir(project)
    settings = config.load_settings()
    assert (settings.agentChildWorktrees, settings.agentMaxWorktrees) == ("never", 8)


# -- git -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "-x",
        "a..b",
        "a b",
        "x~1",
        "@",
        "HEAD",
        "@{-1}",
        "a:b",
        "refs/../x",
        "x.lock",
        "a\nb",
        "",
        "x/",
        "/x",
        "a\\b",
    ],
)
def test_hostile_branch_names_are_refused(name: str) -> None:
    with pytest.raises(git.GitError, match="bad branch name"):
        git.check_branch_name(name)


def test_not_a_repository_and_bad_base(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(git.GitError, match="not inside a git repository"):
        git.checkout_of(str(plain))
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(git.GitError, match="bad base 'nope'"):
        git.resolve_commit(str(repo), "nope")
    with pytest.raises(git.GitError, match="cannot start with"):
        git.resolve_commit(str(repo), "--output=/tmp/x")
    empty = tmp_path / "empty"
    empty.mkdir()
    sh_git(empty, "init", "-q")
    with pytest.raises(git.GitError, match="no commit yet"):
        git.resolve_commit(str(empty), "HEAD")


def test_worktree_changes_diff_and_report(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "one\n", "b.txt": "two\n"})
    base = git.resolve_commit(str(repo), "HEAD")
    wt = tmp_path / "wt"
    git.add_worktree(str(repo), wt, "roost/t-1", base)
    with pytest.raises(git.GitError, match="already exists"):
        git.add_worktree(str(repo), tmp_path / "wt2", "roost/t-1", base)
    (wt / "a.txt").write_text("one, changed\n")
    sh_git(wt, "commit", "-q", "-am", "change a")
    (wt / "b.txt").write_text("two, not committed\n")
    (wt / "new.txt").write_text("untracked\n")
    index_before = sh_git(wt, "ls-files", "--stage")
    patch = git.diff(str(wt), base)
    assert "one, changed" in patch and "two, not committed" in patch and "untracked" in patch
    assert sh_git(wt, "ls-files", "--stage") == index_before  # its index untouched
    stat = git.diff(str(wt), base, stat=True)
    assert "a.txt" in stat and "b.txt" in stat and "new.txt" in stat
    section = report.format_section(report.gather({"path": str(wt), "branch": "roost/t-1", "base": base}))
    assert "branch roost/t-1" in section
    assert "commits since base (1)" in section and "change a" in section
    assert "a.txt | 2 +-" in section
    assert "UNCOMMITTED" in section and "b.txt" in section and "new.txt" in section
    # The main checkout never moved.
    assert (repo / "a.txt").read_text() == "one\n"
    assert git.current_branch(str(repo)) == "main"
    assert git.worktree_checkouts(str(repo))["roost/t-1"] == str(wt)


def test_report_section_is_bounded_and_keeps_the_section() -> None:
    changes = report.Changes(
        branch="b",
        base="0" * 40,
        path="/w",
        commits=40,
        log=[f"{i:07x} commit {i}" for i in range(40)],
        diffstat="\n".join(f" f{i} | 1 +" for i in range(500)),
        uncommitted=[f"?? n{i}" for i in range(50)],
    )
    section = report.format_section(changes)
    assert len(section) <= report.SECTION_MAX
    assert "… 25 more" in section
    full = "x" * 10_000
    combined = report.Changes(branch="b", base="0" * 40, path="/w")
    text = report.format_section(combined)
    assert "no commits since base" in text
    with_it = report.with_section(full, None, 6000)
    assert len(with_it) == 6000


def test_conflicts_are_found_without_touching_anything(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"f.txt": "base\n"})
    base = git.resolve_commit(str(repo), "HEAD")
    for n, text in ((1, "one\n"), (2, "two\n")):
        wt = tmp_path / f"wt{n}"
        git.add_worktree(str(repo), wt, f"b{n}", base)
        (wt / "f.txt").write_text(text)
        sh_git(wt, "commit", "-q", "-am", f"edit {n}")
    assert git.conflicts(str(repo), "main", "b1") == []
    git.merge(str(repo), "b1", "merge b1", squash=False)
    assert (repo / "f.txt").read_text() == "one\n"
    head = git.head(str(repo))
    assert git.conflicts(str(repo), "main", "b2") == ["f.txt"]
    assert git.head(str(repo)) == head and git.tracked_changes(str(repo)) == []
    # A merge that fails in the checkout is undone.
    with pytest.raises(git.GitError, match="merging b2"):
        git.merge(str(repo), "b2", "merge b2", squash=True)
    assert git.head(str(repo)) == head and git.tracked_changes(str(repo)) == []
    assert not os.path.exists(repo / ".git" / "MERGE_HEAD")


def test_boot_files_first_then_the_rest(tmp_path: Path) -> None:
    from roost.worktrees import checkout

    assert checkout.boot_pathspecs("") == [
        ":(glob)*",
        ":(glob).pi/**",
        ":(glob).agents/**",
        ":(glob).claude/**",
    ]
    assert ":(glob)src/app/*" in checkout.boot_pathspecs("src/app")
    assert ":(glob)src/.pi/**" in checkout.boot_pathspecs("src/app")
    repo = make_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": "a\n",
            "deep/x/y.txt": "y\n",
            ".pi/settings.json": "{}\n",
            "src/app/AGENTS.md": "b\n",
            "src/app/lib/z.py": "z\n",
            "src/other.py": "o\n",
        },
    )
    wt = tmp_path / "wt"
    git.add_worktree(str(repo), wt, "b", git.head(str(repo)), no_checkout=True)
    checkout.start(str(wt), "src/app")
    written = sorted(
        str(p.relative_to(wt))
        for p in wt.rglob("*")
        if p.is_file() and ".git" not in p.parts and p.name != ".git"
    )
    assert written == [".pi/settings.json", "AGENTS.md", "src/app/AGENTS.md", "src/other.py"]
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / checkout.MARKER).write_text("x")
    assert checkout.finish_pending(job_dir, str(wt))
    assert not checkout.pending(job_dir) and not checkout.finish_pending(job_dir, str(wt))
    assert (wt / "deep/x/y.txt").read_text() == "y\n"
    assert git.status(str(wt)) == []


def test_removing_a_worktree_deleted_by_hand_prunes_its_record(tmp_path: Path) -> None:
    import shutil

    repo = make_repo(tmp_path / "repo")
    wt = tmp_path / "wt"
    git.add_worktree(str(repo), wt, "b", git.head(str(repo)))
    shutil.rmtree(wt)
    assert str(wt) in sh_git(repo, "worktree", "list")
    git.remove_worktree(str(repo / ".git"), str(wt))
    assert str(wt) not in sh_git(repo, "worktree", "list")
    assert git.branch_exists(str(repo), "b")
