"""One mailbox item: its dataclass, its one-line JSON form and its file name."""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from roost.mailbox.errors import InvalidItem

KINDS = ("reply", "message", "report")
"""Every item kind; one seq counter covers them all."""
AGENT_KINDS = frozenset({"message", "report"})
"""Kinds that count toward the agent cap (`reply` counts toward the replies cap)."""
RESERVED_KEYS = ("seq", "kind", "from", "text", "created")
"""JSON keys every item has; every other key except `id` is an extra."""
ID_KEY = "id"
"""The item's random id (`post` writes it right after `seq`): what a replayed copy of an
item under another seq gives away (docs/reference/mailbox.md). Items written before it have none."""
_ID_RE = re.compile(r"^[0-9a-f]{8,64}$")
MAX_ITEM_BYTES = 1 << 20
"""Largest item file accepted (post refuses bigger, scans quarantine bigger files)."""
MAX_SEQ = 10**12 - 1
"""The largest seq a 12-digit file name can carry."""

_NAME_RE = re.compile(r"^([0-9]{12})\.json$")


def new_id() -> str:
    """A fresh item id: 64 random bits in hex."""
    return secrets.token_hex(8)


def name_for(seq: int) -> str:
    """The file name of item `seq`: 12-digit zero-padded seq plus `.json`."""
    return f"{seq:012d}.json"


def seq_of(name: str) -> int | None:
    """The seq a file name encodes, or None when the name is not an item name."""
    match = _NAME_RE.match(name)
    if match is None:
        return None
    seq = int(match.group(1))
    return seq if seq > 0 else None


_second_cache: list[tuple[int, str]] = [(-1, "")]


def now_iso() -> str:
    """The current time as ISO-8601 UTC with milliseconds: 2026-11-30T11:20:00.123Z."""
    now = time.time()
    whole = int(now)
    millis = int((now - whole) * 1000)
    cached_second, prefix = _second_cache[0]
    if cached_second != whole:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second_cache[0] = (whole, prefix)
    return f"{prefix}.{millis:03d}Z"


