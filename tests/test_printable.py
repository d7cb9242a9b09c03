"""dream_gym.infrastructure.printable: text others wrote, made safe to print (every control escaped, cut to a bound)."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dream_gym.infrastructure.printable import NAME_CHARS, cut_marker, is_printable, printable

C0 = [chr(c) for c in range(0x20)]
C1 = [chr(c) for c in range(0x80, 0xA0)]
DEL = "\x7f"
BIDI = ["\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
        "\u2066", "\u2067", "\u2068", "\u2069"]
SEPARATORS = ["\u2028", "\u2029"]


def unsafe_in(text: str, *, lines: bool = False) -> list[str]:
    """What a terminal or a line-based reader would act on: controls (Cc), lone surrogates,
    line and paragraph separators, bidirectional controls."""
    kept = "\n\t" if lines else ""
    return [c for c in text if c not in kept and (unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") or c in BIDI)]


@pytest.mark.parametrize("char", [*C0, DEL, *C1], ids=lambda c: f"U+{ord(c):04X}")
def test_every_c0_c1_control_and_del_becomes_its_hex_escape(char):
    shown = printable(f"a{char}b")
    assert shown == f"a\\x{ord(char):02x}b"
    assert not unsafe_in(shown)


@pytest.mark.parametrize("char", BIDI + SEPARATORS, ids=lambda c: f"U+{ord(c):04X}")
def test_bidirectional_controls_and_line_separators_become_unicode_escapes(char):
    assert printable(f"x{char}y") == f"x\\u{ord(char):04x}y"
    assert not is_printable(char)


def test_a_lone_surrogate_is_escaped_so_the_text_can_be_encoded():
    shown = printable("a\ud800b\udfffc")
    assert shown == "a\\ud800b\\udfffc"
    shown.encode("utf-8")  # a lone surrogate would raise here (and in print)


def test_the_attacks_of_the_report_become_visible_text():
    hostile = "id\x1b]52;c;c2VjcmV0\x07\x1b]0;title\x07\x1b[2J\x9b31m\rX\u202eevil"
    shown = printable(hostile)
    assert shown == ("id\\x1b]52;c;c2VjcmV0\\x07\\x1b]0;title\\x07\\x1b[2J\\x9b31m\\x0dX\\u202eevil")
    assert not unsafe_in(shown)


def test_lines_keeps_newlines_and_tabs_and_escapes_the_rest():
    text = "line 1\n\tline 2\r\n\x1b[2J"
    assert printable(text, lines=True) == "line 1\n\tline 2\\x0d\n\\x1b[2J"
    assert printable(text) == "line 1\\x0a\\x09line 2\\x0d\\x0a\\x1b[2J"


@pytest.mark.parametrize("text", ["é", "漢字", "🙂", "naïve café 漢字 🙂🚀", "a b", "non\u00a0breaking", "zero\u200bwidth"])
def test_printable_non_ascii_text_is_unchanged(text):
    assert printable(text) == text
    assert is_printable(text)


def test_a_long_text_is_cut_with_a_marker_naming_its_length():
    text = "x" * 1_000_000
    shown = printable(text, 50)
    assert shown == "x" * 50 + cut_marker(1_000_000)
    assert cut_marker(1_000_000) == "... [cut: 1000000 characters in all]"
    assert printable("x" * 50, 50) == "x" * 50  # at the bound: whole, no marker


def test_the_cut_counts_escapes_and_never_splits_one():
    shown = printable("ab\x1bcd", 5)  # "ab" + "\x1b" is six characters: the escape does not fit whole
    assert shown == "ab" + cut_marker(5)
    assert printable("ab\x1bcd", 6) == "ab\\x1b" + cut_marker(5)
    assert printable("ab\x1bcd", 8) == "ab\\x1bcd"


def test_a_non_string_is_shown_by_its_str_and_counted_whole():
    assert printable(12345) == "12345"
    assert printable(["a\x1b"]) == "['a\\x1b']"
    long_object = ["y" * 1000]  # the marker counts the characters of its str, not of the part looked at
    assert printable(long_object, 10).endswith(cut_marker(len(str(long_object))))


def test_a_negative_bound_is_a_programming_error():
    with pytest.raises(ValueError, match="limit"):
        printable("x", -1)


def test_the_default_bound_is_a_name():
    assert printable("n" * (NAME_CHARS + 1)) == "n" * NAME_CHARS + cut_marker(NAME_CHARS + 1)


any_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=sys.maxunicode), max_size=300)


@settings(max_examples=400, deadline=None)
@given(text=any_text, limit=st.integers(min_value=0, max_value=120), lines=st.booleans())
def test_no_control_ever_comes_out_and_the_bound_holds(text, limit, lines):
    shown = printable(text, limit, lines=lines)
    assert not unsafe_in(shown, lines=lines)
    assert len(shown) <= limit + len(cut_marker(len(text)))
    if len(shown) > limit:  # only a cut text goes past its bound, by its marker exactly
        assert shown.endswith(cut_marker(len(text)))
    shown.encode("utf-8")


@settings(max_examples=200, deadline=None)
@given(text=any_text)
def test_safe_text_is_a_fixed_point(text):
    once = printable(text, 10_000)
    assert printable(once, 10_000) == once  # escaping what was escaped changes nothing
    assert is_printable(once)
    if is_printable(text):
        assert once == text
