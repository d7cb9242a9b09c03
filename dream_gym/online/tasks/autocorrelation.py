"""Third autocorrelation inequality: minimise C3 of a step function on [-1/4, 1/4] (lower is better).

**Definition implemented.** For a real function f on [-1/4, 1/4] (of any sign) with nonzero integral,

    C3(f) = max_{-1/2 <= t <= 1/2} |(f * f)(t)| / (integral_{-1/4}^{1/4} f(x) dx)^2,
    (f * f)(t) = integral f(t - x) f(x) dx.

C3 is the best constant in max_t |f*f(t)| >= C3 (integral f)^2, so every f gives the upper bound
C3 <= C3(f); a smaller value is a better bound. The candidate defines ``construct_function()``
returning the heights h_0 .. h_{n-1} of a step function with n equal steps: f = h_i on
[-1/4 + i/(2n), -1/4 + (i+1)/(2n)).

**Source.** AlphaEvolve (Novikov et al., 2025), mathematical results, problem B.3 "third
autocorrelation inequality": a step function with 400 equal intervals improved the upper bound
from 1.4581 to 1.4557. The evaluation code of the AlphaEvolve results notebook
(google-deepmind/alphaevolve_results, ``mathematical_results.ipynb``), as ported to OpenEvolve
(``examples/alphaevolve_math_problems/third_autocorr_ineq/evaluator.py``, benchmark
1.4556427953745406), computes max|np.convolve(h, h)| * dx / (sum(h) * dx)^2 with dx = 1/(2n). The
Dream-RSI paper (seeds 001/003) reports 1.456375 (Dream-RSI) and 1.456001 (Recursive Fixed
Exploration) beside SimpleTES's 1.453675 on this problem, lower is better: SimpleTES reports the
same 1.453675 for "third autocorrelation inequality", which pins the identification.
Some reimplementations take |max f*f| instead of max |f*f| (a "variant" that ignores negative
peaks); we implement the inequality as stated, max |f*f| (docs/concepts/paper-gaps.md).

**Exact score.** f * f of a step function is piecewise linear, with knots at t = -1/2 + k/(2n) and
value dx * sum_{i+j=k-1} h_i h_j at knot k (0 at both ends), so its largest absolute value is at a
knot: max |f*f| = dx * max_k |conv(h, h)_k| and integral f = dx * sum(h), hence
C3 = 2n * max_k |conv(h, h)_k| / (sum h)^2. The parent process computes it from the returned heights
(after scaling them by 1 / max|h|, which leaves C3 unchanged and keeps huge heights from
overflowing); the candidate never reports its own score.

**Validity.** A 1-D sequence of MIN_STEPS to MAX_STEPS real numbers (ints or floats, no bools or
strings), all finite, not all zero, with an integral that is not (nearly) zero:
|sum h| > ZERO_INTEGRAL * sum |h| (below that the ratio only measures rounding).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dream_gym.online.tasks.base import HARD, REPAIRABLE, Check, HarnessTask, Limits

MIN_STEPS, MAX_STEPS = 2, 1000
ZERO_INTEGRAL = 1e-6
BEST_KNOWN = 1.4556427953745406  # AlphaEvolve's step function (400 intervals), as OpenEvolve's port scores it

INITIAL_PROGRAM = '''"""Third autocorrelation inequality: a step function on [-1/4, 1/4] with n equal steps.

