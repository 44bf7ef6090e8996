"""A paired device unused for `webDeviceIdleDays` (roost.json, 14 by default) must pair
again: its cookie is refused and the device is forgotten. Time is an injected clock, the
setting the real roost.json (no roostd: Starlette's TestClient)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from roost.web import bridge
from roost.web.app import create_app
from roost.web.devices import Store
from roost.web.guard import Settings

DAY = 86400.0
START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


class QuietHub(bridge.Hub):
    def start(self) -> None:
        self.connected = True

    def stop(self) -> None:
        pass


@pytest.fixture
def clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Clock:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "rh"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    (tmp_path / "agent").mkdir()
    return Clock()


def setting(tmp_path: Path, **values: Any) -> None:
    (tmp_path / "agent" / "roost.json").write_text(json.dumps(values))


@pytest.fixture
def browser(clock: Clock) -> Iterator[TestClient]:
    """A paired browser, whose server's store reads the injected clock."""
    store = Store(clock=clock)
    settings = Settings(hosts=frozenset({"127.0.0.1:8477"}), store=store)
    with TestClient(
        create_app(settings, QuietHub()), base_url="http://127.0.0.1:8477", follow_redirects=False
    ) as client:
        assert client.get(f"/pair?code={store.new_code()}").status_code == 303
        assert client.get("/").status_code == 200
        yield client


def test_a_device_unused_for_the_default_14_days_must_pair_again(clock: Clock, browser: TestClient) -> None:
    clock.now += 13 * DAY
    assert browser.get("/").status_code == 200  # used: its window starts again
    clock.now += 13 * DAY
    assert browser.get("/").status_code == 200
    clock.now += 14 * DAY + 60
    answer = browser.get("/")
    assert answer.status_code == 401 and "roost web pair" in answer.text
    assert Store(clock=clock).devices() == []  # forgotten: `roost web devices` lists it no more
    clock.now -= 30 * DAY
    assert browser.get("/").status_code == 401  # and it stays out


def test_the_window_is_the_setting(clock: Clock, browser: TestClient, tmp_path: Path) -> None:
    setting(tmp_path, webDeviceIdleDays=1)
    clock.now += 0.9 * DAY
    assert browser.get("/").status_code == 200
    clock.now += 1.1 * DAY
    assert browser.get("/").status_code == 401


def test_zero_turns_the_expiry_off(clock: Clock, browser: TestClient, tmp_path: Path) -> None:
    setting(tmp_path, webDeviceIdleDays=0)
    clock.now += 400 * DAY
    assert browser.get("/").status_code == 200


def test_a_listing_drops_the_idle_devices(clock: Clock) -> None:
    store = Store(clock=clock)
    old, _ = store.add_device("old phone")
    clock.now += 10 * DAY
    new, _ = store.add_device("laptop")
    clock.now += 5 * DAY
    assert [d.id for d in store.devices()] == [new.id]
    assert old.id not in json.dumps(json.loads(store.devices_file.read_text()))
