"""The program an edit reads and changes: its text read once for edit sites (tree, tokens, lines,
editable regions), the other programs a prompt shows, and an edit as a span replaced."""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .history import (
    dead_lines,
)

START_MARK, END_MARK = "EVOLVE-BLOCK-START", "EVOLVE-BLOCK-END"


@dataclass(frozen=True)
class Donor:
    """Another program the prompt shows (its score when the prompt gives one; ``failed`` when the
    prompt shows an error of its evaluation)."""

    code: str
    score: float | None = None
    failed: bool = False


@dataclass(frozen=True)
class Pool:
    """The other programs an edit may read: all those shown (for the direction a number should
    move in) and those crossover may take from (scored at least as well as the parent)."""

    shown: Sequence[Donor] = ()
    better: Sequence[Donor] = ()
    parent_score: float | None = None


@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` with ``replacement``; ``note`` says what changed."""

    start: int
    end: int
    replacement: str
    note: str

    def apply(self, text: str) -> str:
        return text[: self.start] + self.replacement + text[self.end:]


@dataclass
class Source:
    """One program text read for edit sites: its tree, tokens, line offsets and editable lines."""

    text: str
    tree: ast.Module
    lines: list[str]
    offsets: list[int]  # character offset of each line's start (index 0: line 1)
    regions: list[tuple[int, int]]  # editable line ranges, 1-based and inclusive
    parents: dict[int, ast.AST] = field(default_factory=dict)
    _tokens: list[tokenize.TokenInfo] | None = None
    _dead: set[int] | None = None
    _shape_names: set[str] | None = None

    @classmethod
    def read(cls, text: str) -> Source | None:
        """The program read for editing, or None when it does not parse."""
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None
        lines = text.split("\n")
        offsets, total = [], 0
        for line in lines:
            offsets.append(total)
            total += len(line) + 1
        source = cls(text, tree, lines, offsets, evolve_regions(text))
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                source.parents[id(child)] = node
        return source

    @property
    def tokens(self) -> list[tokenize.TokenInfo]:
        if self._tokens is None:
            try:
                self._tokens = list(tokenize.generate_tokens(io.StringIO(self.text).readline))
            except (tokenize.TokenError, SyntaxError, IndentationError):
                self._tokens = []
        return self._tokens

    def index(self, line: int, column: int) -> int:
        """Character index of a (1-based line, character column) position."""
        return self.offsets[line - 1] + column

    def node_span(self, node: Any) -> tuple[int, int]:
        """Character span of an AST node (its columns are UTF-8 byte offsets)."""
        return (self.index(node.lineno, self._chars(node.lineno, node.col_offset)),
                self.index(node.end_lineno, self._chars(node.end_lineno, node.end_col_offset)))

    def _chars(self, line: int, byte_column: int) -> int:
        return len(self.lines[line - 1].encode("utf-8")[:byte_column].decode("utf-8", errors="replace"))

    def editable(self, first: int, last: int | None = None) -> bool:
        last = first if last is None else last
        return any(a <= first and last <= b for a, b in self.regions)

    def editable_node(self, node: Any) -> bool:
        return self.editable(node.lineno, node.end_lineno)

    def live(self, node: Any) -> bool:
        """The node is not in a dead store (an assignment replaced before anything reads it)."""
        if self._dead is None:
            self._dead = dead_lines(self.tree)
        return node.lineno not in self._dead

    def parent_of(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))


def evolve_regions(text: str) -> list[tuple[int, int]]:
    """The lines between each ``EVOLVE-BLOCK-START`` and the next ``EVOLVE-BLOCK-END`` marker line
    (1-based, inclusive); the whole text when it has no complete region."""
    lines = text.split("\n")
    regions, start = [], None
    for number, line in enumerate(lines, 1):
        if START_MARK in line:
            start = number
        elif END_MARK in line and start is not None:
            if number - 1 >= start + 1:
                regions.append((start + 1, number - 1))
            start = None
    return regions or [(1, len(lines))]


def region_text(text: str) -> tuple[int, list[str]]:
    """(first line, lines) of a program's editable text: its regions, or the whole file."""
    regions = evolve_regions(text)
    lines = text.split("\n")
    first, last = regions[0][0], regions[-1][1]
    return first, lines[first - 1:last]


def compiles(text: str) -> bool:
    """The text compiles as Python (compiled only, never run)."""
    try:
        compile(text, "<child>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return False
    return True
