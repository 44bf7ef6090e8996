"""The remote wire (roost.wire.remote) and the hub's checks (roost.supervise.remotehub,
roost.supervise.attempts), without Ray: in the clear only on loopback, TLS with roostd's
certificate pinned (another certificate is refused), an opening with a wrong secret or an
older attempt closed unanswered, roostd's copy of a stream appended only at its own size."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kit.certs import make_cert

from roost.mailbox import Mailbox
from roost.supervise import attempts
from roost.supervise.remotehub import RemoteHub, SyncSession
from roost.wire import remote as remotewire


def test_the_clear_is_for_loopback_only() -> None:
    async def go() -> None:
        with pytest.raises(ConnectionError, match="without TLS"):
            await remotewire.connect("10.1.2.3:4000", None, {})

    asyncio.run(go())
    assert remotewire.is_loopback("127.0.0.1") and remotewire.is_loopback("::1")
    assert not remotewire.is_loopback("0.0.0.0")


def test_tls_trusts_exactly_roostds_certificate(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path, "roostd")
    other, _ = make_cert(tmp_path, "other")

    async def go() -> tuple[dict[str, Any] | None, bool]:
        got: list[dict[str, Any] | None] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            got.append(await remotewire.read_frame(reader))
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=remotewire.server_context(cert, key))
        port = server.sockets[0].getsockname()[1]
        pinned = Path(cert).read_text()
        _, writer = await remotewire.connect(f"127.0.0.1:{port}", pinned, {"hello": 1})
        for _ in range(100):
            if got:
                break
            await asyncio.sleep(0.02)
        writer.close()
        refused = False
        try:
            await remotewire.connect(f"127.0.0.1:{port}", Path(other).read_text(), {"hello": 2})
        except OSError:  # ssl.SSLCertVerificationError
            refused = True
        server.close()
        return (got[0] if got else None), refused

    first, refused = asyncio.run(go())
    assert first == {"hello": 1}
    assert refused


class FakeRecord:
    def __init__(self, job_dir: Path) -> None:
        self.id = "abcd1234"
        self.dir = job_dir
        self.session = str(job_dir / "session.jsonl")


def test_only_the_current_attempts_secret_opens(tmp_path: Path) -> None:
    record = FakeRecord(tmp_path)
    first = attempts.next_attempt(tmp_path, "ray", "http://127.0.0.1:1", record.id)
    hub = RemoteHub(lambda job: record if job == record.id else None, lambda r: None, None)  # type: ignore[arg-type,return-value]

    def opening(attempt: attempts.Attempt, secret: str | None = None) -> Any:
        return hub._proved(remotewire.opening("sync", record.id, attempt.attempt, secret or attempt.secret))

    assert opening(first) is record
    assert opening(first, "wrong") is None
    assert hub._proved({**remotewire.opening("link", "nojob", 1, first.secret)}) is None
    second = attempts.next_attempt(tmp_path, "ray", "http://127.0.0.1:1", record.id)
    assert second.submission == f"roost-{record.id}-2" and second.secret != first.secret
    assert opening(first) is None  # replaced: its secret no longer opens
    assert opening(second) is record
    attempts.mark_ended(tmp_path, 2)
    assert opening(second) is None  # ended: nothing of it may act
    assert (tmp_path / "remote.json").stat().st_mode & 0o777 == 0o600


def test_a_stream_is_appended_only_at_roostds_size(tmp_path: Path) -> None:
    record = FakeRecord(tmp_path)
    session = SyncSession(record, None, None, None)  # type: ignore[arg-type]
    enc = remotewire.encode
    assert session._append("session", 0, enc(b"one\n")) == 4
    assert session._append("session", 0, enc(b"one\n")) == 4  # sent again: not written twice
    assert session._append("session", 9, enc(b"gap\n")) == 4  # a gap: refused, told the size
    assert session._append("session", 4, enc(b"two\n")) == 8
    assert Path(record.session).read_bytes() == b"one\ntwo\n"
    with pytest.raises(ValueError):
        session._append("job.json", 0, enc(b"{}"))


def test_an_ack_that_moves_items_tells_roostd_the_job_changed(tmp_path: Path) -> None:
    """The link's `done` may reach roostd before the sync connection's ack: the ack itself
    must wake what weighs the job (`roost wait`, the rows' counts)."""
    record = FakeRecord(tmp_path)
    box = Mailbox(tmp_path / "mailbox")
    changed: list[object] = []
    session = SyncSession(record, box, None, None, changed.append)  # type: ignore[arg-type]
    item = box.post(kind="reply", text="hi", sender=None)
    assert session._handle({"op": "ack", "upto": item.seq}) == {"moved": 1}
    assert changed == [record] and not box.pending()
    assert session._handle({"op": "ack", "upto": item.seq}) == {"moved": 0}  # again: no change
    assert changed == [record]
