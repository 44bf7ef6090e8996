"""roost.locks.writers' second part (a pi outside roost, when the session changed outside roost)
does not count a pi whose environment reads empty: an exiting process's does. Counted,
with its missing HOME read as roostd's, the exit of any pi of the user refused a job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roost.locks import writers


def fake_pi(proc: Path, pid: str, environ: bytes) -> None:
    folder = proc / pid
    folder.mkdir(parents=True)
    (folder / "comm").write_bytes(b"pi\n")
    (folder / "environ").write_bytes(environ)
    # /proc/PID/stat: field 22 (the 20th after the command's ")") is the start, in ticks.
    (folder / "stat").write_bytes(
        f"{pid} (pi) ".encode() + b" ".join([b"S"] + [b"0"] * 18 + [b"500"]) + b"\n"
    )


@pytest.mark.parametrize(
    ("environ", "counted"),
    [
        (b"", False),  # exiting: its memory is gone
        (b"HOME=/elsewhere\0", False),  # another home: another roost's world
        (b"ROOST_EXT_SOCK=/x/ext.sock\0", False),  # a job's pi
        (b"TERM=xterm\0", True),  # no HOME: read as this one (the rule is unchanged)
        (b"HOME=/home/me\0TERM=xterm\0", True),  # a person's pi, started after roost let go
    ],
)
def test_which_pis_outside_roost_count(
    environ: bytes, counted: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writers, "PROC", str(tmp_path))
    monkeypatch.setenv("HOME", "/home/me")
    monkeypatch.setattr(writers, "_lock_holders", lambda: set())
    fake_pi(tmp_path, "4242", environ)
    found = writers.pis_outside_roost(["4242"], os.getuid(), since=1.0)  # it started at 5 s
    assert [w.pid for w in found] == ([4242] if counted else [])
