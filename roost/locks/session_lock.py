"""One writer per session file: the lock that Python and the pi extension both take.

pi has no writer lock, so two pi processes on one session file silently fork it. roost
keeps one writer per file with a lock file that this module and its TypeScript twin
(`roost/extension/session_lock.ts`, running inside pi's node process) implement alike.
Node has no flock, so the protocol uses only exclusive `link`, `unlink`, `open`, `fstat`
and `/proc`. docs/locks.md describes it completely; in short:

- the lock is `<locks dir>/<sha256(abs session path)>.json`, a hard link to a complete
  temp file (so a reader never sees half a record) naming the holder process;
- a lock is stale when its process is gone (or a zombie), or its pid now belongs to another
  process (start time differs), or the file is corrupt and older than `CORRUPT_GRACE`;
- a stale lock is removed only by the one live winner of an exclusive claim file named
  after that exact lock incarnation, so any number of contenders in either language race
  safely, with no timeouts: a claimant that died is recognised by its pid, not by age.

The lock belongs to a process, not to a `SessionLock` object: acquiring a lock this process
already holds returns True, and `release()` removes the file whenever it names this process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from types import TracebackType

from roost.errors import RoostError
from roost.host import paths, procid

# A corrupt lock file younger than this may be a hand edit in progress: treat it as held.
CORRUPT_GRACE = 5.0
# Stray temp files (a writer died between create and link) older than this are swept.
TMP_MAX_AGE = 3600.0
# Bounds that turn a livelock (the lock file changing under us round after round, or an
# absurd number of dead claimants) into a plain "not acquired".
MAX_ROUNDS = 16
MAX_CLAIMS = 64

_local = threading.RLock()


class SessionLocked(RoostError):
    """Another live process holds the writer lock of this session file."""

    def __init__(self, session: str, holder: LockHolder | None) -> None:
        self.session = session
        self.holder = holder
        if holder is None:
            who = "another process (its lock file is unreadable or being replaced)"
        else:
            who = f"pid {holder.pid}" + (f" (peer {holder.peer})" if holder.peer else "")
        super().__init__(f"session {session} is locked by {who}")


class LockError(RoostError):
    """The lock directory could not be used (an I/O error other than contention)."""


@dataclass(frozen=True)
class LockHolder:
    """The process named by a lock file. `start_ticks`/`boot_id` make pid reuse exact."""

    pid: int
    start_time: float
    peer: str | None
    session: str
    start_ticks: int | None = None
    boot_id: str | None = None
    acquired: str | None = None


# --- processes ---------------------------------------------------------------------------

process_start_time = procid.start_time


def holder_is_alive(holder: LockHolder) -> bool:
    """True when the holder's process still runs (the same process, not a reused pid)."""
    proc = procid.inspect(holder.pid)
    if proc is None or proc.zombie:
        return False
    if proc.start_time is None:
        return True
    return procid.matches(proc, holder.start_time, holder.start_ticks, holder.boot_id)


# --- lock files --------------------------------------------------------------------------


normalise_session = paths.normalise_session
lock_path_for = paths.session_lock_path


def _parse(raw: bytes) -> LockHolder | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    pid, start = obj.get("pid"), obj.get("startTime")
    if type(pid) is not int or isinstance(start, bool) or not isinstance(start, int | float):
        return None
    ticks, boot, peer = obj.get("startTicks"), obj.get("bootId"), obj.get("peer")
    session, acquired = obj.get("session"), obj.get("acquired")
    return LockHolder(
        pid=pid,
        start_time=float(start),
        peer=peer if isinstance(peer, str) else None,
        session=session if isinstance(session, str) else "",
        start_ticks=ticks if type(ticks) is int else None,
        boot_id=boot if isinstance(boot, str) else None,
        acquired=acquired if isinstance(acquired, str) else None,
    )


@dataclass(frozen=True)
class _Snapshot:
    """One incarnation of a lock (or claim) file as read at one moment."""

    ident: str  # unique per incarnation: hash of inode, mtime and bytes (which hold a nonce)
    holder: LockHolder | None  # None: corrupt
    age: float


