"""Built-in agent for sums versus differences: edits of the parent's set A, read as fringes + a run.

A set with more sums than differences is rare (no interval is one); the sets this agent builds
have the shape of the classic constructions: a long run of consecutive integers with a sparse
*fringe* at each end, where the fringes decide whether sums beat differences. Read that way, the
parent's set suggests small edits: toggle an element of a fringe, make the run one or two shorter
or longer (with a sum-dominant fringe pair, a shorter run raises the ratio step by step), or copy
one fringe's pattern, mirrored, onto the other end; less often a short local search over fringe
toggles, or installing a fringe pair the agent remembers from the literature (most are near
misses); rarely a product with the classic set {0,2,3,4,7,11,12,14} or a random set from
scratch. Slips: a shifted element that collides with another (duplicate), one that goes
negative, a float among the ints, syntax and naming errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dream_gym.online.agents.common import EditAgent, judged_pick, read_literal, variants
from dream_gym.online.tasks.base import Task
from dream_gym.online.tasks.sum_difference import MAX_SIZE, MAX_VALUE, sum_difference_ratio

CLASSIC = (0, 2, 3, 4, 7, 11, 12, 14)  # Conway's set: 26 sums, 25 differences
# Fringe pairs (low fringe, high fringe mirrored: n - x) an agent may remember; most are near misses.
FRINGES: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((0, 2, 3, 7), (0, 7)),
    ((0, 1, 3, 4), (0, 1, 2, 5)),
    ((0, 2, 3), (0, 1, 4)),
    ((0, 1, 3), (0, 2, 3)),
    ((0, 2, 3, 7), (0, 1, 7)),
    ((0, 1, 4), (0, 3, 4)),
    ((0, 2, 4, 5), (0, 1, 3)),
    ((0, 1, 3, 4), (0, 1, 3, 4)),
)
FRINGE_WIDTH = 8

PROGRAM = '''"""A set A for the sums-versus-differences problem: {notes}.

By the agent's own count: |A| = {size}, ratio {ratio:.6f}.
"""

A = {values}


def construct_set():
    return sorted(A)
'''


def ratio_of(values: list[int]) -> float:
    """The agent's own count of the ratio (-inf for sets the evaluator would refuse)."""
    distinct = sorted(set(values))
    if len(distinct) < 2 or distinct[0] < 0 or len(distinct) > MAX_SIZE or distinct[-1] >= MAX_VALUE:
        return -np.inf
    return sum_difference_ratio(np.array(distinct))[0]


def longest_run(values: list[int]) -> tuple[int, int]:
    """(first, last) of the longest run of consecutive integers in a sorted list."""
    best, start = (values[0], values[0]), values[0]
    for previous, current in zip(values, values[1:], strict=False):
        if current != previous + 1:
            start = current
        if current - start > best[1] - best[0]:
            best = (start, current)
    return best


