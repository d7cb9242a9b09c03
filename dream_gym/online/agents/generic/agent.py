"""The generic agent: a seeded number of edits drawn by kind, each checked (it compiles, undoes
nothing, does not repeat a change a shown program failed with)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dream_gym.online.agent_base import ParentContext, Proposal, zero_cost

from .crossover import crossover_edit
from .history import (
    change_form,
)
from .numeric import array_edit, array_sites, bound_edit, number_edit
from .source import Donor, Edit, Pool, Source, compiles, evolve_regions, region_text
from .syntax import compare_edit, statement_edit, string_edit, swap_edit

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


EDITS: dict[str, Callable[[Source, np.random.Generator, Pool], Edit | None]] = {
    "number": number_edit, "bound": bound_edit, "compare": compare_edit, "swap": swap_edit,
    "statement": statement_edit, "string": string_edit, "crossover": crossover_edit, "array": array_edit,
}


#: The sites of each edit of :data:`ALONE` (a parent without one never draws that edit).
ALONE_SITES: dict[str, Callable[[Source], list[Any]]] = {"array": array_sites}


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
