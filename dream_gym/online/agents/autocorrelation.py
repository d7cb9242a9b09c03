"""Built-in agent for the third autocorrelation inequality: local edits of the parent's step heights.

The parent's program holds ``HEIGHTS``. Most edits are local: a small bump or dent of a few
neighbouring heights, a step against the current peak of |f*f| (the agent finds which products
of heights make that peak and lowers them a little: a subgradient step on C3), a local smoothing,
or rescaling the heights near one end; less often a finer grid (every step split in two, the same
function with more freedom) or a short run of peak-lowering steps; rarely a new shape from
scratch. Slips: a division by an empty sum, centring the heights (integral zero), returning a
column instead of a list, syntax and naming errors.
"""

from __future__ import annotations

import numpy as np

from dream_gym.online.agents.common import EditAgent, judged_pick, read_literal, variants
from dream_gym.online.tasks.autocorrelation import MAX_STEPS, MIN_STEPS, c3_of
from dream_gym.online.tasks.base import Task
from dream_gym.online.tasks.circle_packing import format_array

FINEST = 400  # the agent refines its grid up to AlphaEvolve's 400 steps

PROGRAM = '''"""Third autocorrelation inequality: {notes}.

A step function with {n} equal steps on [-1/4, 1/4]; by the agent's own count C3 = {c3:.6f}.
"""

HEIGHTS = {heights}


def construct_function():
    return list(HEIGHTS)
'''


def c3_estimate(heights: np.ndarray) -> float:
    """The agent's own C3 (inf for heights the evaluator would refuse)."""
    if len(heights) < MIN_STEPS or not np.isfinite(heights).all() or not np.abs(heights).max() > 0:
        return float("inf")
    h = heights / np.abs(heights).max()
    if abs(h.sum()) <= 1e-6 * np.abs(h).sum():
        return float("inf")
    return c3_of(h)[0]


def peak_step(heights: np.ndarray, rate: float) -> np.ndarray:
    """One subgradient step on log C3: lower the products that make the peak, keep the integral."""
    h = heights / np.abs(heights).max()
    conv = np.convolve(h, h)
    k = int(np.argmax(np.abs(conv)))
    n = len(h)
    partner = np.array([h[k - i] if 0 <= k - i < n else 0.0 for i in range(n)])
    grad = 2.0 * np.sign(conv[k]) * partner / abs(conv[k]) - 2.0 / h.sum()
    return h - rate * grad / (np.abs(grad).max() + 1e-12)


