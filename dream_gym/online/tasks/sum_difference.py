"""Sums versus differences: maximise log(|A+A|/|A|) / log(|A-A|/|A|) over small integer sets."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from dream_gym.online.tasks.base import HARD, REPAIRABLE, Check, HarnessTask, Limits

MAX_SIZE = 512
MAX_VALUE = 10**7
BEST_KNOWN = 1.145427

INITIAL_PROGRAM = '''"""A set A of non-negative integers for the sums-versus-differences problem.

construct_set() returns a list of distinct non-negative integers (2 to 512 of them, each below
10**7). The evaluator computes |A+A| and |A-A| itself. An interval has |A+A| = |A-A|: ratio 1.
"""

A = list(range(0, 40))


def construct_set():
    return sorted(A)
'''


def sum_difference_ratio(values: np.ndarray) -> tuple[float, int, int]:
    """(ratio, |A+A|, |A-A|) of a set of distinct non-negative integers (at least two)."""
    a = np.asarray(values, dtype=np.int64)
    sums = np.unique(np.add.outer(a, a))
    diffs = np.unique(np.subtract.outer(a, a))
    size = len(a)
    return math.log(len(sums) / size) / math.log(len(diffs) / size), len(sums), len(diffs)


class SumDifference(HarnessTask):
    """``construct_set() -> list[int]``; score = log(|A+A|/|A|) / log(|A-A|/|A|) (maximise)."""

    name = "sum-difference"
    entry = "construct_set"
    direction = "maximize"
    best_known = BEST_KNOWN
    limits = Limits(wall_s=10.0, memory_mb=1024)
    noisy = False
    # Keep exact integers: a float such as 3.0 or 2.5 is reported as such and rejected upstream.
    convert = (
        "    data = [x if isinstance(x, int) and not isinstance(x, bool) else\n"
        "            (int(x) if type(x).__name__.startswith(('int', 'uint')) else repr(x))\n"
        "            for x in list(answer)]"
    )
    description = (
        "Find a set A of non-negative integers maximising log(|A+A|/|A|) / log(|A-A|/|A|), where A+A and "
        "A-A are the sets of pairwise sums and differences (more sums than differences gives a ratio above "
        f"1; the best reported value is {BEST_KNOWN}). Write a Python program defining construct_set() that "
        f"returns a list of 2 to {MAX_SIZE} distinct non-negative integers, each below {MAX_VALUE}. The "
        "evaluator computes both set sizes and the ratio itself."
    )

    def initial_program(self) -> str:
        return INITIAL_PROGRAM

    def check(self, answer: Any) -> Check:
        if not isinstance(answer, list):
            return Check.fail(f"construct_set() must return a list of ints, got {type(answer).__name__}",
                              REPAIRABLE)
        not_int = [x for x in answer if not isinstance(x, int) or isinstance(x, bool)]
        if not_int:
            return Check.fail(f"not an integer: {not_int[0]!r} (all elements must be ints)", REPAIRABLE)
        problem = set_problem(answer)
        summary = {"size": len(answer), "values": answer[:MAX_SIZE]}
        if problem:
            check = Check.fail(problem, HARD, f"Infeasible set: {problem}.")
            check.parsed = summary
            return check
        ratio, n_sums, n_diffs = sum_difference_ratio(np.array(answer))
        metrics = {"size": len(answer), "sums": n_sums, "differences": n_diffs, "max_element": max(answer),
                   "ratio": ratio}
        diagnostics = (f"|A|={len(answer)}, |A+A|={n_sums}, |A-A|={n_diffs}, max element {max(answer)}; "
                       f"ratio {ratio:.6f} (best reported {BEST_KNOWN})")
        return Check(ratio, diagnostics, metrics=metrics, parsed=summary)


def set_problem(values: list[int]) -> str | None:
    """What makes a list of ints an inadmissible set (None when it is admissible)."""
    if len(values) < 2:
        return f"the set has {len(values)} element(s); at least 2 are needed"
    if len(values) > MAX_SIZE:
        return f"the set has {len(values)} elements; at most {MAX_SIZE} are allowed"
    negative = [x for x in values if x < 0]
    if negative:
        return f"negative element {negative[0]} (elements must be non-negative)"
    too_big = [x for x in values if x >= MAX_VALUE]
    if too_big:
        return f"element {too_big[0]} is not below {MAX_VALUE}"
    if len(set(values)) != len(values):
        duplicate = next(x for x, count in Counter(values).items() if count > 1)
        return f"duplicated element {duplicate} (the elements must be distinct)"
    return None
