"""Compact JSON in and out without importing the `json` package: roost's frames, for a
`roost` command's short life.

`json`'s import loads `re` and `enum` for its pure-Python fallbacks (~10 ms, a third of a
`roost ls --json`: README, Start-up). Its work is done by the C accelerator `_json`, which
this module calls the way `json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`
and `json.loads` call it, so the text is the same to the byte. Anything unusual goes to
`json` itself: an interpreter without `_json` (or with another signature), a value the C
encoder refuses, and every text the scanner does not read whole, so an error says what
`json` says (`ValueError`, `TypeError`, `RecursionError` as `json` raises them).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from typing import Any

_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}
_SPACE = " \t\n\r"  # JSON's whitespace (json.decoder.WHITESPACE)


def _not_serializable(value: Any) -> Any:  # json.JSONEncoder.default's refusal
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


class _ScanContext:
    """What `_json.make_scanner` reads off a json.JSONDecoder: json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def _encoder() -> Any:
    """json.dumps' C encoder (a new one a call: it keeps the containers it is inside of,
    for its circular-reference check, and keeps them after an error too)."""
    import _json

    return _json.make_encoder(
        {}, _not_serializable, _json.encode_basestring, None, ":", ",", False, False, True
    )


def _accelerated() -> Any:
    """json.loads' C scanner, once a sample reads and writes as json reads and writes it;
    None (json does it all) elsewhere: not CPython's `_json`, or another one."""
    try:
        import _json

        scan = _json.make_scanner(_ScanContext())  # type: ignore[arg-type]  # duck-typed
        sample, text = {"a": [1, 2.5, None, True, "é\n"]}, '{"a":[1,2.5,null,true,"é\\n"]}'
        if "".join(_encoder()(sample, 0)) != text or scan(text, 0) != (sample, len(text)):
            return None
    except Exception:
        return None
    return scan


_fast = _accelerated()  # the C scanner (and the C encoder in use), else None: json throughout


def dumps(obj: Any) -> str:
    """`json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`."""
    if _fast is not None:
        try:
            return "".join(_encoder()(obj, 0))
        except (TypeError, ValueError):  # json raises it (and says what) below
            pass
    import json

    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def loads(text: str) -> Any:
    """`json.loads(text)`: its value, or its error."""
    if _fast is not None:
        body = text.strip(_SPACE)
        try:
            value, end = _fast(body, 0)
        except (StopIteration, ValueError):  # no value there, or a bad one: json says why
            pass
        else:
            if end == len(body):
                return value
    import json

    return json.loads(text)
