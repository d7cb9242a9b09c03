"""MkDocs hook: pages that show a file kept elsewhere in the repository (a model card, a dataset
card, an experiment's results) include it instead of holding a copy that would go stale.

A line ``<!-- include: path/from/the/repository.md -->`` is replaced by that file's text, its
headings moved down a level (the page has its own title) and its relative links written as code
spans naming the repository path (they point to files the site does not carry).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r"^<!-- include: (\S+) -->$", re.M)
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((?!https?://|#)([^)\s]+)\)")


def demote_headings(text: str) -> str:
    """Headings one level down, outside fenced code (where ``#`` starts a comment)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#+ ", line):
            line = "#" + line
        lines.append(line)
    return "\n".join(lines) + "\n"


def included_text(relpath: str) -> str:
    """The file's text as a page shows it: headings one level down, repository links as paths."""
    text = (REPO / relpath).read_text(encoding="utf-8")
    folder = posixpath.dirname(relpath)
    text = demote_headings(text)

    def as_path(match: re.Match[str]) -> str:
        label, target = match.group(1), posixpath.normpath(posixpath.join(folder, match.group(2)))
        return f"`{target}`" if label.strip("`") in (target, match.group(2)) else f"{label} (`{target}`)"

    return LINK.sub(as_path, text)


def expand(markdown: str) -> str:
    """Every include line of a page replaced by the file it names."""
    return INCLUDE.sub(lambda m: included_text(m.group(1)), markdown)


def on_page_markdown(markdown: str, **kwargs: object) -> str:
    return expand(markdown)
