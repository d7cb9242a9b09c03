"""What every built-in agent shares: reading the parent as text, the proposal template, slips.

A built-in agent imitates how an LLM makes progress on a discovery task: it reads the
parent's program *as text* (never running it), and most of the time makes a *small local edit*
of the solution the program holds (moves a few circles, changes a few elements or heights, turns
one solver knob); now and then a bigger change (a short joint optimisation, a rewrite from
scratch); and in a realistic share of proposals it slips (a syntax or naming error, an answer of
the wrong shape, an infeasible answer, rarely a program that runs out of time). Its judgement is
imperfect: it weighs a few variants of its edit with its own rough estimate and usually, not
always, keeps the most promising one. So a branch improves over many steps, some steps regress,
and the first proposal from the initial program lands far from the best known answer.

The evaluator, run isolated after ``propose`` returns, is the only judge of a proposal: what an
agent estimates is never recorded as a score.
"""

from __future__ import annotations

import ast
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from dream_gym.online.agent_base import ParentContext, Proposal, zero_cost
from dream_gym.online.tasks.base import Task

State = TypeVar("State")
REPAIR_RATE = 0.75  # after a failed parent, the share of proposals that fix what the error names
MOMENTUM = 0.5  # after an edit that helped, the share of proposals that make the same kind of edit
REVERT_RATE = 0.4  # below the branch's best, the share of proposals that start again from that version
EDIT_TAG = "Last edit: "  # the line of a program's docstring naming the edit that made it


def read_literal(code: str, name: str) -> Any:
    """The value of a top-level ``NAME = <literal>`` in a program text, or None.

    A program that does not parse (a slip elsewhere in the file) still has its literal read from
    the bracketed text after ``NAME =``, as a reader skimming the file would.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return _literal_from_text(code, name)
    except (ValueError, MemoryError, RecursionError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return _safe_eval(node.value)
    return None


def _safe_eval(node: ast.expr | str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _literal_from_text(code: str, name: str) -> Any:
    match = re.search(rf"^{re.escape(name)}\s*=\s*", code, flags=re.MULTILINE)
    if match is None:
        return None
    text = code[match.end():]
    if not text or text[0] not in "[({":
        return _safe_eval(text.split("\n", 1)[0])
    depth = 0
    for index, char in enumerate(text):
        depth += char in "[({"
        depth -= char in "])}"
        if depth == 0:
            return _safe_eval(text[: index + 1])
    return None


def weighted_choice(rng: np.random.Generator, table: Mapping[str, float]) -> str:
    """One key of ``table`` drawn with probability proportional to its weight."""
    keys = list(table)
    weights = np.array([table[k] for k in keys], dtype=float)
    return keys[int(rng.choice(len(keys), p=weights / weights.sum()))]


def judged_pick(rng: np.random.Generator, candidates: Sequence[State], estimate: Callable[[State], float],
                insight: float) -> State:
    """The agent's imperfect judgement: the best candidate by its own estimate with probability
    ``insight`` (higher estimate = more promising), else any one of them."""
    if len(candidates) == 1 or rng.random() >= insight:
        return candidates[int(rng.integers(len(candidates)))]
    return max(candidates, key=estimate)


def variants(rng: np.random.Generator) -> int:
    """How many variants of an edit the agent weighs before writing one (1 to 3)."""
    return int(rng.choice([1, 2, 3], p=[0.4, 0.35, 0.25]))


# -- slips: realistic mistakes in the written program ------------------------------------------
def syntax_slip(code: str, rng: np.random.Generator) -> tuple[str, str]:
    """Drop the last closing bracket of the entry function's return line (a SyntaxError)."""
    lines = code.split("\n")
    index = _last_return(lines)
    cut = lines[index].rfind(")")
    if cut < 0:
        cut = lines[index].rfind("]")
    if cut < 0:
        lines[index] = lines[index] + " ("
    else:
        lines[index] = lines[index][:cut] + lines[index][cut + 1:]
    return "\n".join(lines), "slip: unbalanced bracket in the return line"


def naming_slip(code: str, rng: np.random.Generator, names: Sequence[str]) -> tuple[str, str]:
    """Misspell one module-level name where the entry function uses it (a NameError)."""
    lines = code.split("\n")
    index = _last_return(lines)
    for name in names:
        if re.search(rf"\b{re.escape(name)}\b", lines[index]):
            wrong = name[:-1] if len(name) > 2 else name + "_"
            lines[index] = re.sub(rf"\b{re.escape(name)}\b", wrong, lines[index], count=1)
            return "\n".join(lines), f"slip: {wrong} used for {name}"
    lines[index] = lines[index].replace("return ", "return undefined_helper(", 1) + ")"
    return "\n".join(lines), "slip: calls a helper that is not defined"


