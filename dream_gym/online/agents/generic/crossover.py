"""Crossover: a function or a differing block of lines taken from another program the prompt shows."""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import Sequence

import numpy as np

from .source import Donor, Edit, Pool, Source, region_text


def pick_donor(donors: Sequence[Donor], rng: np.random.Generator) -> Donor | None:
    """A donor, the better-scored ones more often (rank weights; unscored ones in the middle)."""
    if not donors:
        return None
    scores = [d.score if d.score is not None and math.isfinite(d.score) else None for d in donors]
    known = sorted({s for s in scores if s is not None})
    middle = (len(known) + 1) / 2
    weights = np.array([1.0 + (known.index(s) + 1 if s is not None else middle) for s in scores])
    return donors[int(rng.choice(len(donors), p=weights / weights.sum()))]


def functions_of(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
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
    theirs = functions_of(other.tree)
    options = []
    for name, node in sorted(functions_of(source.tree).items()):
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