def _read(path: Path) -> _Snapshot | None:
    """The file at `path`, or None when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise LockError(f"cannot open lock file {path}: {e}") from e
    try:
        st = os.fstat(fd)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    ident = hashlib.sha256(f"{st.st_ino}:{st.st_mtime_ns}:".encode() + raw).hexdigest()[:32]
    return _Snapshot(ident, _parse(raw), time.time() - st.st_mtime)


def read_holder(session_path: str | os.PathLike[str]) -> LockHolder | None:
    """The process named by the session's lock file, alive or not; None if none or corrupt."""
    snap = _read(lock_path_for(session_path))
    return None if snap is None else snap.holder


class _State(Enum):
    MINE = "mine"
    LIVE = "live"  # another live process
    BUSY = "busy"  # corrupt but young: could be a hand edit in progress
    STALE = "stale"


def _classify(snap: _Snapshot) -> _State:
    h = snap.holder
    if h is None:
        return _State.BUSY if snap.age < CORRUPT_GRACE else _State.STALE
    if not holder_is_alive(h):
        return _State.STALE
    return _State.MINE if h.pid == os.getpid() else _State.LIVE


def _link(src: Path, dst: Path) -> bool:
    """Exclusive create of `dst` as a hard link to `src`: False when `dst` exists."""
    try:
        os.link(src, dst)
        return True
    except FileExistsError:
        return False
    except OSError as e:
        raise LockError(f"cannot link {src} to {dst}: {e}") from e


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class SessionLock:
    """The writer lock of one session file; see the module docstring."""

    def __init__(self, session_path: str | os.PathLike[str], peer: str | None = None) -> None:
        self.session = normalise_session(session_path)
        self.peer = peer
        self.locks_dir = paths.locks_dir()
        self.path = lock_path_for(self.session, self.locks_dir)
        self._release_on_exit = False

    def __repr__(self) -> str:
        return f"SessionLock({self.session!r}, peer={self.peer!r})"

    # --- public API ---

    def acquire(self, blocking: bool = False, timeout: float | None = None) -> bool:
        """Take the lock; True when this process now holds it (also when it already did).

        With `blocking`, retry with short sleeps until it is free (or `timeout` seconds pass).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.005
        while True:
            with _local:
                if self._try_acquire():
                    return True
            if not blocking:
                return False
            pause = delay
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                pause = min(pause, left)
            time.sleep(pause)
            delay = min(delay * 2, 0.1)

    def release(self) -> None:
        """Remove the lock file if it names this process; otherwise leave it alone."""
        with _local:
            snap = _read(self.path)
            # Only we can replace a file naming us (we are alive, so it is not stale), so
            # nothing can change between this read and the unlink.
            if snap is not None and _classify(snap) is _State.MINE:
                _unlink(self.path)

    def holder(self) -> LockHolder | None:
        """The live holder (possibly this process), or None when free or stale."""
        snap = _read(self.path)
        if snap is None or snap.holder is None:
            return None
        return snap.holder if holder_is_alive(snap.holder) else None

    def held(self) -> bool:
        """True when this process holds the lock."""
        snap = _read(self.path)
        return snap is not None and _classify(snap) is _State.MINE

    def __enter__(self) -> SessionLock:
        # Re-entrant: a `with` inside code that already holds the lock keeps it on exit.
        already = self.held()
        if not self.acquire():
            raise SessionLocked(self.session, self.holder())
        self._release_on_exit = not already
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._release_on_exit:
            self._release_on_exit = False
            self.release()

    # --- protocol ---

    def _record(self) -> bytes:
        pid = os.getpid()
        proc = procid.inspect(pid)
        if proc is None or proc.start_time is None:
            raise LockError(f"cannot read the start time of this process ({pid})")
        acquired = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        record = {
            "pid": pid,
            "startTime": proc.start_time,
            "startTicks": proc.start_ticks,
            "bootId": proc.boot_id,
            "peer": self.peer,
            "session": self.session,
            "acquired": acquired,
            "nonce": secrets.token_hex(16),
        }
        return (json.dumps(record, separators=(",", ":")) + "\n").encode()

    def _write_tmp(self) -> Path:
        paths.ensure_dir(self.locks_dir)
        tmp = self.path.with_name(f"{self.path.name}.tmp.{secrets.token_hex(16)}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, self._record())
            finally:
                os.close(fd)
        except OSError as e:
            _unlink(tmp)
            raise LockError(f"cannot write lock record {tmp}: {e}") from e
        return tmp

    def _try_acquire(self) -> bool:
        snap = _read(self.path)
        if snap is not None and _classify(snap) is _State.MINE:
            return True
        tmp = self._write_tmp()
        try:
            for _ in range(MAX_ROUNDS):
                if _link(tmp, self.path):
                    return True
                snap = _read(self.path)
                if snap is None:
                    continue  # released between our link and our read
                state = _classify(snap)
                if state is not _State.STALE:
                    return state is _State.MINE
                won = self._take_over(tmp, snap.ident)
                if won is not None:
                    return won
            return False
        finally:
            _unlink(tmp)

    def _claim_path(self, ident: str, k: int) -> Path:
        return self.path.with_name(f"{self.path.name}.takeover.{ident}.{k}")

    def _take_over(self, tmp: Path, stale: str) -> bool | None:
        """Replace the stale incarnation `stale`: True won, False lost, None re-evaluate.

        Claims `<lock>.takeover.<stale>.0`, `.1`, ... are exclusive links naming their
        claimant. We may act once we hold claim k and every claimant of 0..k-1 is dead: the
        dead never act again, and a live claimant of a lower number makes us back off. The
        claim name is unique to this incarnation, which never comes back once removed, so a
        late claimant finds the lock changed and leaves it alone.
        """
        own: Path | None = None
        passed: list[Path] = []  # claims of dead claimants below ours
        gone = False  # the stale incarnation is known to be gone for good
        try:
            k = 0
            for _ in range(2 * MAX_CLAIMS):
                if k >= MAX_CLAIMS:
                    return False
                claim = self._claim_path(stale, k)
                if _link(tmp, claim):
                    own = claim
                    break
                other = _read(claim)
                if other is None:
                    continue  # its claimant just finished: try this number again
                if _classify(other) is not _State.STALE:
                    return False  # a live process is taking over (or did): let it
                passed.append(claim)
                k += 1
            else:
                return False
            current = _read(self.path)
            if current is None or current.ident != stale:
                gone = True
                return None
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                gone = True
                return None
            except OSError as e:
                raise LockError(f"cannot remove stale lock {self.path}: {e}") from e
            gone = True
            if not _link(tmp, self.path):
                return None  # a plain acquirer got in after our unlink; it holds it now
            self._sweep()
            return True
        finally:
            # Dead claimants' claims are what keeps a newcomer from claiming their numbers
            # while the stale lock is still there: drop them only once it is gone.
            if gone:
                for claim in passed:
                    _unlink(claim)
            if own is not None:
                _unlink(own)

    def _sweep(self) -> None:
        """After a takeover: drop claims on vanished incarnations and old stray temp files."""
        prefix = self.path.name + "."
        try:
            names = os.listdir(self.locks_dir)
        except OSError:
            return
        now = time.time()
        for name in names:
            if not name.startswith(prefix):
                continue
            full = self.locks_dir / name
            rest = name[len(prefix) :]
            if rest.startswith("takeover."):
                # The lock is ours now, so no claim can name it: each names an incarnation
                # that is gone for good, and removing it cannot let anyone act on it.
                _unlink(full)
            elif rest.startswith("tmp."):
                with contextlib.suppress(OSError):
                    if now - full.stat().st_mtime > TMP_MAX_AGE:
                        _unlink(full)
