"""Fixtures for roost's tests (helpers live in tests/kit/, the set-up in kit.lab).

- `roost_env`: a Lab (temp ROOST_HOME, pi agent dir, HOME, work dir) without a model, on
  the selected pi; `fake_pi_env`: the same on the fake pi (tests/fakepi/fakepi.py).
- `make_lab(llm=None, env=None, **roost_json)`: real-pi Labs with a scripted model (the lab's own,
  or `llm`), closed after the test.
- `llm`: roost's scripted model on 127.0.0.1; `real_pi`: the pinned pi, or a clear failure.

Every lab prints its diagnostics (roostd's and the workers' logs; shown when the test
failed) and is closed: roostd and every process it left behind are gone after the test.
Everything under tests/e2e/ (the real pi) is marked `e2e`; tests/rayrunner is collected only under
scripts/test-ray. In parallel workers (pytest-xdist,
scripts/test) the tests marked `slow` are handed out first, so that no long test starts last
and holds the run's end alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.lab import Lab
from kit.testpi import SETUP_HINT, require_pi

from roost.fakellm import FakeLLM
from roost.wire import protocol

E2E_DIR = Path(__file__).resolve().parent / "e2e"

# tests/rayrunner runs only under scripts/test-ray (a Ray head in a network namespace of its own,
# roost[ray] in .venv-ray), which sets ROOST_RAY_TESTS; anywhere else it is not collected.
collect_ignore = [] if os.environ.get("ROOST_RAY_TESTS") else ["rayrunner"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The e2e marker follows the directory: every test under tests/e2e/ runs the real pi.
    In an xdist worker (every worker orders alike), the slow tests go first."""
    for item in items:
        if E2E_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _frame_codec_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that opens the view or roost web in this process switches its frames to
    orjson (protocol.use_fast_json, for good, as those long-lived clients do): the next
    test gets the codec it would have had alone."""
    monkeypatch.setattr(protocol, "_fast", protocol._fast)


def _closing(lab: Lab) -> None:
    print(lab.diagnostics())
    lab.close()


@pytest.fixture
def roost_env() -> Iterator[Lab]:
    """An isolated roost without a model; roostd and all its workers and their children are
    gone after the test."""
    lab = Lab()
    try:
        yield lab
    finally:
        _closing(lab)


@pytest.fixture
def fake_pi_env() -> Iterator[Lab]:
    """`roost_env` whose pi jobs run the fake pi (tests/fakepi/fakepi.py)."""
    lab = Lab(pi="fake")
    try:
        yield lab
    finally:
        _closing(lab)


@pytest.fixture
def view_env(fake_pi_env: Lab, monkeypatch: pytest.MonkeyPatch) -> Lab:
    """`fake_pi_env` whose variables this process uses too: a textual app under test (its
    pilot) talks to the lab's roostd from here."""
    for key in ("ROOST_HOME", "PI_CODING_AGENT_DIR", "HOME", "PI_OFFLINE", "ROOST_PI"):
        if key in fake_pi_env.env:
            monkeypatch.setenv(key, fake_pi_env.env[key])
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.chdir(fake_pi_env.work)
    return fake_pi_env


@pytest.fixture(scope="session")
def real_pi() -> list[str]:
    """The pinned pi (end-to-end tests): a clear failure, never a skip, when it is missing."""
    try:
        return require_pi()
    except FileNotFoundError as e:
        pytest.fail(f"these tests need the real pi; {SETUP_HINT}: {e}", pytrace=False)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """roost's scripted model on 127.0.0.1 (a held reply waits at most two minutes)."""
    with FakeLLM(hold_timeout=120.0) as server:
        yield server


@pytest.fixture
def make_lab() -> Iterator[Callable[..., Lab]]:
    """Real-pi Labs with a scripted model, closed after the test with their diagnostics
    printed: `make_lab(**roost_json_settings)`; `llm=` shares the test's `llm`, `env=` adds
    variables."""
    labs: list[Lab] = []

    def make(llm: FakeLLM | None = None, env: dict[str, str] | None = None, **settings: Any) -> Lab:
        lab = Lab(llm=llm if llm is not None else True, settings=settings or None, env=env)
        labs.append(lab)
        return lab

    try:
        yield make
    finally:
        for lab in labs:
            _closing(lab)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """roost's and pi's folders in `tmp_path`, for in-process tests of the daemon's parts
    (a test module makes it autouse with `pytestmark = pytest.mark.usefixtures("home")`)."""
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "rh"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path
