"""Edits of values: a numeric literal moved on its own scale, a loop bound nudged, an array of one
value given a small seeded random part."""

from __future__ import annotations

import ast
import difflib
import io
import math
import re
import tokenize
from collections.abc import Sequence
from typing import Any

import numpy as np

from .source import Edit, Pool, Source


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


def is_index(source: Source, node: ast.AST) -> bool:
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
            and source.editable_node(node) and source.live(node) and not is_index(source, node)]


def number_edit(source: Source, rng: np.random.Generator, pool: Pool) -> Edit | None:
    """A literal moved at random, or, more often when the shown programs tell, in the direction
    that scored better: away from a worse program's value of the same literal, or to and past a
    better one's (the momentum an LLM reads off the history it is shown)."""
    sites = _number_literals(source)
    if not sites:
        return None
    hints = number_hints(source, sites, pool)
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


def number_hints(source: Source, sites: list[ast.Constant], pool: Pool,
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


def array_sites(source: Source) -> list[ast.Call]:
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
    sites = array_sites(source)
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