class SumDifferenceAgent(EditAgent[list[int]]):
    """Fringe and run edits on the parent's set (see the module docstring)."""

    name = "builtin-sum-difference"
    operators = {"toggle": 0.3, "resize": 0.3, "mirror": 0.05, "search": 0.13, "fringe": 0.1,
                 "product": 0.01, "rewrite": 0.03}
    slips = {"collide": 2.0, "negative": 1.0, "float": 1.0, "syntax": 1.0, "naming": 1.0}
    slip_rate = 0.12
    literal_names = ("A",)

    def read_state(self, task: Task, code: str, rng: np.random.Generator) -> list[int]:
        value = read_literal(code, "A")
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            return sorted({v for v in value if 0 <= v < MAX_VALUE})[:MAX_SIZE] or [0, 1]
        return list(range(40))  # the parent built A in code: start over from an interval

    def program(self, task: Task, state: list[int], notes: str) -> str:
        return PROGRAM.format(notes=notes, size=len(state), ratio=ratio_of(state), values=list(state))

    def repair(self, task: Task, state: list[int], error: str, rng: np.random.Generator) -> tuple[list[int], str]:
        return sorted(set(state)), "repair: dedupe, keep non-negative ints below the limit"

    # -- operators -----------------------------------------------------------------------------
    def _op_toggle(self, task: Task, state: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        k = int(rng.choice([1, 2], p=[0.7, 0.3]))
        options = [self._toggled(state, k, rng) for _ in range(variants(rng))]
        return self._pick(rng, options), f"toggle {k} element(s) near the ends"

    def _toggled(self, values: list[int], k: int, rng: np.random.Generator) -> list[int]:
        out = set(values)
        low, high = values[0], values[-1]
        for _ in range(k):
            x = low + int(rng.integers(0, FRINGE_WIDTH)) if rng.random() < 0.5 else high - int(rng.integers(0, FRINGE_WIDTH))
            out ^= {x}
        return sorted(out) if len(out) >= 2 else list(values)

    def _op_resize(self, task: Task, state: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        steps = [int(rng.choice([-8, -4, -2, -1, 1, 2], p=[0.1, 0.2, 0.25, 0.2, 0.15, 0.1]))
                 for _ in range(variants(rng))]
        options = [self._resized(state, d) for d in steps]
        chosen = self._pick(rng, options)
        d = steps[options.index(chosen)]
        return chosen, f"{'lengthen' if d > 0 else 'shorten'} the run of consecutive integers by {abs(d)}"

    @staticmethod
    def _resized(values: list[int], d: int) -> list[int]:
        first, last = longest_run(values)
        if d < 0 and last - first + 1 <= -d + 1:
            return list(values)
        below = [v for v in values if v <= last + min(d, 0)]
        above = [v + d for v in values if v > last]
        grown = list(range(last + 1, last + d + 1)) if d > 0 else []
        return sorted(set(below + grown + above))

    def _op_mirror(self, task: Task, state: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        first, last = longest_run(state)
        low = [v - state[0] for v in state if v < first]
        high = [state[-1] - v for v in state if v > last]
        if rng.random() < 0.5:
            high = low
            note = "copy the low fringe's pattern, mirrored, onto the high end"
        else:
            low = high
            note = "copy the high fringe's pattern, mirrored, onto the low end"
        return self._assemble(low, high, first - state[0], last - first, state[0]), note

    def _assemble(self, low: list[int], high: list[int], width: int, run: int, offset: int) -> list[int]:
        width = max(width, max(low + high, default=0) + 1)
        top = offset + width + run + width
        values = {offset + x for x in low} | set(range(offset + width, offset + width + run + 1)) | {top - x for x in high}
        return sorted(values)

    def _op_search(self, task: Task, state: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        tries = int(rng.integers(3, 11))
        best, best_ratio = list(state), ratio_of(state)
        for _ in range(tries):
            trial = self._toggled(best, 1, rng)
            trial_ratio = ratio_of(trial)
            if trial_ratio > best_ratio:
                best, best_ratio = trial, trial_ratio
        return best, f"local search over {tries} fringe toggles"

    def _op_fringe(self, task: Task, state: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        low, high = FRINGES[int(rng.integers(len(FRINGES)))]
        if rng.random() < 0.5:
            low, high = high, low
        first, last = longest_run(state)
        run = max(last - first, int(rng.integers(40, 100)))  # the classic constructions keep a long run
        values = self._assemble(list(low), list(high), FRINGE_WIDTH, run, 0)
        return values, f"fringes {list(low)} / {list(high)} (mirrored) around a run of {run + 1}"

    def _op_product(self, task: Task, state: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        base = list(state)
        if len(base) * len(CLASSIC) > MAX_SIZE:
            base = base[: MAX_SIZE // len(CLASSIC)]
        inner, outer = (base, list(CLASSIC)) if rng.random() < 0.5 else (list(CLASSIC), base)
        stride = 2 * max(inner) + 1
        return sorted({a + stride * b for a in inner for b in outer}), \
            f"product set: {len(inner)} x {len(outer)} elements with stride {stride}"

    def _op_rewrite(self, task: Task, state: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        span = int(rng.integers(20, 80))
        values = sorted({0, span} | {int(x) for x in np.flatnonzero(rng.random(span) < 0.5)})
        return values, f"a new random set in [0, {span}]"

    def _pick(self, rng: np.random.Generator, options: list[list[int]]) -> list[int]:
        return judged_pick(rng, options, ratio_of, insight=0.8)

    # -- slips ---------------------------------------------------------------------------------
    def _slip_collide(self, task: Task, state: list[int], notes: str, rng: np.random.Generator) -> tuple[str, str]:
        values = list(state)
        i = int(rng.integers(1, len(values))) if len(values) > 1 else 0
        values[i] = values[i - 1]
        return self.program(task, values, notes), "slip: a shifted element collides with its neighbour"

    def _slip_negative(self, task: Task, state: list[int], notes: str, rng: np.random.Generator) -> tuple[str, str]:
        return self.program(task, [-1, *state[1:]], notes), "slip: the smallest element shifted below zero"

    def _slip_float(self, task: Task, state: list[int], notes: str, rng: np.random.Generator) -> tuple[str, str]:
        values: list[Any] = list(state)
        values[int(rng.integers(len(values)))] += 0.5
        return PROGRAM.format(notes=notes, size=len(values), ratio=ratio_of(list(state)), values=values), \
            "slip: a half-integer among the elements"
