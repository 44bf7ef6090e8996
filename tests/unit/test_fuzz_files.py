"""Files on disk that someone (or a crash) damaged (hypothesis): a corrupted or missing
mailbox `seq`, a truncated or garbled session file, a `roost.json` of any shape. Each gives
its documented recovery — never a crash, never a reused seq, never a lost item:

- `seq` damaged or missing: rebuilt from the highest seq on disk (new/, cur/, bad/);
- a session file's undecodable lines are skipped (a reader may see a last line in writing);
- `roost.json`: a value of the wrong type is ignored (default kept), other keys apply;
  a file that is not a JSON object is ignored as a whole (README, Configuration).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.config import Settings
from roost.mailbox import Mailbox
from roost.pi.transcript import delivered, interrupted, read_entries, render

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    garbage=st.binary(max_size=300),
    posted=st.integers(min_value=1, max_value=6),
    acked=st.integers(min_value=0, max_value=6),
    missing=st.booleans(),
)
def test_a_damaged_seq_counter_never_reuses_a_seq_or_loses_an_item(
    garbage: bytes, posted: int, acked: int, missing: bool
) -> None:
    root = Path(tempfile.mkdtemp(prefix="roost-fuzz-"))
    try:
        box = Mailbox(root / "mb")
        seqs = [box.post(kind="reply", text=f"item {i}", sender=None).seq for i in range(posted)]
        box.ack(seqs[min(acked, posted) - 1] if acked else 0)
        counter = root / "mb" / "seq"
        if missing:
            counter.unlink()
        else:
            counter.write_bytes(garbage)
        box = Mailbox(root / "mb")  # a new process
        new = box.post(kind="reply", text="after the damage", sender=None)
        assert new.seq > max(seqs)
        texts = [i.text for i in box.acked() + box.pending()]
        assert sorted(texts) == sorted([f"item {i}" for i in range(posted)] + ["after the damage"])
    finally:
        shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=150, deadline=None)
@given(cut=st.integers(min_value=0, max_value=4000), noise=st.binary(max_size=200))
def test_a_truncated_or_garbled_session_file_is_read_without_error(cut: int, noise: bytes) -> None:
    lines = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/tmp"},
        {
            "type": "message",
            "id": "a",
            "message": {"role": "user", "content": [{"type": "text", "text": "hello"}], "timestamp": 1},
        },
        {
            "type": "custom_message",
            "customType": "pi-roost-agent-message",
            "content": "hi",
            "details": {"seq": 3, "kind": "message", "from": {"name": "x"}},
        },
        {
            "type": "message",
            "id": "b",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "answer"}],
                "stopReason": "stop",
            },
        },
    ]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    root = Path(tempfile.mkdtemp(prefix="roost-fuzz-"))
    try:
        path = root / "s.jsonl"
        path.write_bytes(data[:cut] + noise)
        entries = read_entries(path)
        assert all(isinstance(e, dict) for e in entries)
        delivered(entries)
        interrupted(entries)
        list(render(entries, verbose=True))
    finally:
        shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=200, deadline=None)
@given(
    data=st.dictionaries(
        st.sampled_from([f.name for f in Settings.__dataclass_fields__.values()] + ["unknown"]), json_values
    )
)
def test_roost_json_of_any_shape_gives_valid_settings(data: dict[str, object]) -> None:
    settings_ = Settings.from_dict(data)
    defaults = Settings()
    for name in Settings.__dataclass_fields__:
        value = getattr(settings_, name)
        default = getattr(defaults, name)
        assert type(value) is type(default) or (
            (default is None or isinstance(default, float)) and isinstance(value, float)
        ), (name, value)
        if name not in data:
            assert value == default