class AutocorrelationAgent(EditAgent[np.ndarray]):
    """Local edits of the parent's step heights (see the module docstring)."""

    name = "builtin-autocorrelation"
    operators = {"bump": 0.36, "peak": 0.2, "smooth": 0.1, "ends": 0.1, "refine": 0.08, "descend": 0.1,
                 "rewrite": 0.06}
    slips = {"divide": 1.0, "centre": 1.0, "column": 1.0, "syntax": 1.0, "naming": 1.0}
    slip_rate = 0.1
    literal_names = ("HEIGHTS",)

    def read_state(self, task: Task, code: str, rng: np.random.Generator) -> np.ndarray:
        value = read_literal(code, "HEIGHTS")
        try:
            heights = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            heights = np.empty(0)
        if heights.ndim != 1 or not MIN_STEPS <= len(heights) <= MAX_STEPS or not np.isfinite(heights).all():
            return np.ones(40)  # the parent computes its heights: start over from a constant function
        return heights

    def program(self, task: Task, state: np.ndarray, notes: str) -> str:
        return PROGRAM.format(notes=notes, n=len(state), c3=c3_estimate(state), heights=format_array(state))

    def repair(self, task: Task, state: np.ndarray, error: str, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        heights = np.where(np.isfinite(state), state, 1.0)
        if not c3_estimate(heights) < float("inf"):
            heights = heights + 1.0
        return heights, "repair: replace non-finite heights, keep the integral away from zero, return a flat list"

    # -- operators -----------------------------------------------------------------------------
    def _op_bump(self, task: Task, state: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        width = float(rng.choice([0.7, 1.5, 3.0]))
        size = float(rng.uniform(0.02, 0.15))

        def variant() -> np.ndarray:
            centre = rng.uniform(0, len(state))
            shape = np.exp(-0.5 * ((np.arange(len(state)) + 0.5 - centre) / width) ** 2)
            return state + rng.choice([-1.0, 1.0]) * size * np.abs(state).mean() * shape

        return self._pick(rng, [variant() for _ in range(variants(rng))]), \
            f"a bump or dent of {size:.0%} over ~{2 * width:.0f} steps"

    def _op_peak(self, task: Task, state: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        rate = float(rng.choice([0.01, 0.03, 0.06]))
        return peak_step(state, rate), f"lower the heights that make the peak of |f*f| (step {rate})"

    def _op_descend(self, task: Task, state: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        steps = int(rng.integers(10, 40))
        rate = float(rng.choice([0.005, 0.01, 0.02]))
        heights = state
        for _ in range(steps):
            heights = peak_step(heights, rate)
        return heights, f"{steps} peak-lowering steps (step {rate})"

    def _op_smooth(self, task: Task, state: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        window = int(rng.integers(3, 9))
        start = int(rng.integers(0, max(1, len(state) - window)))
        out = state.copy()
        out[start:start + window] = 0.5 * out[start:start + window] + 0.5 * out[start:start + window].mean()
        return out, f"smooth {window} heights from step {start}"

    def _op_ends(self, task: Task, state: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        m = int(rng.integers(1, max(2, len(state) // 8)))
        factor = float(rng.uniform(0.85, 1.2))

        def variant() -> np.ndarray:
            out = state.copy()
            side = slice(0, m) if rng.random() < 0.5 else slice(len(out) - m, len(out))
            out[side] *= factor
            return out

        return self._pick(rng, [variant() for _ in range(variants(rng))]), \
            f"scale {m} heights at one end by {factor:.2f}"

    def _op_refine(self, task: Task, state: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        if 2 * len(state) > FINEST:
            return self._op_bump(task, state, rng)
        return np.repeat(state, 2), f"finer grid: {len(state)} -> {2 * len(state)} steps (same function)"

    def _op_rewrite(self, task: Task, state: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        n = len(state)
        x = (np.arange(n) + 0.5) / n - 0.5
        a, k = float(rng.uniform(0.1, 0.6)), int(rng.integers(1, 5))
        heights = 1.0 + a * np.cos(2 * np.pi * k * x) + float(rng.uniform(0.0, 0.5)) * (np.abs(x) > 0.4)
        return heights, f"new shape: 1 + {a:.2f} cos(2 pi {k} x) with raised ends"

    def _pick(self, rng: np.random.Generator, options: list[np.ndarray]) -> np.ndarray:
        return judged_pick(rng, options, lambda h: -c3_estimate(h), insight=0.8)

    # -- slips ---------------------------------------------------------------------------------
    def _slip_divide(self, task: Task, state: np.ndarray, notes: str, rng: np.random.Generator) -> tuple[str, str]:
        code = self.program(task, state, notes).replace(
            "    return list(HEIGHTS)", "    total = sum(HEIGHTS[len(HEIGHTS):])\n    return [h / total for h in HEIGHTS]")
        return code, "slip: normalised by the sum of an empty slice"

    def _slip_centre(self, task: Task, state: np.ndarray, notes: str, rng: np.random.Generator) -> tuple[str, str]:
        return self.program(task, state - state.mean(), notes), "slip: heights centred (their integral is zero)"

    def _slip_column(self, task: Task, state: np.ndarray, notes: str, rng: np.random.Generator) -> tuple[str, str]:
        code = self.program(task, state, notes).replace("    return list(HEIGHTS)",
                                                        "    return [[h] for h in HEIGHTS]")
        return code, "slip: returns a column of one-element lists"
