"""A no-LLM agent for any program: seeded local edits of the parent's text, as an LLM's small changes.

:class:`GenericAgent` writes a child of any Python program without knowing its task. It reads the
parent as text (never running it) and makes a seeded number of edits (most children one or two;
one more when the parent scores 0) inside the ``EVOLVE-BLOCK-START`` / ``EVOLVE-BLOCK-END``
regions (the whole file when there are none), each one of:

* ``number``: a numeric literal scaled (a factor around 1) or shifted by a step of its own
  magnitude (``1000`` moves by hundreds, ``0.7`` by hundredths); an int stays an int, a positive
  value stays positive; indices (``x[0]``), ``axis=`` arguments and an array's shape
  (``np.zeros((n, 2))``, ``.random(shape)``, ``reshape``, ``shape=``; ``n = 11`` too when ``n`` is
  read only as the shape of an array of one value) are left alone; when a program
  the prompt shows differs from the parent in that literal only, the literal more often moves
  away from a worse program's value or to and past a better one's (the history's momentum), and
  is mostly left alone when that program failed;
* ``bound``: a loop or range limit nudged: an int argument of ``range(...)`` or an int compared in
  a ``while``/``if`` test moved by a step or so, another ``range`` argument given ``+ 1``/``- 1``;
* ``compare``: a comparison loosened or tightened (``<`` and ``<=``, ``>`` and ``>=``);
* ``swap``: a call of the min/max family turned into its mirror (``min``/``max``,
  ``argmin``/``argmax``, ``minimum``/``maximum``, ``floor``/``ceil``, ...);
* ``statement``: a simple statement duplicated, deleted or moved past its neighbour in its block
  (no copy of a plain ``x = value``, whose first copy would be dead; no deletion of the first
  store of a name, which would leave its readers with an undefined name);
* ``string``: a string literal replaced by a sibling: another quoted word of a bracketed list (in
  the code or a comment) that holds the literal (the options a program lists for a setting);
  values a worse, failed or equally scored shown program tried there are not tried again;
* ``crossover``: a piece of another program of the prompt (an inspiration, a top program) scored
  at least as well as the parent, above 0 and not failed: a function of the same name, or one
  differing block of lines of the two programs' regions;
* ``array``: an array of one value (``np.zeros(shape)``, ``np.ones``, ``np.full``, ``np.empty``)
  becomes that value plus a small seeded random array of the same shape, in [0, scale), plain or
  sorted along its rows (rising or falling) or its columns (:data:`FILLS`): a program whose answer
  is all one value, every point at the origin, scores nothing; one that differs can. This edit is
  the child's only one; a parent that scores 0 draws it twice as often as all other kinds together.

What the prompt shows steers the edits (:mod:`dream_gym.online.agents.generic_history`): a shown
program whose evaluation failed (the prompt shows its ``error``) is no crossover source, and a
child whose change has the form of that program's change (its lines, numbers masked) is mostly not
written again; an assignment the same block replaces before reading it (a dead copy) is no edit
site.

Edit sites come from :mod:`ast` and :mod:`tokenize`; every edit replaces a span of the source text,
so the rest of the file keeps its formatting. After each edit the child must still compile
(nothing is run) and must not undo an earlier edit, and a child changes each string literal,
comparison or mirrored call once (a second edit there would overwrite or undo the first; a number
may move twice, the two steps making one bigger step); an edit that breaks it is dropped and another
tried, a bounded number of times; a text equal to a program the prompt shows is only a step. The
same parent, donors, parent score and generator give the same child.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import io
import json
import math
import re
import time
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dream_gym.online.agent_base import ParentContext, Proposal, zero_cost
from dream_gym.online.agents.generic_history import (
    change_form,
    dead_lines,
    first_store,
    idempotent,
    shows_error,
)

#: How often each kind of edit is tried (among the kinds that have a site in the parent).
EDIT_WEIGHTS: dict[str, float] = {
    "number": 0.30, "bound": 0.08, "compare": 0.07, "swap": 0.05, "statement": 0.04, "string": 0.20,
    "crossover": 0.26, "array": 0.10,
}
MAX_TRIES = 24  # edit attempts per child before giving up on more edits
#: Edits a child gets alone (on the parent, with no other edit): a change bold enough that edits
#: stacked on it mostly break the program (measured on heilbronn_triangle: of 56 children that
#: carried a new random array among other edits, none was valid). Such an edit is drawn only for a
#: parent that has a site for it, so a program without one gets exactly the children it got before.
ALONE = frozenset({"array"})
MAX_EDITS = 4
START_MARK, END_MARK = "EVOLVE-BLOCK-START", "EVOLVE-BLOCK-END"
MIRRORS = {"min": "max", "argmin": "argmax", "nanmin": "nanmax", "amin": "amax", "minimum": "maximum",
           "nanargmin": "nanargmax", "floor": "ceil", "fmin": "fmax"}
MIRRORS |= {b: a for a, b in list(MIRRORS.items())}
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.For, ast.While, ast.If, ast.With)
_QUOTED = re.compile(r"""(['"])([^'"\n\\]{1,80})\1""")
_BRACKETED = re.compile(r"[\[({]([^\[\](){}\n]*)[\])}]")


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


# -- numbers --------------------------------------------------------------------------------------
def new_int(value: int, rng: np.random.Generator) -> int:
    """An int moved on a scale that fits it: by one when small, else scaled or shifted by a step
    of its magnitude; positive stays positive, never the same value."""
    if abs(value) <= 3:
        new = value + int(rng.choice([-1, 1]))
        if value > 0 and new <= 0:
            new = value + 1
        return new
    if rng.random() < 0.6:
        new = int(round(value * math.exp(rng.normal(0.0, 0.35))))
    else:
        step = 10 ** max(0, int(math.floor(math.log10(abs(value)))) - 1)
        new = value + int(rng.choice([-1, 1])) * int(rng.integers(1, 10)) * step
    if value > 0 and new <= 0:
        new = max(1, value // 2)
    if new == value:
        new = value + (1 if value >= 0 else -1)
    return new


def new_float(value: float, rng: np.random.Generator) -> float:
    """A float scaled by a factor around 1 or shifted by a step of its own magnitude."""
    if value == 0.0 or not math.isfinite(value):
        return float(rng.choice([-1.0, 1.0]) * 10 ** rng.uniform(-3, -1)) if value == 0.0 else value
    if rng.random() < 0.6:
        new = value * math.exp(rng.normal(0.0, 0.3))
    else:
        step = 10.0 ** (math.floor(math.log10(abs(value))) - 1)
        new = value + float(rng.choice([-1.0, 1.0])) * float(rng.integers(1, 10)) * step
    if value > 0 >= new:
        new = value / 2
    return new


def float_text(value: float, original: str) -> str:
    """A float literal of about the original's precision (one more digit), always a float."""
    digits = len(re.sub(r"[^0-9]", "", original.lower().split("e")[0]).lstrip("0")) or 1
    precision = min(8, max(3, digits + 1))
    text = f"{value:.{precision}g}"
    if "e" in text and "e" not in original.lower() and 1e-5 <= abs(value) < 1e9:
        text = f"{value:.{precision + 4}f}".rstrip("0")
    if not any(ch in text for ch in ".en"):
        text += ".0"
    return text[:-1] + "0" if text.endswith(".") else text


def _is_index(source: Source, node: ast.AST) -> bool:
    """A literal an LLM would not tune: a subscript index, an ``axis=``/``dim=`` argument, an
    array's shape, or the value of a name read only as an array's shape (``n = 11`` before
    ``np.zeros((n, 2))``)."""
    if _in_shape(source, node, SHAPE_CALLS):
        return True
    parent = source.parent_of(node)
    while isinstance(parent, (ast.UnaryOp, ast.Tuple, ast.Slice)):
        node, parent = parent, source.parent_of(parent)
    if isinstance(parent, ast.Subscript) and parent.slice is node:
        return True
    if (isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1
            and isinstance(parent.targets[0], ast.Name) and parent.targets[0].id in _shape_names(source)):
        return True
    return isinstance(parent, ast.keyword) and parent.arg in ("axis", "dim", "axes", "dtype")


#: Calls whose first argument is an array's shape: an array of one value (``np.zeros(shape)``), a
#: generator's ``random(shape)``, ``reshape``. The shape of the answer is its interface with the
#: evaluator, not a setting to tune.
SHAPE_CALLS = ("zeros", "ones", "empty", "full", "random", "reshape")


def _in_shape(source: Source, node: ast.AST, calls: Sequence[str]) -> bool:
    """The node is (a part of) the shape argument of one of ``calls``, or of a ``shape=``."""
    parent = source.parent_of(node)
    while isinstance(parent, (ast.UnaryOp, ast.Tuple)):
        node, parent = parent, source.parent_of(parent)
    if isinstance(parent, ast.keyword):
        return parent.arg == "shape"
    return (isinstance(parent, ast.Call) and bool(parent.args) and parent.args[0] is node
            and isinstance(parent.func, ast.Attribute) and parent.func.attr in calls)


def _shape_names(source: Source) -> set[str]:
    """Names the program reads only as the shape of an array of one value or of ``reshape``
    (not of a random draw, whose size may be a sample count worth tuning)."""
    if source._shape_names is None:
        reads: dict[str, list[bool]] = {}
        for node in ast.walk(source.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                reads.setdefault(node.id, []).append(_in_shape(source, node, ("zeros", "ones", "empty", "full", "reshape")))
        source._shape_names = {name for name, shapes in reads.items() if all(shapes)}
    return source._shape_names


def _number_literals(source: Source) -> list[ast.Constant]:
    return [node for node in ast.walk(source.tree)
            if isinstance(node, ast.Constant) and type(node.value) in (int, float)
            and source.editable_node(node) and source.live(node) and not _is_index(source, node)]


def number_edit(source: Source, rng: np.random.Generator, pool: Pool) -> Edit | None:
    """A literal moved at random, or, more often when the shown programs tell, in the direction
    that scored better: away from a worse program's value of the same literal, or to and past a
    better one's (the momentum an LLM reads off the history it is shown)."""
    sites = _number_literals(source)
    if not sites:
        return None
    hints = _number_hints(source, sites, pool)
    # a literal whose change a shown program failed with (its value broke the program) is mostly left alone
    broken = {node for node, seen in hints.items() if any(verdict is None for _, verdict in seen)}
    if broken and len(broken) < len(sites) and rng.random() < 0.75:
        sites = [node for node in sites if node not in broken]
    # a failure says to leave the literal alone, not which way it should move
    hints = {node: [(v, verdict) for v, verdict in seen if verdict is not None]
             for node, seen in hints.items() if node in sites}
    hints = {node: seen for node, seen in hints.items() if seen}
    hinted = sorted(hints, key=lambda n: (n.lineno, n.col_offset))
    value: float
    if hinted and rng.random() < 0.6:
        node = hinted[int(rng.integers(len(hinted)))]
        other, better = hints[node][int(rng.integers(len(hints[node])))]
        value = _directed(node.value, other, better, rng)  # type: ignore[arg-type]
    else:
        node = sites[int(rng.integers(len(sites)))]
        literal = node.value
        value = new_int(literal, rng) if isinstance(literal, int) else new_float(float(literal), rng)  # type: ignore[arg-type]
    start, end = source.node_span(node)
    old = source.text[start:end]
    new = str(int(value)) if isinstance(node.value, int) else float_text(float(value), old)
    if new == old:
        return None
    return Edit(start, end, new, f"{old} -> {new} (line {node.lineno})")


def _directed(value: float, other: float, better: bool, rng: np.random.Generator) -> float:
    """A new value for a literal that is ``other`` in a program scored ``better`` (or worse)."""
    step = (other - value) if better else (value - other)
    base = other if better else value
    new = base + step * rng.uniform(0.2, 1.0)
    if isinstance(value, int) and not isinstance(value, bool):
        new = int(round(new))
        if new == value:
            new = value + (1 if step > 0 else -1)
        if value > 0 and new <= 0:
            new = max(1, value // 2)
        return new
    if value > 0 >= new:
        new = value / 2
    return new


def _number_hints(source: Source, sites: list[ast.Constant], pool: Pool,
                  equal: bool = False) -> dict[ast.Constant, list[tuple[Any, bool | None]]]:
    """For each literal, (value in a shown program, verdict) over the shown programs whose
    matching line differs from the parent's in its literals only: the verdict is whether that
    program scored better, None when it failed (an error: worse than any score). With ``equal``,
    a program scored the same as the parent gives ``"same"``."""
    if pool.parent_score is None and not any(d.failed for d in pool.shown):
        return {}
    by_line: dict[int, list[ast.Constant]] = {}
    for node in sites:
        if node.lineno == node.end_lineno:
            by_line.setdefault(node.lineno, []).append(node)
    hints: dict[ast.Constant, list[tuple[Any, Any]]] = {}
    for donor in pool.shown:
        verdict: Any
        if donor.failed:
            verdict = None
        elif donor.score is None or pool.parent_score is None:
            continue
        elif donor.score == pool.parent_score:
            if not equal:
                continue
            verdict = "same"
        else:
            verdict = donor.score > pool.parent_score
        other_lines = donor.code.split("\n")
        matcher = difflib.SequenceMatcher(a=source.lines, b=other_lines, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "replace" or i2 - i1 != j2 - j1:
                continue
            for offset in range(i2 - i1):
                line = i1 + offset + 1
                if line in by_line:
                    pairs = _literal_pairs(source.lines[line - 1], other_lines[j1 + offset])
                    for node in by_line[line]:
                        column = source._chars(line, node.col_offset)
                        if column in pairs and pairs[column] != node.value:
                            hints.setdefault(node, []).append((pairs[column], verdict))
    return hints


def _literal_pairs(mine: str, theirs: str) -> dict[int, Any]:
    """Column of each literal of ``mine`` -> the literal at the same place of ``theirs``, when the
    two lines differ in their literals only."""
    ours, other = _literal_tokens(mine), _literal_tokens(theirs)
    if ours is None or other is None or len(ours[0]) != len(other[0]) or ours[1] != other[1]:
        return {}
    return {column: value for (column, _), (_, value) in zip(ours[0], other[0], strict=True)}


def _literal_tokens(line: str) -> tuple[list[tuple[int, Any]], list[str]] | None:
    """(column and value of each number or string literal, the other tokens) of one line."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip("\n") + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    literals, rest = [], []
    for token in tokens:
        if token.type in (tokenize.NUMBER, tokenize.STRING):
            try:
                value = ast.literal_eval(token.string)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
            literals.append((token.start[1], value))
        elif token.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT):
            rest.append(token.string)
    return literals, rest


# -- loop bounds ----------------------------------------------------------------------------------
def _bound_sites(source: Source) -> list[ast.expr]:
    sites: list[ast.expr] = []
    for node in ast.walk(source.tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
                and source.editable_node(node)):
            sites.extend(node.args[:2])
        elif isinstance(node, (ast.While, ast.If)) and isinstance(node.test, ast.Compare):
            sites.extend(c for c in [node.test.left, *node.test.comparators]
                         if isinstance(c, ast.Constant) and type(c.value) is int)
    return [s for s in sites if source.editable_node(s) and not (isinstance(s, ast.Constant) and type(s.value) is not int)]


def bound_edit(source: Source, rng: np.random.Generator, pool: Pool) -> Edit | None:
    sites = _bound_sites(source)
    if not sites:
        return None
    node = sites[int(rng.integers(len(sites)))]
    start, end = source.node_span(node)
    old = source.text[start:end]
    sign = int(rng.choice([-1, 1]))
    if isinstance(node, ast.Constant):
        value = int(node.value)  # type: ignore[arg-type]
        new_value = value + sign * max(1, int(round(abs(value) * rng.uniform(0.02, 0.15))))
        if value > 0 and new_value <= 0:
            new_value = value + 1
        new = str(new_value)
    elif (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))
          and isinstance(node.right, ast.Constant) and type(node.right.value) is int):
        # ``n + 1`` nudged again: the constant moves (``n + 2``, or ``n`` alone) instead of ``(n + 1) + 1``
        offset = node.right.value * (1 if isinstance(node.op, ast.Add) else -1) + sign
        left = source.text[slice(*source.node_span(node.left))]
        new = left if offset == 0 else f"{left} {'+' if offset > 0 else '-'} {abs(offset)}"
    else:
        simple = isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
        new = f"{old if simple else f'({old})'} {'+' if sign > 0 else '-'} 1"
    return Edit(start, end, new, f"bound {old} -> {new} (line {node.lineno})")


# -- comparisons and mirrored calls -------------------------------------------------------------------
_LOOSER = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}


def compare_edit(source: Source, rng: np.random.Generator, pool: Pool) -> Edit | None:
    sites = [t for t in source.tokens if t.type == tokenize.OP and t.string in _LOOSER and source.editable(t.start[0])]
    if not sites:
        return None
    token = sites[int(rng.integers(len(sites)))]
    start = source.index(*token.start)
    new = _LOOSER[token.string]
    return Edit(start, start + len(token.string), new, f"{token.string} -> {new} (line {token.start[0]})")


def swap_edit(source: Source, rng: np.random.Generator, pool: Pool) -> Edit | None:
    tokens = source.tokens
    sites = [t for i, t in enumerate(tokens[:-1]) if t.type == tokenize.NAME and t.string in MIRRORS
             and tokens[i + 1].string == "(" and source.editable(t.start[0])]
    if not sites:
        return None
    token = sites[int(rng.integers(len(sites)))]
    start = source.index(*token.start)
    new = MIRRORS[token.string]
    return Edit(start, start + len(token.string), new, f"{token.string} -> {new} (line {token.start[0]})")


# -- statements ---------------------------------------------------------------------------------------
def _blocks(tree: ast.AST) -> list[list[ast.stmt]]:
    blocks = []
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                blocks.append(body)
    return blocks


def _own_lines(source: Source, stmt: ast.stmt) -> bool:
    """The statement alone on its lines (no ``a = 1; b = 2``), and editable."""
    before = source.lines[stmt.lineno - 1].encode("utf-8")[: stmt.col_offset]
    last = stmt.end_lineno or stmt.lineno
    after = source.lines[last - 1].encode("utf-8")[stmt.end_col_offset or 0:]
    return (not before.strip() and (not after.strip() or after.strip().startswith(b"#"))
            and source.editable(stmt.lineno, last))


def _simple(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
        return False  # a docstring
    return isinstance(stmt, _SIMPLE)


def _line_span(source: Source, first: int, last: int) -> tuple[int, int]:
    """Span of whole lines ``first..last`` with their newline."""
    start = source.offsets[first - 1]
    end = source.offsets[last] if last < len(source.lines) else len(source.text)
    return start, end


def statement_edit(source: Source, rng: np.random.Generator, pool: Pool) -> Edit | None:
    sites = []
    for block in _blocks(source.tree):
        alone = all(_own_lines(source, s) for s in block)
        for index, stmt in enumerate(block):
            if alone and _simple(stmt):
                sites.append((block, index))
    if not sites:
        return None
    block, index = sites[int(rng.integers(len(sites)))]
    stmt = block[index]
    first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
    start, end = _line_span(source, first, last)
    lines_text = source.text[start:end]
    if not lines_text.endswith("\n"):
        lines_text += "\n"
    action = str(rng.choice(["duplicate", "delete", "move"]))
    if action == "delete" and len(block) > 1:
        if first_store(block, index):  # its later readers would find the name undefined
            return None
        return Edit(start, end, "", f"deleted line {first}-{last}")
    if action == "move" and index + 1 < len(block) and _simple(block[index + 1]):
        following = block[index + 1]
        n_start, n_end = _line_span(source, following.lineno, following.end_lineno or following.lineno)
        gap = source.text[end:n_start]
        moved = source.text[n_start:n_end]
        if not moved.endswith("\n"):
            moved, lines_text = moved + "\n", lines_text.rstrip("\n")
        return Edit(start, n_end, moved + gap + lines_text, f"moved line {first}-{last} below line {following.lineno}")
    if idempotent(stmt):  # a copy of ``x = value`` right after it changes nothing (the first is dead)
        return None
    return Edit(end, end, lines_text if source.text[start:end].endswith("\n") else "\n" + lines_text.rstrip("\n"),
                f"duplicated line {first}-{last}")


# -- strings ------------------------------------------------------------------------------------------
def _string_groups(source: Source) -> list[list[str]]:
    """Groups of sibling strings: string literals of one list, tuple or set in the code, and quoted
    words of one bracketed group in a comment."""
    groups = []
    for node in ast.walk(source.tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(words) >= 2:
                groups.append(words)
    for token in source.tokens:
        if token.type == tokenize.COMMENT:
            for inside in _BRACKETED.findall(token.string):
                words = [m.group(2) for m in _QUOTED.finditer(inside)]
                if len(words) >= 2:
                    groups.append(words)
    return groups


def _string_sites(source: Source) -> list[ast.Constant]:
    sites = []
    for node in ast.walk(source.tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.lineno == node.end_lineno
                and source.editable_node(node) and source.live(node) and len(node.value) <= 80):
            continue
        parent = source.parent_of(node)
        if isinstance(parent, (ast.Expr, ast.JoinedStr, ast.FormattedValue)) or _is_index(source, node):
            continue
        if isinstance(parent, ast.Dict) and any(k is node for k in parent.keys):
            continue
        start, end = source.node_span(node)
        if source.text[start:end][:1] in ("'", '"'):
            sites.append(node)
    return sites


def string_edit(source: Source, rng: np.random.Generator, pool: Pool) -> Edit | None:
    """A literal replaced by a sibling. The shown programs that differ from the parent in that
    literal only tell which values scored worse (not tried again; the parent's own value is then
    usually kept) and which scored better (taken more often)."""
    groups = _string_groups(source)
    sites = _string_sites(source)
    hints = _number_hints(source, list(sites), pool, equal=True)
    options = []
    for node in sites:
        worse = {v for v, verdict in hints.get(node, []) if verdict is False or verdict is None}
        same = {v for v, verdict in hints.get(node, []) if verdict == "same"}
        # a value tried without gain is not tried again; the site stays open for the others
        siblings = sorted({w for g in groups if node.value in g for w in g} - {node.value} - worse - same)
        if siblings and not (worse and rng.random() < 0.75):
            options.append((node, siblings))
    if not options:
        return None
    node, siblings = options[int(rng.integers(len(options)))]
    adopted = sorted(v for v, verdict in hints.get(node, []) if verdict is True and v in siblings)
    if adopted and rng.random() < 0.6:
        word = adopted[int(rng.integers(len(adopted)))]
    else:
        word = siblings[int(rng.integers(len(siblings)))]
    start, end = source.node_span(node)
    old = source.text[start:end]
    quote = old[0]
    new = quote + word + quote if quote not in word and "\\" not in word else repr(word)
    return Edit(start, end, new, f"{old} -> {new} (line {node.lineno})")


# -- constant arrays ------------------------------------------------------------------------------------
#: numpy's constructors of an array of one value: the value their output holds (``full``: its second argument).
CONSTANT_ARRAYS = {"zeros": "0.0", "empty": "0.0", "ones": "1.0", "full": None}


def _numpy_aliases(tree: ast.Module) -> set[str]:
    """The names ``numpy`` is imported as (``import numpy as np`` gives ``np``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name for alias in node.names if alias.name == "numpy"}
    return names


def _array_sites(source: Source) -> list[ast.Call]:
    aliases = _numpy_aliases(source.tree)
    sites = []
    for node in ast.walk(source.tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in aliases
                and node.func.attr in CONSTANT_ARRAYS and not node.keywords and source.editable_node(node)
                and len(node.args) == (2 if node.func.attr == "full" else 1)):
            sites.append(node)
    return sites


def _literal_scale(source: Source) -> float:
    """The magnitude of the region's float literals (their median), 1.0 when it has none."""
    values = sorted(abs(float(n.value)) for n in _number_literals(source)  # type: ignore[arg-type]
                    if type(n.value) is float and n.value != 0.0 and math.isfinite(n.value))
    return values[len(values) // 2] if values else 1.0


#: The random fills an array edit writes (``{random}``: a seeded generator's ``random(shape)``, values
#: in [0, 1), so a fill stays on one side of the constant: an answer of zeros becomes non-negative,
#: as coordinates, sizes and weights are): plain; each row in order, rising or falling; each column
#: in order. Answers are often ordered (coordinates, ranks, levels): one shape of fill that the
#: evaluator refuses leaves the others to try (a failed fill's form is not written again, mostly).
FILLS = {
    "uniform": "{random} * {scale}",
    "rows-rising": "{np}.sort({random}, axis=-1) * {scale}",
    "rows-falling": "{np}.sort({random}, axis=-1)[..., ::-1] * {scale}",
    "columns-rising": "{np}.sort({random}, axis=0) * {scale}",
}


def array_edit(source: Source, rng: np.random.Generator, pool: Pool) -> Edit | None:
    """An array of one constant value (``np.zeros(shape)``, ``np.ones``, ``np.full``, ``np.empty``)
    becomes that value plus a small seeded random array of the same shape, one of :data:`FILLS`:
    a program whose answer is all one value (every point at the origin) gets points that differ,
    on a scale of a tenth or a hundredth of its literals' magnitude, whose seed and scale later
    edits tune like any literal."""
    sites = _array_sites(source)
    if not sites:
        return None
    node = sites[int(rng.integers(len(sites)))]
    assert isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
    numpy_name = node.func.value.id
    shape = source.text[slice(*source.node_span(node.args[0]))]
    base = CONSTANT_ARRAYS[node.func.attr] or f"({source.text[slice(*source.node_span(node.args[1]))]})"
    scale = float_text(_literal_scale(source) * float(rng.choice([0.1, 0.01])), "0.1")
    seed = int(rng.integers(1, 1000))
    fill = FILLS[str(rng.choice(sorted(FILLS)))]
    random = fill.format(np=numpy_name, random=f"{numpy_name}.random.default_rng({seed}).random({shape})", scale=scale)
    new = random if base == "0.0" else f"{base} + {random}"
    start, end = source.node_span(node)
    old = source.text[start:end]
    return Edit(start, end, new, f"{old} -> {new} (line {node.lineno})")


# -- crossover ------------------------------------------------------------------------------------------
def pick_donor(donors: Sequence[Donor], rng: np.random.Generator) -> Donor | None:
    """A donor, the better-scored ones more often (rank weights; unscored ones in the middle)."""
    if not donors:
        return None
    scores = [d.score if d.score is not None and math.isfinite(d.score) else None for d in donors]
    known = sorted({s for s in scores if s is not None})
    middle = (len(known) + 1) / 2
    weights = np.array([1.0 + (known.index(s) + 1 if s is not None else middle) for s in scores])
    return donors[int(rng.choice(len(donors), p=weights / weights.sum()))]


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, node)
    return found


def _def_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return first, node.end_lineno or node.lineno


def _reindent(lines: list[str], indent: str) -> list[str]:
    own = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return [indent + line[own:] if line.strip() else line for line in lines]


def function_crossover(source: Source, donor: Donor, rng: np.random.Generator) -> Edit | None:
    other = Source.read(donor.code)
    if other is None:
        return None
    theirs = _functions(other.tree)
    options = []
    for name, node in sorted(_functions(source.tree).items()):
        first, last = _def_lines(node)
        if name in theirs and source.editable(first, last):
            a, b = _def_lines(theirs[name])
            if other.lines[a - 1:b] != source.lines[first - 1:last]:
                options.append((name, first, last, other.lines[a - 1:b]))
    if not options:
        return None
    name, first, last, new_lines = options[int(rng.integers(len(options)))]
    line = source.lines[first - 1]
    new = "\n".join(_reindent(new_lines, line[: len(line) - len(line.lstrip())]))
    start = source.offsets[first - 1]
    end = source.offsets[last - 1] + len(source.lines[last - 1])
    return Edit(start, end, new, f"function {name} taken from another program")


def block_crossover(source: Source, donor: Donor, rng: np.random.Generator) -> Edit | None:
    first, mine = region_text(source.text)
    _, theirs = region_text(donor.code)
    matcher = difflib.SequenceMatcher(a=mine, b=theirs, autojunk=False)
    hunks = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    hunks = [h for h in hunks if source.editable(first + h[1], first + max(h[1], h[2] - 1))]
    if not hunks:
        return None
    _, i1, i2, j1, j2 = hunks[int(rng.integers(len(hunks)))]
    line_a = first + i1  # 1-based number of the first replaced (or following) line
    start = source.offsets[line_a - 1] if line_a <= len(source.lines) else len(source.text)
    end = source.offsets[first + i2 - 1] if first + i2 <= len(source.lines) else len(source.text)
    new = "".join(line + "\n" for line in theirs[j1:j2])
    return Edit(start, end, new, f"lines {line_a}-{first + i2 - 1} taken from another program")


def crossover_edit(source: Source, rng: np.random.Generator, pool: Pool) -> Edit | None:
    donor = pick_donor(pool.better, rng)
    if donor is None:
        return None
    if rng.random() < 0.35:
        return function_crossover(source, donor, rng) or block_crossover(source, donor, rng)
    return block_crossover(source, donor, rng) or function_crossover(source, donor, rng)


EDITS: dict[str, Callable[[Source, np.random.Generator, Pool], Edit | None]] = {
    "number": number_edit, "bound": bound_edit, "compare": compare_edit, "swap": swap_edit,
    "statement": statement_edit, "string": string_edit, "crossover": crossover_edit, "array": array_edit,
}


#: The sites of each edit of :data:`ALONE` (a parent without one never draws that edit).
ALONE_SITES: dict[str, Callable[[Source], list[Any]]] = {"array": _array_sites}


def compiles(text: str) -> bool:
    """The text compiles as Python (compiled only, never run)."""
    try:
        compile(text, "<child>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return False
    return True


# -- the agent ------------------------------------------------------------------------------------------
class GenericAgent:
    """Seeded local edits of any program (see the module docstring); no task knowledge, no LLM."""

    name = "generic"

    def __init__(self, weights: dict[str, float] | None = None, max_edits: int = MAX_EDITS):
        self.weights = dict(EDIT_WEIGHTS if weights is None else weights)
        unknown = sorted(set(self.weights) - set(EDITS))
        if unknown:
            raise ValueError(f"unknown edit kinds {unknown}; known: {', '.join(EDITS)}")
        self.max_edits = max_edits

    def propose(self, task: Any, parent: ParentContext, rng: np.random.Generator,
                donors: Sequence[Donor] = ()) -> Proposal:
        """A child of ``parent.code`` (``task`` is not needed: the agent reads only the text)."""
        started = time.time()
        code, notes = self.child(parent.code, donors, rng, parent_score=parent.score)
        return Proposal(code=code, notes="; ".join(notes), cost=zero_cost(time.time() - started))

    def child(self, code: str, donors: Sequence[Donor], rng: np.random.Generator,
              parent_score: float | None = None) -> tuple[str, list[str]]:
        """(child, one note per edit): ``1 + Poisson(0.5)`` edits (one more when the parent scores
        0, as a parent that gets nothing right needs a bolder change; at most ``max_edits``), each
        one that compiles and does not undo an earlier one, and more while the text is one the
        prompt shows (crossover back to a better program is a step, not a child). Crossover takes
        only from donors scored at least as well as the parent (when both scores are known). When
        the parent does not compile, the region of the best donor that does replaces its region."""
        # a parent that scores nothing yet gets a bolder change (more edits at once)
        wanted = min(self.max_edits, (2 if parent_score == 0 else 1) + int(rng.poisson(0.5)))
        shown = [d for d in donors if d.code.strip() != code.strip()]
        # crossover sources: no failed program, none that scores nothing (0 is OpenEvolve's failure too)
        better = [d for d in shown if not d.failed and d.score != 0
                  and (d.score is None or parent_score is None or d.score >= parent_score)]
        pool = Pool(shown, better, parent_score)
        if not compiles(code):
            return self._repair(code, better, rng)
        existing = {code, *(d.code for d in shown)}
        parent_source = Source.read(code)
        bold = {k for k in ALONE if parent_source is not None and ALONE_SITES[k](parent_source)}
        weights = self._weights(bold, parent_score)
        failed_forms = {change_form(code, d.code) for d in shown if d.failed} - {None}
        current, visited = code, {code}
        source = parent_source  # the text edited, read again only when an edit changes it
        notes: list[str] = []
        touched: list[tuple[int, int]] = []  # spans of the child's local edits so far
        for _ in range(MAX_TRIES):
            if len(notes) >= wanted and current not in existing:
                break
            if source is None:
                break
            kinds = [k for k, w in weights.items()
                     if w > 0 and (k != "crossover" or better) and (k not in ALONE or k in bold)]
            if not kinds:
                break
            chances = np.array([weights[k] for k in kinds])
            kind = kinds[int(rng.choice(len(kinds), p=chances / chances.sum()))]
            if kind in ALONE:
                alone = self._alone(code, kind, rng, pool, existing)
                if alone is not None and not _failed_before(code, alone[0], failed_forms, rng):
                    return alone
                continue
            edit = EDITS[kind](source, rng, pool)
            if edit is None or (kind in LOCAL and _overlaps(edit, touched)):
                continue  # one change per place: a second edit there would overwrite the first
            child = edit.apply(current)
            if child in visited or not compiles(child):  # no edit undoes an earlier one
                continue
            if _failed_before(code, child, failed_forms, rng):
                continue
            # a child equal to a shown program (crossover back to a better one) is only a step:
            # the loop goes on until the text is new
            current, source = child, Source.read(child)
            visited.add(child)
            touched = _shifted(touched, edit) + ([(edit.start, edit.start + len(edit.replacement))] if kind in LOCAL else [])
            notes.append(f"{kind}: {edit.note}")
        if current in existing:
            current, note = _marked(code, rng)
            notes = [note]
        return current, notes

    def _weights(self, bold: set[str], parent_score: float | None) -> dict[str, float]:
        """The edit kinds' weights for one parent: a parent that scores nothing and has a site for a
        bold edit (an answer of one constant value, the likely reason it scores nothing) draws
        that edit twice as often as all the others together."""
        weights = dict(self.weights)
        if parent_score == 0:
            others = sum(w for k, w in weights.items() if k not in ALONE)
            for kind in bold:
                if weights.get(kind, 0.0) > 0:
                    weights[kind] = max(weights[kind], 2 * others / len(bold))
        return weights

    @staticmethod
    def _alone(code: str, kind: str, rng: np.random.Generator, pool: Pool,
               existing: set[str]) -> tuple[str, list[str]] | None:
        """The parent with one bold edit and nothing else (None when it has no site or gives no
        new program that compiles)."""
        source = Source.read(code)
        edit = EDITS[kind](source, rng, pool) if source is not None else None
        if edit is None:
            return None
        child = edit.apply(code)
        return (child, [f"{kind}: {edit.note}"]) if child not in existing and compiles(child) else None

    def _repair(self, code: str, donors: Sequence[Donor], rng: np.random.Generator) -> tuple[str, list[str]]:
        first, mine = region_text(code)
        lines = code.split("\n")
        for donor in sorted(donors, key=lambda d: -(d.score or 0.0)):
            _, theirs = region_text(donor.code)
            child = "\n".join(lines[: first - 1] + theirs + lines[first - 1 + len(mine):])
            if compiles(child) and child != code:
                return child, ["repair: the region of a program that compiles taken over"]
        return _marked(code, rng)[0], ["no edit compiles: the program is returned with a comment"]


#: Edits a child makes at most once at each place: a string replaced twice is one sibling drawn in
#: vain (the first is never evaluated), an operator or a call flipped twice is undone. A number (or
#: a bound) may move twice: the two steps make one bigger step (measured: forbidding it lowered
#: function_minimization's best in 5 of 6 seeds of agent_loop.py).
LOCAL = frozenset({"compare", "swap", "string"})


def _overlaps(edit: Edit, spans: list[tuple[int, int]]) -> bool:
    return any(edit.start < end and start < max(edit.end, edit.start + 1) for start, end in spans)


def _shifted(spans: list[tuple[int, int]], edit: Edit) -> list[tuple[int, int]]:
    """The spans after ``edit`` is applied: those after it moved by its change of length, those it
    overlaps dropped (a crossover replaced them)."""
    delta = len(edit.replacement) - (edit.end - edit.start)
    kept = []
    for start, end in spans:
        if end <= edit.start:
            kept.append((start, end))
        elif start >= edit.end:
            kept.append((start + delta, end + delta))
    return kept


def _failed_before(parent: str, child: str, failed_forms: set[frozenset[str] | None],
                   rng: np.random.Generator) -> bool:
    """The child's change has the form of one a shown program failed with (its lines, numbers
    masked): refused three times in four (the form may fail for its numbers only)."""
    return bool(failed_forms) and change_form(parent, child) in failed_forms and rng.random() < 0.75


def _marked(code: str, rng: np.random.Generator) -> tuple[str, str]:
    """The parent with one comment line added at the end of its first region: a change that
    OpenEvolve accepts as a child when no edit site exists."""
    _, last = evolve_regions(code)[0]
    lines = code.split("\n")
    line = lines[last - 1] if 0 < last <= len(lines) else ""
    indent = line[: len(line) - len(line.lstrip())] if line.strip() else ""
    mark = f"{indent}# variant {int(rng.integers(1 << 16)):04x}"
    return "\n".join(lines[:last] + [mark] + lines[last:]), "no edit site: a comment line added"


# -- what a prompt shows ----------------------------------------------------------------------------------
_FENCE = re.compile(r"```([^\n`]*)\n(.*?)\n```[ \t]*(?=\n|$)", re.DOTALL)
_SCORED_HEADER = re.compile(r"score[^:\n]*:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", re.IGNORECASE)
_CODE_FENCES = ("", "python", "py", "python3")


def prompt_donors(texts: Sequence[str], parent: str) -> list[Donor]:
    """The other programs a prompt shows, as donors: every fenced Python block that compiles,
    is not the parent and shares its structure (a function name or a third of its lines), with
    the score of the header line above it when it has one (OpenEvolve's ``### Program 1 (Score:
    0.9)`` and ``### Inspiration 1 (Score: ...)``). Sorted by score, then text: the order a prompt
    lists them in does not matter."""
    parent_source = Source.read(parent)
    parent_names = set(_functions(parent_source.tree)) if parent_source else set()
    parent_lines = parent.strip().split("\n")
    found: dict[str, Donor] = {}
    for text in texts:
        for match in _FENCE.finditer(text):
            language, code = match.group(1).strip().lower(), match.group(2)
            if language not in _CODE_FENCES or code.strip() == parent.strip() or code in found:
                continue
            donor_source = Source.read(code)
            if donor_source is None or not compiles(code):
                continue
            shared = parent_names & set(_functions(donor_source.tree))
            ratio = difflib.SequenceMatcher(a=parent_lines, b=code.strip().split("\n"), autojunk=False).ratio()
            if not shared and ratio < 0.33:
                continue
            found[code] = Donor(code, _header_score(text, match.start()), shows_error(text, match.end()))
    return sorted(found.values(), key=lambda d: (-(d.score if d.score is not None else -math.inf),
                                                 hashlib.sha256(d.code.encode()).hexdigest()))


def _header_score(text: str, position: int) -> float | None:
    """The score on the header line just above a fenced block (``### Program 2 (Score: 0.5)``)."""
    before = text[:position].rstrip("\n").rsplit("\n", 2)[-2:]
    for line in reversed(before):
        if line.startswith("#"):
            match = _SCORED_HEADER.search(line)
            if match:
                try:
                    return float(match.group(1))
                except ValueError:
                    return None
    return None


def generic_seed(server_seed: int, request_seed: Any, parent: str, donors: Sequence[Donor],
                 messages: Any = None) -> list[int]:
    """Seed words of one request: the server's seed, the request's seed (OpenEvolve sends one per
    iteration), the parent and the donors (as a set). Other prompt text (metrics, timings, the
    order of the programs shown) does not change the child; without a request seed the whole
    messages are hashed too, so repeated requests still get different children."""
    material = [int(server_seed), request_seed if isinstance(request_seed, int) and not isinstance(
        request_seed, bool) else None, parent, sorted(hashlib.sha256(d.code.encode()).hexdigest() for d in donors)]
    if material[1] is None:
        material.append(json.dumps(messages, sort_keys=True, default=str))
    digest = hashlib.sha256(json.dumps(material).encode()).digest()
    return [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]


__all__ = ["EDITS", "EDIT_WEIGHTS", "Donor", "Edit", "GenericAgent", "Pool", "Source", "compiles", "evolve_regions",
           "generic_seed", "prompt_donors"]
