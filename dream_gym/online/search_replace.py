"""SEARCH/REPLACE blocks, the diff form OpenEvolve, SkyDiscover and ShinkaEvolve ask a model for:
made from a parent and a child so that applying them as OpenEvolve does gives the child back."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"


def apply_blocks(parent: str, blocks: Sequence[tuple[str, str]]) -> str:
    """Apply SEARCH/REPLACE blocks as OpenEvolve 0.4 does: line-wise, in order, each at the first
    match in the text so far (exact, then ignoring trailing spaces), texts right-stripped."""
    lines = parent.split("\n")
    for search_text, replace_text in blocks:
        search = search_text.rstrip().split("\n")
        replace = replace_text.rstrip().split("\n")
        index = _find(lines, search)
        if index >= 0:
            lines[index:index + len(search)] = replace
    return "\n".join(lines)


def _find(lines: list[str], search: list[str]) -> int:
    size = len(search)
    for i in range(len(lines) - size + 1):
        if lines[i:i + size] == search:
            return i
    stripped = [s.rstrip() for s in search]
    for i in range(len(lines) - size + 1):
        if [s.rstrip() for s in lines[i:i + size]] == stripped:
            return i
    return -1


def _count(lines: list[str], search: list[str]) -> int:
    size = len(search)
    stripped = [s.rstrip() for s in search]
    return sum(1 for i in range(len(lines) - size + 1) if [s.rstrip() for s in lines[i:i + size]] == stripped)


def diff_blocks(parent: str, child: str, context: int = 1) -> list[tuple[str, str]]:
    """SEARCH/REPLACE blocks that turn ``parent`` into ``child`` under :func:`apply_blocks`.

    One block per group of changed lines, each widened until its SEARCH text is non-blank and
    occurs once in the parent; when the result does not reproduce the child exactly (the rules
    right-strip texts and match the first occurrence), one block of the whole program."""
    old, new = parent.split("\n"), child.split("\n")
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    blocks: list[tuple[str, str]] = []
    for group in matcher.get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        while True:
            search = old[i1:i2]
            if "".join(search).strip() and _count(old, search) == 1:
                break
            if i1 == 0 and i2 == len(old):
                break
            if i1 > 0:
                i1, j1 = i1 - 1, j1 - 1
            if i2 < len(old):
                i2, j2 = i2 + 1, j2 + 1
        blocks.append(("\n".join(old[i1:i2]), "\n".join(new[j1:j2])))
    if blocks and _same(apply_blocks(parent, blocks), child) and not _overlap(blocks, old):
        return blocks
    return [(parent, child)]


def _same(a: str, b: str) -> bool:
    return a.rstrip() == b.rstrip()


def _overlap(blocks: list[tuple[str, str]], old: list[str]) -> bool:
    """Blocks must hit disjoint, increasing regions of the parent (else widen to one block)."""
    spans = []
    for search, _ in blocks:
        lines = search.rstrip().split("\n")
        spans.append((_find(old, lines), len(lines)))
    return any(a[0] < 0 or a[0] + a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False)) or spans[0][0] < 0


def format_diff(blocks: Sequence[tuple[str, str]]) -> str:
    parts = [f"{SEARCH}\n{search.rstrip()}\n{DIVIDER}\n{replace.rstrip()}\n{REPLACE}" for search, replace in blocks]
    return "\n\n".join(parts)
