"""roost.wire.codec: the frames' JSON without the json package's import, the same to the
byte as json's, its errors json's own."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.wire import codec as jsoncodec

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def json_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_the_c_codec_is_the_one_in_use() -> None:
    assert jsoncodec._fast is not None  # CPython: else every test below checks json itself


@settings(max_examples=300)
@given(values)
def test_dumps_writes_what_json_writes(value: Any) -> None:
    assert jsoncodec.dumps(value) == json_dumps(value)


@settings(max_examples=300)
@given(values)
def test_loads_reads_what_json_reads(value: Any) -> None:
    text = json_dumps(value)
    assert jsoncodec.loads(text) == json.loads(text)
    assert jsoncodec.loads(f" \n{text}\t\r\n") == value


@pytest.mark.parametrize(
    "value",
    [
        "\x1b[31m\u202e\ud800",  # controls, bidi, a lone surrogate: escaped as json escapes them
        {"a": float("inf"), "b": float("-inf")},
        [2**70, -(2**70), 1e-5, 1.5e300],
        {7: "int key", None: "null key", True: "bool key", 2.5: "float key"},
    ],
)
def test_the_corners_json_has(value: Any) -> None:
    assert jsoncodec.dumps(value) == json_dumps(value)


def test_nan_reads_and_writes_as_json_does() -> None:
    assert jsoncodec.dumps([float("nan")]) == "[NaN]"
    assert math.isnan(jsoncodec.loads("[NaN]")[0])
    assert jsoncodec.loads("[-Infinity]") == [float("-inf")]


@pytest.mark.parametrize("value", [{"a": {1, 2}}, b"bytes", object()])
def test_what_json_refuses_is_refused_as_json_refuses_it(value: Any) -> None:
    with pytest.raises(TypeError) as ours:
        jsoncodec.dumps(value)
    with pytest.raises(TypeError) as theirs:
        json_dumps(value)
    assert str(ours.value) == str(theirs.value)


def test_a_circular_value_is_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        jsoncodec.dumps(loop)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "{", '{"a":1} x', '{"a":1}{}', "[1,]", "{'a':1}", '"\x01"', "nul", '{"a":01}', "[1] ]"],
)
def test_bad_text_gets_json_s_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        jsoncodec.loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


def test_deep_nesting_is_a_recursion_error_as_in_json() -> None:
    with pytest.raises(RecursionError):
        jsoncodec.loads("[" * 100_000)


def test_importing_it_loads_neither_json_nor_re() -> None:
    code = (
        "import sys; before = set(sys.modules); import roost.wire.codec as c; "
        "c.loads(c.dumps({'a': [1, 2.5, None]})); "
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
        "('json', 're', 'enum')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_refusal_leaves_nothing_behind_for_the_next_call() -> None:
    for _ in range(100):  # the C encoder keeps what it was inside of when it failed
        with pytest.raises(TypeError):
            jsoncodec.dumps([[{"x": object()}]])
        value = [[{"x": 1}]]
        assert jsoncodec.dumps(value) == json_dumps(value)
