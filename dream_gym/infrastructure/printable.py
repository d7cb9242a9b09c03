"""Text that others wrote, made safe to print and to store.

A policy's name and error, a candidate's output, a world's id and task name, a dataset's
description, author or licence, a remote's listing: any of them may hold bytes that drive a
terminal (``ESC ]52;`` writes the clipboard, ``ESC ]0;`` sets the window title, ``ESC [2J``
clears the screen, ``0x9b`` is the 8-bit form of ``ESC [``, a carriage return overwrites the
line, ``U+202E`` reverses what follows) or be megabytes long. :func:`printable` is the one place
such text passes before it is printed or recorded: every control character becomes a visible
escape (``\\x1b``, ``\\u202e``), and the text is cut to a bound with a marker saying how much was
cut.

Escaped: the C0 and C1 controls and DEL (Unicode category Cc), lone surrogates (Cs, which no
terminal encoding can write), the line and paragraph separators U+2028 and U+2029 (Zl, Zp: line
breaks to ``str.splitlines`` and to some terminals) and the bidirectional controls (Trojan
Source). Every other character, non-ASCII letters and emoji included, is kept as it is.

This module imports nothing of dream_gym.
"""

from __future__ import annotations

import unicodedata

#: The default bound on a name or a one-line field (characters).
NAME_CHARS = 200
#: The default bound on an error text or a description (characters).
TEXT_CHARS = 4000
#: Format characters that reorder or hide what follows (Trojan Source), also escaped.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ESCAPED_CATEGORIES = frozenset(("Cc", "Cs", "Zl", "Zp"))
_KEPT_IN_LINES = frozenset("\n\t")


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _unsafe(char: str, lines: bool) -> bool:
    if lines and char in _KEPT_IN_LINES:
        return False
    return unicodedata.category(char) in _ESCAPED_CATEGORIES or char in _BIDI


def cut_marker(total: int) -> str:
    """What :func:`printable` puts after a cut text of ``total`` characters."""
    return f"... [cut: {total} characters in all]"


def printable(text: object, limit: int = NAME_CHARS, *, lines: bool = False) -> str:
    """``text`` (any object: its ``str``) with control characters escaped, cut to ``limit``.

    ``lines=True`` keeps newlines and tabs (an error text, a traceback); otherwise they are
    escaped too (a name, an id, a table cell). The result holds at most ``limit`` characters
    (counted after escaping, and an escape is never split) and, when anything was left out, the
    marker ``... [cut: N characters in all]`` (N: the length of the whole text). Only the first
    ``limit + 1`` characters are looked at, so a text of megabytes costs no more than a short one.
    """
    if limit < 0:
        raise ValueError(f"limit must be at least 0, got {limit}")
    raw = text if isinstance(text, str) else str(text)
    head = raw[: limit + 1]  # every character shows as one at least: the rest is cut anyway
    if head.isprintable():  # no control, separator or bidirectional character (all fail isprintable)
        return raw if len(raw) <= limit else head[:limit] + cut_marker(len(raw))
    shown: list[str] = []
    used = 0
    for char in head:
        piece = _escape(char) if _unsafe(char, lines) else char
        if used + len(piece) > limit:
            return "".join(shown) + cut_marker(len(raw))
        shown.append(piece)
        used += len(piece)
    return "".join(shown)  # head is the whole text: a longer one would have been cut above


def is_printable(text: str) -> bool:
    """True when :func:`printable` would leave ``text`` unchanged at a bound it fits in (no
    control character, no line separator, no bidirectional control)."""
    return text.isprintable() or not any(_unsafe(c, False) for c in text)


def error_line(error: object) -> str:
    """The first line of an error text, without the traceback a system appends after
    ``"; traceback:"`` (the record keeps the whole); "" for none. Not escaped: see :func:`printable`."""
    lines = str(error or "").split("; traceback:")[0].strip().splitlines()
    return lines[0] if lines else ""


def a_few(names: list[str], shown: int = 3) -> str:
    """The first ``shown`` of ``names`` and how many more there are: ``a, b, c and 4 more``."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


__all__ = ["NAME_CHARS", "TEXT_CHARS", "a_few", "cut_marker", "error_line", "is_printable", "printable"]
