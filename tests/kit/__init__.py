"""Helpers the test layers share (the set-up itself is kit.lab.Lab):

- `kit.wait`: wait_until, and looking at and killing processes;
- `kit.matchers`: matchers and readers for the scripted model's requests and session files;
- `kit.attach`: tmux, the writer-lock watcher and a raw foreground peer for attach tests.
"""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
"""Files tests give pi (tests/fixtures/*.ts: extensions more than one test loads)."""