construct_function() returns the n step heights (any sign). The evaluator computes
C3 = max_t |(f*f)(t)| / (integral of f)^2 itself; lower is better. A constant function has C3 = 2.
"""

HEIGHTS = [1.0] * 40


def construct_function():
    return list(HEIGHTS)
'''


def c3_of(heights: np.ndarray) -> tuple[float, int]:
    """(C3, knot index of the largest |f*f|) of a step function with these heights (exact)."""
    h = np.asarray(heights, dtype=float)
    h = h / np.abs(h).max()
    conv = np.abs(np.convolve(h, h))
    peak = int(np.argmax(conv))
    return float(2 * len(h) * conv[peak] / h.sum() ** 2), peak


class Autocorrelation(HarnessTask):
    """``construct_function() -> heights``; score = C3 (minimise). Definition in the module docstring."""

    name = "autocorrelation"
    entry = "construct_function"
    direction = "minimize"
    best_known = BEST_KNOWN
    limits = Limits(wall_s=10.0, memory_mb=1024)
    noisy = False
    # Plain numbers only (a string "1.5" is not a height); a 2-D array is reported, not flattened.
    convert = (
        "    if isinstance(answer, (str, bytes, dict)) or not hasattr(answer, '__len__'):\n"
        "        raise TypeError('construct_function() must return a sequence of heights, got '\n"
        "                        + type(answer).__name__)\n"
        "    if len(getattr(answer, 'shape', (0,))) != 1:\n"
        "        raise ValueError('heights must be 1-D, got an array of shape %r' % (answer.shape,))\n"
        f"    if len(answer) > {MAX_STEPS}:\n"
        f"        raise ValueError('%d heights; at most {MAX_STEPS} are allowed' % len(answer))\n"
        "    data = [x if type(x) in (int, float) else\n"
        "            (float(x) if getattr(getattr(x, 'dtype', None), 'kind', '') in 'fiu' and\n"
        "             getattr(x, 'ndim', 1) == 0 else repr(x)) for x in answer]"
    )
    description = (
        "Third autocorrelation inequality (AlphaEvolve B.3): find a step function f on [-1/4, 1/4] with n "
        "equal steps (heights of any sign) minimising C3(f) = max_{|t|<=1/2} |(f*f)(t)| / (integral of f)^2, "
        f"where f*f is the autoconvolution. AlphaEvolve's best is {BEST_KNOWN:.6f} (400 steps); a constant "
        f"function gives 2. Define construct_function() returning a list of {MIN_STEPS} to {MAX_STEPS} finite "
        "heights whose sum is not zero. The evaluator computes C3 itself, exactly (f*f is piecewise linear, "
        "so its extreme is at the grid points)."
    )

    def initial_program(self) -> str:
        return INITIAL_PROGRAM

    def check(self, answer: Any) -> Check:
        if not isinstance(answer, list):
            return Check.fail("malformed answer (expected a list of heights)", REPAIRABLE)
        bad = [x for x in answer if isinstance(x, bool) or not isinstance(x, (int, float))]
        if bad:
            return Check.fail(f"not a real number: {str(bad[0])[:60]} (heights must be ints or floats)", REPAIRABLE)
        if not MIN_STEPS <= len(answer) <= MAX_STEPS:
            return Check.fail(f"{len(answer)} heights; between {MIN_STEPS} and {MAX_STEPS} are needed", REPAIRABLE)
        heights = np.array(answer, dtype=float)
        summary = {"steps": len(answer), "heights": [float(x) for x in heights]}
        if not np.isfinite(heights).all():
            return Check.fail("non-finite height (nan or inf)", REPAIRABLE)
        scale = float(np.abs(heights).max())
        if scale == 0.0:
            return self._hard("every height is zero (the integral of f is zero)", summary)
        h = heights / scale
        if abs(h.sum()) <= ZERO_INTEGRAL * np.abs(h).sum():
            return self._hard(f"the integral of f is (nearly) zero: |sum h| <= {ZERO_INTEGRAL:g} * sum |h|; "
                              "C3 would only measure rounding", summary)
        c3, peak = c3_of(h)
        n = len(h)
        negative = float((h < 0).mean())
        metrics = {"c3": c3, "steps": n, "peak_t": -0.5 + (peak + 1) / (2 * n), "negative_share": negative,
                   "fraction_of_best_known": BEST_KNOWN / c3}
        diagnostics = (f"{n} steps ({100 * negative:.0f}% negative); max |f*f| at t = {metrics['peak_t']:+.4f}; "
                       f"C3 = {c3:.6f} (AlphaEvolve {BEST_KNOWN:.6f}; lower is better)")
        return Check(c3, diagnostics, metrics=metrics, parsed=summary)

    @staticmethod
    def _hard(problem: str, summary: dict[str, Any]) -> Check:
        check = Check.fail(problem, HARD, f"Inadmissible function: {problem}.")
        check.parsed = summary
        return check