@dataclass(frozen=True)
class Item:
    """A published mailbox item. `sender` is the JSON key `from` (None for the user);
    `extra` holds every other JSON key (for reports: result, state, question, error)
    but `id`, the random id `post` gives each item (None in items written without one)."""

    seq: int
    kind: str
    sender: dict[str, Any] | None
    text: str
    created: str
    extra: dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    @property
    def is_agent(self) -> bool:
        """True for agent items (message, report), False for user replies."""
        return self.kind in AGENT_KINDS

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the item, keys in file order."""
        data: dict[str, Any] = {"seq": self.seq}
        if self.id is not None:
            data[ID_KEY] = self.id
        data.update(
            {
                "kind": self.kind,
                "from": self.sender,
                "text": self.text,
                "created": self.created,
            }
        )
        data.update(self.extra)
        return data

    def to_json(self) -> str:
        """The item as one line of JSON (no trailing newline)."""
        return _ENCODER.encode(self.to_dict())

    @classmethod
    def from_dict(cls, data: Any, *, expect_seq: int | None = None) -> Item:
        """Validate a decoded JSON value and build the Item; raises InvalidItem."""
        if not isinstance(data, dict):
            raise InvalidItem(f"not a JSON object but {type(data).__name__}")
        missing = [key for key in RESERVED_KEYS if key not in data]
        if missing:
            raise InvalidItem(f"missing key(s): {', '.join(missing)}")
        seq = data["seq"]
        if type(seq) is not int or not 0 < seq <= MAX_SEQ:
            raise InvalidItem(f"seq must be an int in 1..{MAX_SEQ}, got {seq!r}")
        if expect_seq is not None and seq != expect_seq:
            raise InvalidItem(f"file name says seq {expect_seq} but the item says {seq}")
        check_fields(data["kind"], data["text"], data["from"])
        created = data["created"]
        if not isinstance(created, str):
            raise InvalidItem(f"created must be a string, got {type(created).__name__}")
        item_id = data.get(ID_KEY)
        if item_id is not None and not (isinstance(item_id, str) and _ID_RE.match(item_id)):
            raise InvalidItem(f"id must be 8 to 64 lowercase hex digits, got {item_id!r}")
        extra = {key: value for key, value in data.items() if key not in RESERVED_KEYS and key != ID_KEY}
        return cls(seq, data["kind"], data["from"], data["text"], created, extra, item_id)

    @classmethod
    def from_json(cls, text: str | bytes, *, expect_seq: int | None = None) -> Item:
        """Parse one item from its JSON text; raises InvalidItem with the reason."""
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except UnicodeDecodeError as exc:
            raise InvalidItem(f"not UTF-8: {exc}") from exc
        except ValueError as exc:
            raise InvalidItem(f"not valid JSON: {exc}") from exc
        return cls.from_dict(data, expect_seq=expect_seq)


def check_fields(kind: Any, text: Any, sender: Any) -> None:
    """Raise InvalidItem unless kind, text and sender are well-formed."""
    if kind not in KINDS:
        raise InvalidItem(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if not isinstance(text, str):
        raise InvalidItem(f"text must be a str, got {type(text).__name__}")
    if sender is not None and not isinstance(sender, dict):
        raise InvalidItem(
            f"from (sender) must be an object like {{id, name, relation}} or null for the user; "
            f"got {type(sender).__name__}"
        )


def encode_body(
    kind: str, text: str, sender: dict[str, Any] | None, extra: dict[str, Any]
) -> tuple[str, str]:
    """Everything of an item line except seq and created, pre-encoded so that the
    part done under the mailbox lock is a string join.

    Returns the fragment `"kind":...,"from":...,"text":...` and the extras fragment
    (empty or starting with a comma).
    """
    check_fields(kind, text, sender)
    for key in extra:
        if key in RESERVED_KEYS or key == ID_KEY:
            raise InvalidItem(f"extra key {key!r} clashes with an item key")
    try:
        head = _ENCODER.encode({"kind": kind, "from": sender, "text": text})[1:-1]
        tail = "," + _ENCODER.encode(extra)[1:-1] if extra else ""
    except (TypeError, ValueError) as exc:
        raise InvalidItem(f"item is not JSON-serialisable: {exc}") from exc
    return head, tail


def checked_body(
    kind: str, text: str, sender: dict[str, Any] | None, extra: dict[str, Any]
) -> tuple[str, str]:
    """`encode_body`, plus the size limit: what `Mailbox.post` would refuse as InvalidItem
    is refused here, so a caller can validate before it creates anything."""
    body = encode_body(kind, text, sender, extra)
    size = len(body[0].encode()) + len(body[1].encode()) + 96  # + seq, id, created, braces
    if size > MAX_ITEM_BYTES:
        raise InvalidItem(f"item too large: {size} bytes, the limit is {MAX_ITEM_BYTES}")
    return body


def render_line(seq: int, body: tuple[str, str], created: str, item_id: str) -> bytes:
    """The full file content of an item: one JSON object on one newline-terminated line,
    its id right after its seq (where `id_of_prefix` reads it)."""
    head, tail = body
    return f'{{"seq":{seq},"id":"{item_id}",{head},"created":"{created}"{tail}}}\n'.encode()


_PREFIX_RE = re.compile(rb'^\{"seq":[0-9]{1,12},"id":"([0-9a-f]{8,64})"')
ID_PREFIX_BYTES = 96
"""How much of an item file `id_of_prefix` needs to see."""


def id_of_prefix(data: bytes) -> str | None:
    """The id of an item file as `render_line` writes it, from its first bytes; None when
    the file does not start that way (then only a full parse can tell)."""
    match = _PREFIX_RE.match(data)
    return match.group(1).decode("ascii") if match else None


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
