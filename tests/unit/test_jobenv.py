"""roost.job.env: what a caller's environment becomes for a job (names roost keeps to itself,
bad input, the file and its mode, the composition with roost's own variables)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from roost.job import env as jobenv


def test_caller_env_leaves_roosts_own_and_non_utf8_variables_behind() -> None:
    sent = jobenv.caller_env(
        {
            "PATH": "/bin",
            "ANTHROPIC_API_KEY": "k",
            "ROOST_HOME": "/h",
            "ROOST_JOB_ID": "j",
            "PI_CODING_AGENT_DIR": "/a",
            "PWD": "/p",
            "PI_JOB_TOKEN": "t",
            "PI_OFFLINE": "1",
            "BAD": "\udcff",
        }
    )
    assert sent == {"PATH": "/bin", "ANTHROPIC_API_KEY": "k", "PI_OFFLINE": "1"}


def test_checked_keeps_a_valid_env_without_roosts_names() -> None:
    assert jobenv.checked(None) is None
    assert jobenv.checked({}) == {}
    assert jobenv.checked({"A": "1", "ROOST_EXT_SOCK": "/x", "OLDPWD": "/o"}) == {"A": "1"}


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ([["A", "1"]], "must be an object"),
        ({"": "1"}, "bad variable name"),
        ({"A=B": "1"}, "bad variable name"),
        ({"A\0": "1"}, "bad variable name"),
        ({"A": 1}, "value of A"),
        ({"A": "x\0y"}, "value of A"),
        ({"A": "x" * jobenv.MAX_BYTES}, "at most"),
    ],
)
def test_checked_refuses_what_is_not_an_environment(value: object, why: str) -> None:
    with pytest.raises(jobenv.BadEnvironment, match=why) as caught:
        jobenv.checked(value)
    assert "xxxx" not in str(caught.value)  # a value is never repeated in the error


def test_the_file_is_private_and_read_back(tmp_path: Path) -> None:
    assert jobenv.load(tmp_path) is None and jobenv.summary(tmp_path) is None
    jobenv.save(tmp_path, {"B": "2", "A": "1"}, "roost run")
    path = tmp_path / "env.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert jobenv.load(tmp_path) == {"A": "1", "B": "2"}
    summary = jobenv.summary(tmp_path)
    assert summary is not None and summary["names"] == ["A", "B"]
    assert summary["source"] == "roost run" and "1" not in str(summary["names"])
    path.write_text('{"env": {"A": 1}}')
    assert jobenv.load(tmp_path) is None  # unreadable: roostd's environment, as before


def test_compose_lays_roosts_variables_over_the_stored_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOST_PI", "/my/pi")
    monkeypatch.setenv("ROOSTD_ONLY", "x")
    monkeypatch.setenv("PI_JOB_TOKEN", "secret")
    env = jobenv.compose({"A": "1", "ROOST_JOB_ID": "caller"}, {"ROOST_JOB_ID": "job"})
    assert env == {
        "A": "1",
        "ROOST_PI": "/my/pi",
        "ROOST_JOB_ID": "job",
        **{k: v for k, v in os.environ.items() if k.startswith("ROOST_") and k != "ROOST_JOB_ID"},
    }
    legacy = jobenv.compose(None, {"ROOST_JOB_ID": "job"})
    assert legacy["ROOSTD_ONLY"] == "x" and "PI_JOB_TOKEN" not in legacy


def test_save_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "job").symlink_to(outside)
    with pytest.raises(OSError, match="symlink"):
        jobenv.save(tmp_path / "job", {"A": "1"}, "roost start")
    assert list(outside.iterdir()) == []
