"""roost.host.trusted: the one reader of files another local user could have planted, the
folders roost may climb through, ROOST_HOME and its socket; and the branch-name check
that no `.git` in the temp folder can break."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest
from kit import intruder

from roost.definitions import store
from roost.host import trusted as trust


def test_a_regular_file_of_the_users_is_read(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text("x = 1\n")
    assert trust.read_text(path) == "x = 1\n"
    link = tmp_path / "link.toml"
    link.symlink_to(path)
    assert trust.read_text(link) == "x = 1\n"  # the user's own link: followed
    with pytest.raises(trust.UntrustedFile, match="a symlink"):
        trust.read_text(link, follow=False)  # a repository's file must be the file itself


def test_a_device_is_refused_at_once_never_read(tmp_path: Path) -> None:
    link = tmp_path / "zero.toml"
    link.symlink_to("/dev/zero")
    started = time.monotonic()
    with pytest.raises(trust.UntrustedFile, match="not a regular file"):
        trust.read_bytes(link)
    assert time.monotonic() - started < 0.5


def test_a_fifo_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    done = threading.Event()

    def read() -> None:
        with pytest.raises(trust.UntrustedFile, match="not a regular file"):
            trust.read_bytes(fifo)
        done.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    assert done.wait(5), "reading a FIFO blocked"
    with pytest.raises(trust.UntrustedFile):
        trust.read_bytes(fifo, follow=False)


def test_past_the_limit_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * 5000)
    assert len(trust.read_bytes(path, 5000)) == 5000
    with pytest.raises(trust.UntrustedFile, match="larger than 4999 bytes"):
        trust.read_bytes(path, 4999)


def test_writable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text("x = 1\n")
    for mode in (0o620, 0o602, 0o666):
        os.chmod(path, mode)
        with pytest.raises(trust.UntrustedFile, match="writable by others"):
            trust.read_text(path)


def fake_stat(mode: int, uid: int) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))


def test_who_and_what_may_be_trusted() -> None:
    me, other = os.getuid(), os.getuid() + 4242
    assert trust.file_problem(fake_stat(stat.S_IFREG | 0o644, me)) is None
    assert trust.file_problem(fake_stat(stat.S_IFREG | 0o644, 0)) is None  # root's
    assert "another user" in str(trust.file_problem(fake_stat(stat.S_IFREG | 0o644, other)))
    assert trust.file_problem(fake_stat(stat.S_IFIFO | 0o600, me)) == "not a regular file"
    assert trust.dir_problem(fake_stat(stat.S_IFDIR | 0o755, me)) is None
    assert trust.dir_problem(fake_stat(stat.S_IFDIR | 0o1777, 0)) is None  # /tmp
    assert trust.dir_problem(fake_stat(stat.S_IFDIR | 0o777, 0)) is not None  # not sticky
    assert trust.dir_problem(fake_stat(stat.S_IFDIR | 0o775, me)) is not None
    assert "another user" in str(trust.dir_problem(fake_stat(stat.S_IFDIR | 0o1777, other)))
    assert trust.dir_problem(fake_stat(stat.S_IFLNK | 0o777, me)) == "not a directory"


def test_inside_resolves_symlinks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "jobs").mkdir(parents=True)
    (home / "escape").symlink_to("/etc")
    assert trust.inside(home / "jobs" / "x", home)
    assert trust.inside(home, home)
    assert not trust.inside(home / "escape" / "passwd", home)
    assert not trust.inside(home / ".." / "other", home)
    assert not trust.inside(str(home) + "-twin/x", home)


def test_roost_home_must_be_the_users(tmp_path: Path) -> None:
    home = tmp_path / "rh"
    assert trust.home_problem(home) is None  # not made yet: roostd makes it
    home.mkdir(mode=0o700)
    assert trust.home_problem(home) is None
    os.chmod(home, 0o777)
    assert "not yours alone" in str(trust.home_problem(home))
    os.chmod(home, 0o700)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(home / "roostd.sock"))
    try:
        os.chmod(home / "roostd.sock", 0o600)
        assert trust.socket_problem(home / "roostd.sock") is None
        os.chmod(home / "roostd.sock", 0o666)
        assert "writable by others" in str(trust.socket_problem(home / "roostd.sock"))
    finally:
        sock.close()
    (home / "plain").write_text("")
    assert "not a socket" in str(trust.socket_problem(home / "plain"))


def test_roost_home_of_another_user_is_refused() -> None:
    if intruder.skip_reason():
        pytest.skip(intruder.skip_reason())
    theirs = intruder.own_dir()
    try:
        assert "not by you" in str(trust.home_problem(theirs))
        assert "would be made where others can write" in str(trust.home_problem(theirs / "a" / "rh"))
        with pytest.raises(trust.UntrustedFile, match="not by you"):
            trust.check_home(theirs)
    finally:
        os.rmdir(theirs)


def test_the_project_search_climbs_only_trusted_folders(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".pi" / "roost" / "agents").mkdir(parents=True)
    (repo / "src" / "deep").mkdir(parents=True)
    assert store.repo_root(repo / "src" / "deep") == repo
    assert store.project_dir(repo / "src") == repo / ".pi" / "roost" / "agents"
    os.chmod(repo, 0o777)  # anyone could have planted what lies in it
    assert store.repo_root(repo / "src") is None and store.project_dir(repo / "src") is None
    os.chmod(repo, 0o755)
    (repo / ".pi").rename(repo / "pi-real")
    (repo / ".pi").symlink_to(repo / "pi-real")  # a repository's symlink is not followed
    assert store.project_dir(repo) is None


def test_the_branch_check_ignores_the_temp_folder(tmp_path: Path, monkeypatch) -> None:
    """An empty `.git` file any user can make in a shared TMPDIR made every name bad."""
    from roost.worktrees import git

    (tmp_path / ".git").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert git.check_branch_name("roost/fix-1") == "roost/fix-1"
    with pytest.raises(git.GitError, match="bad branch name"):
        git.check_branch_name("a..b")
