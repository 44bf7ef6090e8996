"""roost.display.plaintable: `roost ls`'s table drawn without rich (cells, cuts, wraps, styles)."""

from __future__ import annotations

from roost.display import plaintable as pt


def test_cells_count_wide_and_combining_characters() -> None:
    assert pt.cell_len("abc") == 3
    assert pt.cell_len("一个") == 4
    assert pt.cell_len("e\u0301") == 1
    assert pt.cell_len("↳ ✉1 …") == 6


def test_a_cut_ends_in_an_ellipsis_within_the_width() -> None:
    assert pt.cut("short", 10) == "short"
    assert pt.cut("a-long-name", 6) == "a-lon…"
    cut = pt.cut("一个很长的名字", 6)
    assert cut == "一个…" and pt.cell_len(cut) <= 6


def test_wrap_breaks_between_words_and_folds_a_long_word() -> None:
    assert pt.wrap("? Pick one of these", 8) == ["? Pick", "one of", "these"]
    assert pt.wrap("x" * 10, 4) == ["xxxx", "xxxx", "xx"]
    assert pt.wrap("", 5) == [""]
    assert all(pt.cell_len(line) <= 5 for line in pt.wrap("総括 of the 字符字符字符 job", 5))


def test_columns_align_and_styles_only_with_colour() -> None:
    rows = [
        [("a1", "dim"), ("—", ""), ("? a question that wraps", "yellow")],
        [("b22", ""), ("$0.42", ""), ("", "")],
    ]
    lines = list(
        pt.table_lines(
            ["ID", "COST", "SUMMARY"], rows, [3, 5, 10], [False, True, False], wrapping=2, colour=False
        )
    )
    assert lines == [
        "ID    COST  SUMMARY",
        "a1       —  ? a",
        "            question",
        "            that wraps",
        "b22  $0.42",
    ]
    coloured = list(pt.table_lines(["ID"], [[("a1", "bold red")]], [2], [False], None, True))
    assert coloured == ["\x1b[1mID\x1b[0m", "\x1b[1;31ma1\x1b[0m"]


def test_no_color_turns_colour_off(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert pt.colour_wanted(True) and not pt.colour_wanted(False)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not pt.colour_wanted(True)
