"""What a command prints of text that others wrote: a world's id and task name, a dataset's
description, author or licence, a remote's listing, an imported run's names.

Such text never reaches the terminal raw: each field goes through
:func:`dream_gym.infrastructure.printable.printable` (control characters escaped as ``\\x1b``, cut to a bound
with a marker), either where the library renders it (``worlds show``, the statistics and
leaderboard tables, the revealed tree) or here, for the fields a command puts in its own lines.
:func:`say` is the print of every multi-line report from the library: each of its lines is
escaped and cut again, so a field a renderer missed still cannot drive the terminal.

Tables are rich ``Text`` cells (:func:`cell`), never strings: rich reads markup in strings
(``[link=...]`` writes an OSC 8 hyperlink, an unmatched ``[/x]`` stops the command) and strips
only a few control characters (BEL, backspace, CR, VT, FF; not ESC, not the 8-bit CSI ``0x9b``).
JSON output (``--json``) is left to ``json.dumps``, which escapes every control character and
keeps each value whole.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from typing import IO, Any

from dream_gym.infrastructure.printable import NAME_CHARS, TEXT_CHARS, printable

#: The bound on one line of a report: room for a description (TEXT_CHARS), its cut marker and a
#: label, so that a field cut by its renderer is not cut again here.
LINE_CHARS = TEXT_CHARS + NAME_CHARS


def shown(text: object, limit: int = NAME_CHARS) -> str:
    """One field on one line: control characters (newlines too) escaped, cut to ``limit``."""
    return printable(text, limit)


def shown_lines(text: object, limit: int = LINE_CHARS) -> str:
    """A multi-line text with each line's control characters escaped and each line cut to ``limit``."""
    return "\n".join(printable(line, limit) for line in str(text).split("\n"))


def say(text: object = "", *, file: IO[str] | None = None, end: str = "\n", hang: int | None = None) -> None:
    """``print`` for a report that quotes what others wrote (see :func:`shown_lines`); in a
    terminal its long lines break between words (:func:`fitted`, continued at column ``hang``),
    in a log they stay whole."""
    stream = sys.stdout if file is None else file
    text = shown_lines(text)
    if stream.isatty():
        text = fitted(text, shutil.get_terminal_size().columns, hang)
    print(text, file=stream, end=end)


def fitted(text: str, width: int, hang: int | None = None) -> str:
    """``text`` with each line longer than ``width`` broken between words, its continuation
    indented to column ``hang``, by default two columns past the line's own indent (under the
    text after a ``- `` or ``! ``)."""
    lines = []
    for line in text.split("\n"):
        if len(line) <= width:
            lines.append(line)
            continue
        body = line.lstrip(" ")
        indent = len(line) - len(body) + 2 if hang is None else min(hang, width // 2)
        lines.append(textwrap.fill(line, width, subsequent_indent=" " * indent, break_on_hyphens=False,
                                   break_long_words=False, drop_whitespace=True))
    return "\n".join(lines)


def cell(text: object, limit: int = NAME_CHARS) -> Any:
    """A rich table cell or title showing ``text`` literally (no markup), escaped and cut."""
    from rich.text import Text

    return Text(printable(text, limit))



class Hanging:
    """A rich text printed as :func:`fitted` prints a string: in a terminal, each line too wide
    breaks between words and continues two columns past its own indent (rich's wrapping starts a
    continuation at column 0, under the line's label); its styles are kept. In a log or a pipe
    (soft wrap) each line stays whole. ``text``: a ``rich.text.Text``, or a string (plain text)."""

    def __init__(self, text: Any) -> None:
        from rich.text import Text

        self.text = text if isinstance(text, Text) else Text(str(text))

    def __rich_console__(self, console: Any, options: Any) -> Any:
        if options.no_wrap:
            yield self.text
            return
        for line in self.text.split("\n"):
            yield from _hung(line, options.max_width)


def _hung(line: Any, width: int) -> Any:
    """One rich Text line as lines of at most ``width`` columns, broken between words (a word longer
    than a line stands alone), each continuation indented two columns past the line's indent."""
    import re

    from rich.text import Text

    plain = line.plain
    if len(plain) <= width:
        yield line
        return
    hang = min(len(plain) - len(plain.lstrip(" ")) + 2, width // 2)
    start, end, room = 0, 0, width
    for word in re.finditer(r"\S+", plain):
        if end > start and word.end() - start > room:
            yield (Text(" " * hang) if start else Text()) + line[start:end]
            start, room = word.start(), width - hang
        end = word.end()
    yield (Text(" " * hang) if start else Text()) + line[start:end]


def console(stderr: bool = False) -> Any:
    """A command's console (its results, or with ``stderr`` its progress). In a terminal, text
    wraps between words at its width; in a log or a pipe each line stays whole (tables take
    ``COLUMNS``, or 200 columns), so a line is never broken mid-word by the terminal nor cut."""
    from rich.console import Console

    out = Console(stderr=stderr)
    if out.is_terminal:
        return out
    return Console(stderr=stderr, soft_wrap=True, width=None if os.environ.get("COLUMNS") else 200)


__all__ = ["LINE_CHARS", "Hanging", "cell", "console", "fitted", "say", "shown", "shown_lines"]
