"""Edits of the code's form: a comparison loosened or tightened, a min/max-style call mirrored, a
statement duplicated, deleted or moved, a string literal replaced by a sibling the code lists."""

from __future__ import annotations

import ast
import re
import tokenize

import numpy as np

from .history import (
    first_store,
    idempotent,
)
from .numeric import is_index, number_hints
from .source import Edit, Pool, Source

MIRRORS = {"min": "max", "argmin": "argmax", "nanmin": "nanmax", "amin": "amax", "minimum": "maximum",
           "nanargmin": "nanargmax", "floor": "ceil", "fmin": "fmax"}
MIRRORS |= {b: a for a, b in list(MIRRORS.items())}
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.For, ast.While, ast.If, ast.With)
_QUOTED = re.compile(r"""(['"])([^'"\n\\]{1,80})\1""")
_BRACKETED = re.compile(r"[\[({]([^\[\](){}\n]*)[\])}]")


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
        if isinstance(parent, (ast.Expr, ast.JoinedStr, ast.FormattedValue)) or is_index(source, node):
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
    hints = number_hints(source, list(sites), pool, equal=True)
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
