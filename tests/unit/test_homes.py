"""roost.host.homes (the homes as strings, for the CLI's quick path) names what roost.host.paths
named with pathlib before: the client and roostd meet at the same socket."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roost.host import homes, paths


@pytest.mark.parametrize("value", ["~/state//x/", "rel/./dir", "/abs/../up", "~", "/"])
def test_a_home_given_is_what_pathlib_names(
    value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ROOST_HOME", value)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", value)
    expected = Path(value).expanduser().absolute()
    for as_string, as_path in (
        (homes.roost_home(), paths.roost_home()),
        (homes.agent_dir(), paths.agent_dir()),
    ):
        assert Path(as_string) == as_path == expected
        assert os.path.isabs(as_string)
    assert Path(homes.socket_path()) == paths.socket_path() == expected / "roostd.sock"


def test_the_default_homes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("ROOST_HOME", "XDG_STATE_HOME", "PI_CODING_AGENT_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert homes.roost_home() == str(tmp_path / ".local" / "state" / "roost")
    assert homes.agent_dir() == str(tmp_path / ".pi" / "agent")
    monkeypatch.setenv("XDG_STATE_HOME", "~/xdg")
    assert homes.roost_home() == str(tmp_path / "xdg" / "roost")
    assert paths.roost_home() == tmp_path / "xdg" / "roost"
