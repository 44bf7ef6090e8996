"""`roost web`'s secrets: paired devices and one-time pairing codes, under $ROOST_HOME/web/.

    web/devices.json   the paired devices: id, name, when paired and last seen, and the
                       SHA-256 of each device's session token (never the token)
    web/pairing.json   the open pairing codes: the SHA-256 of each code and when it expires
    web/server.json    the running server's URL and pid (`roost web pair` reads it)

A device not used for `webDeviceIdleDays` (roost.json; 14 by default) is dropped at its
next request or listing: that browser must pair again. Its use is known to within
SEEN_EVERY (or a tenth of the window, if shorter).

Every file is 0600 in a 0700 directory and written atomically. The files are the one
source of truth: `roost web pair` adds a code and `roost web revoke` drops a device while a
server runs, and the server reads them again when they change (a stat per request).

A session token and a pairing code are 256 and 128 random bits: a hash without a salt is
enough (no dictionary reaches them), and SHA-256 keeps the check constant-time on the hash.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from roost.host import paths
from roost.host.fsutil import atomic_write_json

PAIRING_TTL = 300.0
"""A pairing code is good for 5 minutes, once."""
SEEN_EVERY = 600.0
"""A device's `lastSeen` is written at most this often (a request is not a file write)."""
PAIRING_OPEN_MAX = 20
"""At most this many unexpired codes at once: the oldest go first."""


def idle_limit() -> float | None:
    """Seconds a device may go unused before it must pair again (None: no limit)."""
    from roost.config import load_settings

    days = load_settings().webDeviceIdleDays
    return days * 86400.0 if days > 0 else None


