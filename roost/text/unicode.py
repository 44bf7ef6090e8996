"""Text by what it looks like: Unicode's confusables (UTS #39), the characters that show
nothing, and the rule for a name. Standard library only.

The table is Unicode's own `confusables.txt`, shipped verbatim as roost/data/confusables.txt
(`scripts/update-confusables FILE` replaces it with a newer one). It maps each character to
its prototype: Cyrillic `а` -> `a`, `∕` -> `/`, `‹` -> `<`, `m` -> `rn`. Two strings look
alike when their skeletons are equal (`skeleton`, UTS #39 section 4).

`fold` goes further, for finding a tag a model could read in a body: it also folds case,
compatibility forms (NFKC: fullwidth `＜`), small capitals, combining marks, and drops what
is invisible. It is per character and cached, so a long body costs one lookup a character.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path

CONFUSABLES = Path(__file__).parents[1] / "data" / "confusables.txt"

# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt), which Python's
# unicodedata does not carry: characters a renderer shows as nothing. Most are category Cf
# (zero-width space and joiners, bidi controls, tags); these ranges add the others
# (U+034F COMBINING GRAPHEME JOINER, the Hangul fillers U+115F/1160/3164/FFA0, variation
# selectors, Mongolian free variation selectors, ...).
_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# Bidi controls: they reorder what is shown after them (an RTL override turns `exe.txt`
# into `txt.exe`). All are also ignorable; named apart for a clearer refusal.
_BIDI = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C])


def invisible(char: str) -> bool:
    """A character that shows nothing (or reorders what is shown): format characters and
    every other default-ignorable code point."""
    if char.isascii():
        return False
    if unicodedata.category(char) == "Cf":
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _IGNORABLE)


_LINE = re.compile(r"^([0-9A-F]{4,6})\s*;\s*([0-9A-F ]+?)\s*;", re.M)


@functools.cache
def _table() -> dict[str, str]:
    """confusables.txt as {source character: prototype}. Lines are
    `SOURCE ; TARGET... ; TYPE # comment`, code points in hex."""
    text = CONFUSABLES.read_text(encoding="utf-8-sig")
    return {
        chr(int(source, 16)): "".join(chr(int(h, 16)) for h in target.split())
        for source, target in _LINE.findall(text)
    }


def _mapped(text: str) -> str:
    table = _table()
    return "".join(table.get(char, char) for char in text)


def skeleton(text: str) -> str:
    """UTS #39's skeleton: NFD, each character to its prototype, NFD again. Two strings
    that look alike have the same skeleton (`paypal` and `рауpal` with Cyrillic letters)."""
    return unicodedata.normalize("NFD", _mapped(unicodedata.normalize("NFD", text)))


_SMALL_CAPITAL = re.compile(r"LATIN LETTER SMALL CAPITAL ([A-Z])$")


def _small_capital(char: str) -> str:
    """ᴛ (LATIN LETTER SMALL CAPITAL T) reads as t: the table maps Cyrillic т to it."""
    match = _SMALL_CAPITAL.match(unicodedata.name(char, ""))
    return match.group(1).lower() if match else char


def _fold_step(text: str) -> str:
    text = _mapped(unicodedata.normalize("NFKD", text))  # decomposed first, as UTS #39 maps
    text = "".join(_small_capital(c) for c in text.casefold())
    text = unicodedata.normalize("NFD", _mapped(text))
    return "".join(c for c in text if not invisible(c) and unicodedata.category(c) not in ("Mn", "Me"))


@functools.lru_cache(maxsize=1 << 16)
def fold(char: str) -> str:
    """One character as a reader takes it: the prototype of its decomposition (NFKD: UTS #39
    maps the NFD form, so `ņ` is `n` and a cedilla), lower case, without marks; "" for what
    shows nothing. Repeated to a fixed point (Cyrillic `М` -> `M` -> `m` -> `rn`)."""
    if invisible(char):
        return ""
    text = char
    for _ in range(6):
        folded = _fold_step(text)
        if folded == text:
            break
        text = folded
    return text


@functools.lru_cache(maxsize=1 << 16)
def fold_capital(char: str) -> str:
    """A second reading of a character: the fold of its capital. The table maps a letter's
    small form by its shape (Greek `ε` to `ꞓ`, `ν` to `v`) and its capital by the letter it
    reads as (`Ε` to `E`, `Ν` to `N`); a reader who ignores case takes `ε` for `e` too."""
    return fold_text(char.upper())


def fold_text(text: str) -> str:
    return "".join(fold(char) for char in text)


# -- names ------------------------------------------------------------------------------------
# Scripts that mix with Latin in ordinary names (UTS #39's "highly restrictive" level):
# Chinese, Japanese and Korean writing.
_CJK = frozenset({"CJK", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO", "IDEOGRAPHIC"})


def _script(char: str) -> str | None:
    """A letter's script, from its Unicode name's first word (LATIN, CYRILLIC, GREEK, ...);
    None for what is not a letter (digits, punctuation and marks belong to any script)."""
    if not unicodedata.category(char).startswith("L"):
        return None
    name = unicodedata.name(char, "")
    word = name.split(" ", 1)[0] if name else "UNKNOWN"
    return "CJK" if word in _CJK else word


def clean_name(value: str, what: str = "name") -> str:
    """A name as roost keeps it: NFKC-normalised. Raises ValueError (one line) for control
    characters, bidi controls, invisible characters and letters of two scripts (Latin with
    Cyrillic: a look-alike of a Latin name). Chinese, Japanese and Korean mix with Latin."""
    name = unicodedata.normalize("NFKC", value)
    for char in name:
        code = ord(char)
        if code < 0x20 or 0x7F <= code < 0xA0 or unicodedata.category(char) in ("Zl", "Zp"):
            raise ValueError(f"{what} must not contain control characters")
        if code in _BIDI:
            raise ValueError(
                f"{what} must not contain bidi controls (U+{code:04X} reorders the text shown after it)"
            )
        if invisible(char):
            raise ValueError(f"{what} must not contain invisible characters (U+{code:04X})")
    scripts = {s for s in map(_script, name) if s is not None}
    if len(scripts - {"CJK"}) > 1:
        raise ValueError(f"{what} mixes letters of {' and '.join(sorted(scripts - {'CJK'}))}: use one script")
    return name


def shown_name(value: str) -> str:
    """A name made from free text (a task's first line): NFKC, with control and invisible
    characters dropped rather than refused."""
    text = unicodedata.normalize("NFKC", value)
    return "".join(" " if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 else c for c in text if not invisible(c))


def imitates(name: str, others: dict[str, str]) -> str | None:
    """The first of `others` ({name: what it names}) that `name` looks like without being
    it (equal skeletons, different text), or None."""
    mine = skeleton(name)
    for other, label in others.items():
        if other != name and skeleton(other) == mine:
            return label
    return None
