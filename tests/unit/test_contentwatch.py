"""A content watch wakes on a write, a file made, moved or deleted; never on a read (which
would let a reader wake itself, or two followers of one file wake each other forever)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from roost.host.contentwatch import wait_for_change


def watch_in_background(path: Path, timeout: float) -> tuple[threading.Thread, list[bool]]:
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(wait_for_change(path, timeout)))
    thread.start()
    time.sleep(0.3)  # the observer's watch is in place (it is added before wait_for_change waits)
    return thread, result


def test_reading_the_file_is_not_a_change(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text("one\n")
    thread, result = watch_in_background(path, 1.5)
    for _ in range(20):
        path.read_text()
    thread.join()
    assert result == [False]


def test_appending_a_line_is_a_change(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text("one\n")
    thread, result = watch_in_background(path, 30)
    started = time.monotonic()
    with open(path, "a") as handle:
        handle.write("two\n")
    thread.join()
    assert result == [True] and time.monotonic() - started < 30


def test_a_sibling_changing_is_not_the_files_change(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text("one\n")
    thread, result = watch_in_background(path, 1.5)
    (tmp_path / "job.json").write_text("{}")
    thread.join()
    assert result == [False]


def test_the_file_appearing_is_a_change(tmp_path: Path) -> None:
    path = tmp_path / "later" / "session.jsonl"
    thread, result = watch_in_background(path, 30)
    path.write_text("first\n")
    thread.join()
    assert result == [True]