def _last_return(lines: list[str]) -> int:
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].lstrip().startswith("return "):
            return index
    raise ValueError("the program has no return line")


class EditAgent(ABC, Generic[State]):
    """Template of a built-in agent (see the module docstring).

    Subclasses give ``name``, ``operators`` (operator name -> weight; ``_op_<name>`` implements
    each), ``slips`` (slip name -> weight, ``_slip_<name>``; ``syntax`` and ``naming`` are shared)
    and ``slip_rate``, and implement :meth:`read_state`, :meth:`repair` and :meth:`program`.
    """

    name: str
    operators: Mapping[str, float]
    slips: Mapping[str, float] = {"syntax": 1.0, "naming": 1.0}
    slip_rate: float = 0.1
    literal_names: Sequence[str] = ()

    def propose(self, task: Task, parent: ParentContext, rng: np.random.Generator) -> Proposal:
        started = time.perf_counter()
        state = self.read_state(task, parent.code, rng)
        if parent.error and rng.random() < REPAIR_RATE:
            op = "repair"
            state, notes = self.repair(task, state, parent.error, rng)
        else:
            back = self._earlier_best(task, parent, rng)
            if back is not None:
                state = self.read_state(task, str(back["code"]), rng)
            op = self._continued_edit(task, parent, rng) or weighted_choice(rng, self.operators)
            state, notes = getattr(self, f"_op_{op}")(task, state, rng)
            if back is not None:
                notes = f"back to the branch's version scoring {back['score']:.6g}, then: {notes}"
        code = self.program(task, state, notes).replace('"""\n', f'\n{EDIT_TAG}{op}\n"""\n', 1)
        if rng.random() < self.slip_rate:
            code, notes = self._slip(task, state, code, notes, rng)
        return Proposal(code=code, notes=notes, cost=zero_cost(time.perf_counter() - started))

    def _earlier_best(self, task: Task, parent: ParentContext, rng: np.random.Generator) -> dict[str, Any] | None:
        """The best earlier version of the branch when the parent is worse (and the agent goes back)."""
        sign = -1.0 if task.direction == "minimize" else 1.0
        earlier = [h for h in parent.history[:-1] if h.get("score") is not None and h.get("code")]
        if not earlier or rng.random() >= REVERT_RATE:
            return None
        best = max(earlier, key=lambda h: sign * float(h["score"]))
        if parent.score is not None and sign * float(parent.score) >= sign * float(best["score"]):
            return None
        return best

    def _continued_edit(self, task: Task, parent: ParentContext, rng: np.random.Generator) -> str | None:
        """The parent's own kind of edit when it improved on its parent (and momentum holds)."""
        match = re.search(rf"^{EDIT_TAG}(\w+)$", parent.code, flags=re.MULTILINE)
        scores = [h.get("score") for h in parent.history[-2:]]
        if match is None or match.group(1) not in self.operators or len(scores) < 2 or None in scores:
            return None
        sign = -1.0 if task.direction == "minimize" else 1.0
        improved = sign * float(scores[1]) > sign * float(scores[0])  # type: ignore[arg-type]
        return match.group(1) if improved and rng.random() < MOMENTUM else None

    def _slip(self, task: Task, state: State, code: str, notes: str, rng: np.random.Generator) -> tuple[str, str]:
        kind = weighted_choice(rng, self.slips)
        if kind == "syntax":
            code, what = syntax_slip(code, rng)
        elif kind == "naming":
            code, what = naming_slip(code, rng, self.literal_names)
        else:
            code, what = getattr(self, f"_slip_{kind}")(task, state, notes, rng)
        return code, f"{notes}; {what}"

    @abstractmethod
    def read_state(self, task: Task, code: str, rng: np.random.Generator) -> State:
        """The solution the parent's program holds (a fresh start when it holds none)."""

    @abstractmethod
    def repair(self, task: Task, state: State, error: str, rng: np.random.Generator) -> tuple[State, str]:
        """Fix what the parent's error names; returns the repaired state and a note."""

    @abstractmethod
    def program(self, task: Task, state: State, notes: str) -> str:
        """The program text that returns ``state``."""
