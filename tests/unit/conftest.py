"""The unit layer's fixtures: `box`, an empty mailbox in the test's temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.mailbox import Mailbox


@pytest.fixture
def box(tmp_path: Path) -> Mailbox:
    return Mailbox(tmp_path / "mailbox")