def _epoch(stamp: str | None) -> float:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _stamp(epoch: float) -> str:
    """`epoch` as roost's timestamps are written (ISO-8601 UTC, milliseconds)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def web_dir() -> Path:
    return paths.roost_home() / "web"


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _read(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _write(path: Path, data: Any) -> None:
    paths.ensure_dir(path.parent)
    atomic_write_json(path, data, mode=0o600)


def csrf_token(session_token: str) -> str:
    """The per-session CSRF token: derived from the session's own secret, so it needs no
    storage and is worthless without the cookie (which a page of another site never reads)."""
    return hmac.new(session_token.encode(), b"roost-web-csrf", hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Device:
    id: str
    name: str
    paired: str
    token_hash: str
    last_seen: str | None = None

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "paired": self.paired, "lastSeen": self.last_seen}


class Store:
    """The devices and pairing codes of one ROOST_HOME."""

    def __init__(
        self,
        directory: Path | None = None,
        clock: Callable[[], float] = time.time,
        idle: Callable[[], float | None] = idle_limit,
    ) -> None:
        self.dir = directory or web_dir()
        self.clock, self.idle = clock, idle
        self._devices: dict[str, Device] = {}
        self._mtime: float | None = -1.0

    @property
    def devices_file(self) -> Path:
        return self.dir / "devices.json"

    @property
    def pairing_file(self) -> Path:
        return self.dir / "pairing.json"

    @property
    def server_file(self) -> Path:
        return self.dir / "server.json"

    # -- pairing codes ------------------------------------------------------------------------
    def new_code(self) -> str:
        """A fresh one-time pairing code (kept hashed, with its expiry)."""
        code = secrets.token_urlsafe(16)
        now = time.time()
        codes = [c for c in self._codes() if c["expires"] > now][-(PAIRING_OPEN_MAX - 1) :]
        codes.append({"hash": _hash(code), "expires": now + PAIRING_TTL})
        _write(self.pairing_file, codes)
        return code

    def _codes(self) -> list[dict[str, Any]]:
        data = _read(self.pairing_file)
        if not isinstance(data, list):
            return []
        return [
            c
            for c in data
            if isinstance(c, dict)
            and isinstance(c.get("hash"), str)
            and isinstance(c.get("expires"), int | float)
        ]

    def spend_code(self, code: str) -> bool:
        """True once for a valid unexpired code, which is gone from then on."""
        wanted, now = _hash(code), time.time()
        codes = self._codes()
        hit = any(hmac.compare_digest(c["hash"], wanted) and c["expires"] > now for c in codes)
        kept = [c for c in codes if c["expires"] > now and not hmac.compare_digest(c["hash"], wanted)]
        if hit or len(kept) != len(codes):
            _write(self.pairing_file, kept)
        return hit

    # -- devices ------------------------------------------------------------------------------
    def _load(self) -> dict[str, Device]:
        """The devices, read again when the file changed (a revoke from the CLI counts at once)."""
        try:
            mtime: float | None = os.stat(self.devices_file).st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime != self._mtime:
            data = _read(self.devices_file)
            devices: dict[str, Device] = {}
            for item in data if isinstance(data, list) else []:
                with contextlib.suppress(TypeError, KeyError):
                    device = Device(
                        id=str(item["id"]),
                        name=str(item["name"]),
                        paired=str(item["paired"]),
                        token_hash=str(item["tokenHash"]),
                        last_seen=item.get("lastSeen"),
                    )
                    devices[device.id] = device
            self._devices, self._mtime = devices, mtime
        return self._devices

    def _save(self, devices: dict[str, Device]) -> None:
        _write(self.devices_file, [{**d.public(), "tokenHash": d.token_hash} for d in devices.values()])
        self._mtime = -1.0  # read it again next time

    def devices(self) -> list[Device]:
        self._drop_idle()
        return sorted(self._load().values(), key=lambda d: d.paired)

    def _idle(self, device: Device, limit: float | None) -> bool:
        return limit is not None and self.clock() - _epoch(device.last_seen or device.paired) > limit

    def _drop_idle(self) -> None:
        """Forget the devices unused for longer than the setting: they must pair again."""
        limit = self.idle()
        devices = self._load()
        kept = {k: d for k, d in devices.items() if not self._idle(d, limit)}
        if len(kept) != len(devices):
            self._save(kept)

    def add_device(self, name: str) -> tuple[Device, str]:
        """A new device and its session token (given to it once, as its cookie)."""
        token = secrets.token_urlsafe(32)
        devices = dict(self._load())
        now = _stamp(self.clock())
        device = Device(
            id=secrets.token_hex(4),
            name=name[:80] or "browser",
            paired=now,
            token_hash=_hash(token),
            last_seen=now,
        )
        devices[device.id] = device
        self._save(devices)
        return device, token

    def device_of(self, token: str) -> Device | None:
        """The paired device of a session token; None when unknown, or unused too long
        (then it is forgotten)."""
        wanted = _hash(token)
        for device in self._load().values():
            if hmac.compare_digest(device.token_hash, wanted):
                limit = self.idle()
                if self._idle(device, limit):
                    self._drop_idle()
                    return None
                self._seen(device, limit)
                return device
        return None

    def _seen(self, device: Device, limit: float | None) -> None:
        every = SEEN_EVERY if limit is None else min(SEEN_EVERY, limit / 10)
        if self.clock() - _epoch(device.last_seen) < every:
            return
        devices = dict(self._load())
        devices[device.id] = Device(
            device.id, device.name, device.paired, device.token_hash, last_seen=_stamp(self.clock())
        )
        self._save(devices)

    def revoke(self, device_id: str | None) -> list[str]:
        """Drop one device (or all, `None`); the ids dropped."""
        devices = dict(self._load())
        gone = list(devices) if device_id is None else [d for d in devices if d == device_id]
        for key in gone:
            del devices[key]
        if gone:
            self._save(devices)
        return gone

    # -- the running server -------------------------------------------------------------------
    def write_server(self, url: str) -> None:
        _write(self.server_file, {"url": url, "pid": os.getpid()})

    def clear_server(self) -> None:
        data = _read(self.server_file)
        if isinstance(data, dict) and data.get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                self.server_file.unlink()

    def running_url(self) -> str | None:
        """The URL of the `roost web` that runs on this ROOST_HOME, if one does."""
        data = _read(self.server_file)
        if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
            return None
        try:
            os.kill(data["pid"], 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        url = data.get("url")
        return url if isinstance(url, str) else None
