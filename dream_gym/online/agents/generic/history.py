"""What the generic agent reads off a run's history besides scores: failures, the form of a
change, and stores no later line reads.

:mod:`dream_gym.online.agents.generic` uses these to spend its edits where they can matter:

* :func:`shows_error`: a program the prompt shows failed when the text after its block gives an
  ``error`` value (OpenEvolve's ``Key features: ... Metric: error (...)``): a failed program is no
  crossover source, and its literals count as worse than the parent's;
* :func:`change_form`: the lines a change writes, with their numbers masked: a child whose change
  has the form of one a shown program failed with is mostly not made again (a number moved
  elsewhere has no form: numbers have their own history, see ``generic.number_edit``);
* :func:`dead_lines`: assignments whose value is replaced before anything reads it (a copy left
  by an earlier edit): editing a literal there changes nothing, so those lines are no edit sites;
  :func:`idempotent` tells which assignments a copy of would be such a dead store, and
  :func:`first_store` which ones a deletion would leave their readers without.
"""

from __future__ import annotations

import ast
import difflib
import re

#: An ``error`` value after a program block: a metric named error (``Metric: error (text)``,
#: ``- error: text``, ``, error=text``), not a sentence's word (OpenEvolve's ``[Fragment formatting
#: error: ...]`` follows every inspiration).
_ERROR_VALUE = re.compile(r"(?:^|[-,;:|(]\s*)error\s*[(:=]\s*[^\s)]", re.IGNORECASE | re.MULTILINE)
#: A number as the form of a change ignores it (``0.25``, ``1e-06``, ``42``; not ``x2``).
_NUMBER = re.compile(r"(?<![A-Za-z_0-9])(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def shows_error(text: str, position: int) -> bool:
    """Whether the lines after a program block (from ``position`` to the next header line or
    block) give an error value: the program failed its evaluation."""
    after = []
    for line in text[position:].split("\n")[1:12]:
        if line.startswith("#") or line.startswith("```"):
            break
        after.append(line)
    return bool(_ERROR_VALUE.search("\n".join(after)))


def _masked(line: str) -> str:
    return _NUMBER.sub("#", line.strip())


def change_form(parent: str, child: str) -> frozenset[str] | None:
    """The lines ``child`` writes in place of ``parent``'s, numbers masked, leaving out those equal
    to a masked line they replace; None when the change only moves numbers (or changes nothing)."""
    mine, theirs = parent.split("\n"), child.split("\n")
    matcher = difflib.SequenceMatcher(a=mine, b=theirs, autojunk=False)
    written: set[str] = set()
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        replaced = {_masked(line) for line in mine[i1:i2]}
        written |= {_masked(line) for line in theirs[j1:j2]} - replaced - {""}
    return frozenset(written) or None


def _names(node: ast.AST, context: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, context)}


def _stored_name(stmt: ast.stmt) -> str | None:
    """The one plain name a statement assigns (``x = ...``, ``x: int = ...``), else None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    return None


def idempotent(stmt: ast.stmt) -> bool:
    """A plain assignment whose value does not read the name it stores (``x = 1``, not ``x = x + 1``):
    running it twice in a row is running it once, so a copy of it right after it is dead."""
    name = _stored_name(stmt)
    value = getattr(stmt, "value", None)
    return name is not None and value is not None and name not in _names(value, ast.Load)


def first_store(block: list[ast.stmt], index: int) -> bool:
    """``block[index]`` stores a name no earlier statement of its block stores: deleting it leaves
    the statements after it that read the name with an undefined name."""
    name = _stored_name(block[index])
    if name is None:
        return False
    return not any(_stored_name(stmt) == name or name in _names(stmt, ast.Store) for stmt in block[:index])


def dead_lines(tree: ast.AST) -> set[int]:
    """Lines of assignments whose value the same block stores again before any statement reads it."""
    dead: set[int] = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                dead |= _dead_in_block(block, calls_read=isinstance(node, ast.Module))
    return dead


def _dead_in_block(block: list[ast.stmt], calls_read: bool) -> set[int]:
    """Dead stores of one block; with ``calls_read`` (a module's globals) a call may read the name,
    so a store followed by any call before the next store is kept."""
    dead: set[int] = set()
    for index, stmt in enumerate(block):
        name = _stored_name(stmt)
        if name is None:
            continue
        for later in block[index + 1:]:
            if calls_read and any(isinstance(n, ast.Call) for n in ast.walk(later)):
                break
            value = getattr(later, "value", None)
            if _stored_name(later) == name and (value is None or name not in _names(value, ast.Load)):
                dead |= set(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
                break
            if name in _names(later, ast.Load) or name in _names(later, ast.Del) or not _plain(later):
                break
    return dead


def _plain(stmt: ast.stmt) -> bool:
    """A statement without a nested scope or control flow (whose reads :func:`_names` sees)."""
    return isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Pass))


__all__ = ["change_form", "dead_lines", "first_store", "idempotent", "shows_error"]
