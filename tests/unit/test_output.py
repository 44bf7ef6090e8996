"""roost/display/output.py: the one rule for what may reach a terminal."""

from __future__ import annotations

import io
import json
import sys

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.display import output

HIDDEN = [
    chr(c) for c in (*range(0x20), *range(0x7F, 0xA0), *output.BIDI, *output.SEPARATORS) if c not in (9, 10)
]


@given(st.text())
def test_nothing_that_drives_a_terminal_is_left_and_it_is_idempotent(text: str) -> None:
    shown = output.visible(text)
    assert not set(shown) & set(HIDDEN)
    assert output.visible(shown) == shown
    assert not set(output.field(text)) & {*HIDDEN, "\n", "\t"}


@given(st.text())
def test_json_keeps_the_data_and_escapes_what_a_terminal_would_run(text: str) -> None:
    document = output.json_text({"text": text, "list": [text]})
    assert json.loads(document) == {"text": text, "list": [text]}
    assert not set(document) & set(HIDDEN)


def test_escapes_read_as_the_sequence_they_stand_for() -> None:
    assert output.visible("a\x1b[1A\x1b[2Kb\n\tc\x9b\u202e") == "a\\x1b[1A\\x1b[2Kb\n\tc\\x9b\\u202e"
    assert output.field("a\nb\tc") == "a\\nb\\tc"
    assert output.visible("no\u00a0break, joiner\U0001f469\u200d\U0001f4bb") == (
        "no\u00a0break, joiner\U0001f469\u200d\U0001f4bb"
    )  # not printable, but harmless
    assert output.markup("[red]x[/red]") == "\\[red]x\\[/red]"
    assert output.styled("[link=x]y\x1b").plain == "[link=x]y\\x1b"


def test_the_guard_is_under_click_echo_and_print(monkeypatch: pytest.MonkeyPatch) -> None:
    under = io.StringIO()
    monkeypatch.setattr(sys, "stdout", output.Guarded(under))
    click.echo("one\x1b]52;c;aGk=\x07", color=True)
    print("two\x9b2J")
    assert under.getvalue() == "one\\x1b]52;c;aGk=\\x07\ntwo\\x9b2J\n"
    assert output.terminal() is under


def test_a_diff_line_is_split_at_newlines_only(capsys: pytest.CaptureFixture[str]) -> None:
    output.print_diff("+keep\u2028-fake\x0c-fake\n-real\n")
    assert capsys.readouterr().out == "+keep\\u2028-fake\\x0c-fake\n-real\n"
