"""roost.display.answerpaths.session_file: which session file named in roostd's answer the CLI
hands to pi (`roost attach`) or reads (`roost logs`). Inside ROOST_HOME, any; outside it,
only the job's handed-off session (docs/security.md, door 1): the job's own record names
it, it is the user's regular file (no symlink) in folders no one else may write, and it is
a pi session. A lying roostd cannot aim the CLI at another file with its answer alone."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from roost.display.answerpaths import session_file

HEADER = '{"type":"session","version":3,"id":"s1","timestamp":"2026-12-06T00:00:00Z","cwd":"/"}\n'


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "rh"
    (home / "jobs" / "j1").mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("ROOST_HOME", str(home))
    return home


def record(home: Path, session: str | None, job: str = "j1") -> None:
    """The job's record as roostd writes it at the hand-off (only `session` matters here)."""
    path = home / "jobs" / job / "job.json"
    path.write_text(json.dumps({"id": job, "kind": "pi", "session": session}))
    path.chmod(0o600)


def pi_session(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + '{"type":"message","id":"m1","parentId":null}\n')
    return path


def refused(job: str, path: object, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        session_file(job, path)
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "outside" in err or "no path" in err, err
    assert "refusing to use it" in err, err
    return err


def test_a_session_inside_roost_home_needs_no_record(home: Path) -> None:
    inside = home / "jobs" / "j1" / "session.jsonl"
    assert session_file("j1", str(inside)) == inside  # missing, or anything: roost's own


def test_the_handed_off_session_the_record_names_is_used(home: Path, tmp_path: Path) -> None:
    session = pi_session(tmp_path / "pi-sessions" / "--work--" / "fg.jsonl")
    record(home, str(session))
    assert session_file("j1", str(session)) == session


def test_a_handed_off_session_not_written_yet_is_used(home: Path, tmp_path: Path) -> None:
    """/roost-bg before any message: pi writes the file at the first one."""
    session = tmp_path / "pi-sessions" / "new.jsonl"
    session.parent.mkdir()
    record(home, str(session))
    assert session_file("j1", str(session)) == session
    session.write_text("")  # empty: pi writes its header into it
    assert session_file("j1", str(session)) == session


def test_a_path_the_record_does_not_name_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The answer alone vouches for nothing: even a real pi session of the user's is refused
    unless the job's own record names it."""
    other = pi_session(tmp_path / "pi-sessions" / "other.jsonl")
    err = refused("j1", str(other), capsys)  # no record at all
    assert "the job has no record" in err and str(other) in err
    record(home, str(tmp_path / "pi-sessions" / "mine.jsonl"))
    err = refused("j1", str(other), capsys)
    assert "the job's record names" in err and "mine.jsonl" in err
    record(home, None)
    assert "the job's record names None" in refused("j1", str(other), capsys)


def test_a_record_that_is_a_symlink_is_not_read(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = pi_session(tmp_path / "s" / "fg.jsonl")
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_text(json.dumps({"session": str(session)}))
    (home / "jobs" / "j1" / "job.json").symlink_to(elsewhere)
    assert "the job's record cannot be trusted" in refused("j1", str(session), capsys)


def test_a_recorded_file_that_is_no_pi_session_is_refused_untouched(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thesis = tmp_path / "docs" / "thesis.tex"
    thesis.parent.mkdir()
    thesis.write_text("years of work\n")
    record(home, str(thesis))
    assert "not a pi session" in refused("j1", str(thesis), capsys)
    assert thesis.read_text() == "years of work\n"
    empty = tmp_path / "docs" / "__init__.py"  # pi would write a header into an empty file
    empty.write_text("")
    record(home, str(empty))
    assert "empty, and not named *.jsonl" in refused("j1", str(empty), capsys)
    missing = tmp_path / "docs" / "notes.txt"
    record(home, str(missing))
    assert "missing, and not named *.jsonl" in refused("j1", str(missing), capsys)
    assert not missing.exists()


def test_a_recorded_symlink_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A symlink, even to a real pi session, is refused; so is a dangling one (pi would
    create its target)."""
    session = pi_session(tmp_path / "s" / "real.jsonl")
    link = tmp_path / "s" / "fg.jsonl"
    link.symlink_to(session)
    record(home, str(link))
    assert "a symlink" in refused("j1", str(link), capsys)
    dangling = tmp_path / "s" / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "s" / "nowhere.jsonl")
    record(home, str(dangling))
    assert "a symlink" in refused("j1", str(dangling), capsys)
    assert not (tmp_path / "s" / "nowhere.jsonl").exists()


def test_a_fifo_is_refused_at_once(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "s" / "fg.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    record(home, str(fifo))
    started = time.monotonic()
    assert "not a regular file" in refused("j1", str(fifo), capsys)
    assert time.monotonic() - started < 5


def test_a_file_or_folder_others_may_write_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = pi_session(tmp_path / "s" / "fg.jsonl")
    record(home, str(session))
    session.chmod(0o666)
    assert "writable by others" in refused("j1", str(session), capsys)
    session.chmod(0o644)
    open_dir = tmp_path / "s"
    open_dir.chmod(0o777)  # not sticky: another user could swap the file
    try:
        assert "its folder is not yours alone" in refused("j1", str(session), capsys)
    finally:
        open_dir.chmod(0o755)
    assert session_file("j1", str(session)) == session


def test_no_path_and_relative_paths_are_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for path in (None, "", "a\0b", 7):
        refused("j1", path, capsys)
    record(home, "fg.jsonl")
    assert "not an absolute path" in refused("j1", "fg.jsonl", capsys)
