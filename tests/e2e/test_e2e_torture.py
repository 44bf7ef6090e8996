"""Crash torture, the short CI preset of benchmarks/torture.py: a storm of tagged replies,
agent messages and child reports into real-pi jobs while workers, pis and roostd are
SIGKILLed at random (and at chosen points of the delivery path), and delivered items copied
back into a mailbox under a seq never handed out. Nothing the senders were told was accepted
may be lost or doubled, every replay ends in bad/, every mailbox file is 0600. The figures
are printed as JSON (-s to see them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import torture


@pytest.mark.slow
def test_crash_torture_loses_and_doubles_nothing() -> None:
    ci = torture.CI
    # Settling takes ~10 s; 150 s ends (and logs what did not settle) inside pytest's timeout.
    result = torture.torture(ci["duration"], ci["rate"], ci["kill_every"], seed=7, settle=150.0)
    print(json.dumps(result))
    assert "did not settle" not in result["errors"], result
    assert result["accepted"] > 100 and result["kills_total"] > 20, result
    assert result["lost"] == 0 and result["duplicated"] == 0, result
    assert result["replayed"] > 0 and result["replays_not_quarantined"] == [], result
    assert result["mailbox_files_not_0600"] == [], result
