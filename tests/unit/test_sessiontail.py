"""roost.pi.sessiontail: a session left in part of a line is ended before pi starts on it."""

from __future__ import annotations

import os
from pathlib import Path

from roost.pi.sessiontail import end_cut_line

ENTRY = b'{"type":"message","id":"a1","parentId":null}\n'


def test_a_fragment_at_the_end_is_ended_and_nothing_else_changes(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes(ENTRY + ENTRY[:20])
    assert end_cut_line(str(session)) is True
    assert session.read_bytes() == ENTRY + ENTRY[:20] + b"\n"
    assert end_cut_line(str(session)) is False  # once is enough
    assert session.read_bytes() == ENTRY + ENTRY[:20] + b"\n"


def test_whole_empty_and_absent_sessions_are_left_alone(tmp_path: Path) -> None:
    whole, empty = tmp_path / "whole.jsonl", tmp_path / "empty.jsonl"
    whole.write_bytes(ENTRY * 3)
    empty.write_bytes(b"")
    assert end_cut_line(str(whole)) is False
    assert end_cut_line(str(empty)) is False
    assert end_cut_line(str(tmp_path / "absent.jsonl")) is False
    assert whole.read_bytes() == ENTRY * 3 and empty.read_bytes() == b""
    assert not (tmp_path / "absent.jsonl").exists()


def test_a_symlink_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"no newline")
    link = tmp_path / "s.jsonl"
    os.symlink(target, link)
    assert end_cut_line(str(link)) is False
    assert target.read_bytes() == b"no newline"
