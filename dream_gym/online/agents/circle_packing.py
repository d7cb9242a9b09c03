"""Built-in agent for circle packing: local moves of a few circles on the parent's layout.

The parent's program holds the layout (``CENTERS``, and ``RADII`` once an agent has written it; the
initial program computes its radii with the task's ``safe_radii``, a pairwise shrink, which the
agent calls for a layout whose program holds no radii). Most edits move one to three circles a
little and let them and their neighbours grow until they touch; some grow a few circles in place,
trade size between a big circle and its neighbours, or move the smallest circle to the emptiest
spot; rarely a short joint optimisation of all centers and radii, or a new layout from scratch (rows
of circles, radii by ``safe_radii``). Slips: overlapping radii written without a safety margin, a
circle left out, syntax and naming errors, and (rarely) a refinement loop that never ends.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dream_gym.online.agents.common import EditAgent, judged_pick, read_literal, variants
from dream_gym.online.tasks.base import Task
from dream_gym.online.tasks.circle_packing import format_array, ring_layout, safe_radii

MARGIN = 1e-12  # slack the agent keeps on every constraint (the evaluator allows 1e-9)
Layout = tuple[np.ndarray, np.ndarray]  # centers (n, 2), radii (n,)

PROGRAM = '''"""Circle packing of {n} circles: {notes}.

The layout is stored as literals (sum of radii by the agent's own count: {total:.6f}).
"""

CENTERS = {centers}

RADII = {radii}


def construct_packing():
    return [list(c) for c in CENTERS], list(RADII)
'''

ENDLESS = '''

def _refine(centers, radii):
    """Grow every circle until no circle can grow any more."""
    grown = True
    while grown:
        grown = False
        for i in range(len(radii)):
            grown = grown or radii[i] >= 0.0
    return radii


def construct_packing():
    return [list(c) for c in CENTERS], _refine(CENTERS, list(RADII))
'''


def room(centers: np.ndarray, radii: np.ndarray, i: int) -> float:
    """The largest radius circle ``i`` can take with every other circle fixed."""
    wall = min(centers[i, 0], centers[i, 1], 1.0 - centers[i, 0], 1.0 - centers[i, 1])
    gaps = np.hypot(*(centers - centers[i]).T) - radii
    gaps[i] = np.inf
    return max(0.0, min(wall, float(gaps.min())) - MARGIN)


def regrow(centers: np.ndarray, radii: np.ndarray, which: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Let the circles ``which`` (in random order) grow until they touch something."""
    radii = radii.copy()
    for i in rng.permutation(which):
        radii[i] = room(centers, radii, int(i))
    return radii


def neighbours(centers: np.ndarray, radii: np.ndarray, which: np.ndarray, reach: float = 0.06) -> np.ndarray:
    """Circles whose boundary lies within ``reach`` of one of the circles ``which``."""
    dist = np.hypot(*(centers[:, None, :] - centers[None, which, :]).transpose(2, 0, 1))
    near = (dist - radii[:, None] - radii[None, which]).min(axis=1) < reach
    return np.flatnonzero(near)


def shrink_to_feasible(centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Shrink radii until every constraint holds with the agent's margin."""
    wall = np.min(np.hstack([centers, 1.0 - centers]), axis=1) - MARGIN
    radii = np.clip(np.minimum(radii, wall), 0.0, None)
    dist = np.hypot(*(centers[:, None, :] - centers[None, :, :]).transpose(2, 0, 1))
    for _ in range(50):
        over = radii[:, None] + radii[None, :] - dist + MARGIN
        np.fill_diagonal(over, -np.inf)
        if over.max() <= 0:
            break
        radii = np.clip(radii - np.clip(over, 0.0, None).max(axis=1) / 2.0 - MARGIN, 0.0, None)
    return radii


def emptiest_spot(centers: np.ndarray, radii: np.ndarray, skip: int, rng: np.random.Generator) -> np.ndarray:
    """The roomiest of a few hundred random spots, ignoring circle ``skip``."""
    spots = rng.uniform(0.02, 0.98, (300, 2))
    others = np.delete(np.arange(len(centers)), skip)
    gap = np.linalg.norm(spots[:, None] - centers[others][None], axis=2) - radii[others][None]
    clearance = np.minimum(gap.min(axis=1), np.minimum(spots, 1 - spots).min(axis=1))
    return spots[int(np.argmax(clearance))]


def joint_polish(centers: np.ndarray, radii: np.ndarray, iters: int, mu: float,
                 free: np.ndarray | None = None) -> Layout:
    """A few L-BFGS steps on sum(r) minus an overlap penalty, moving centers and radii together
    (only the circles ``free``, when given; the others stay where they are)."""
    n = len(centers)
    i, j = np.triu_indices(n, 1)

    def objective(z: np.ndarray) -> tuple[float, np.ndarray]:
        c, r = z[: 2 * n].reshape(n, 2), z[2 * n:]
        diff = c[i] - c[j]
        d = np.sqrt((diff ** 2).sum(axis=1)) + 1e-12
        ov = np.clip(r[i] + r[j] - d, 0.0, None)
        lo = np.clip(r[:, None] - c, 0.0, None)
        hi = np.clip(r[:, None] + c - 1.0, 0.0, None)
        value = -r.sum() + mu * ((ov ** 2).sum() + (lo ** 2).sum() + (hi ** 2).sum())
        g_r = -np.ones(n) + 2 * mu * (np.bincount(i, ov, n) + np.bincount(j, ov, n) + lo.sum(axis=1) + hi.sum(axis=1))
        push = (2 * mu * ov / d)[:, None] * diff
        g_c = 2 * mu * (hi - lo)
        for axis in range(2):
            g_c[:, axis] += np.bincount(j, push[:, axis], n) - np.bincount(i, push[:, axis], n)
        return float(value), np.concatenate([g_c.ravel(), g_r])

    z = np.concatenate([centers.ravel(), radii])
    bounds = [(0.0, 1.0)] * (2 * n) + [(0.0, 0.5)] * n
    if free is not None:
        fixed = np.setdiff1d(np.arange(n), free)
        for k in fixed:
            bounds[2 * k], bounds[2 * k + 1] = (z[2 * k],) * 2, (z[2 * k + 1],) * 2
            bounds[2 * n + k] = (z[2 * n + k],) * 2
    from scipy.optimize import minimize  # loaded by the agent's constructor: no attempt's clock pays for it

    z = minimize(objective, z, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": iters}).x
    moved = np.clip(z[: 2 * n].reshape(n, 2), 0.001, 0.999)
    return moved, shrink_to_feasible(moved, z[2 * n:])


class CirclePackingAgent(EditAgent[Layout]):
    """Local moves on the parent's packing (see the module docstring)."""

    name = "builtin-circle-packing"
    operators = {"nudge": 0.42, "grow": 0.1, "trade": 0.1, "relocate": 0.1, "local": 0.2, "polish": 0.05,
                 "rewrite": 0.015}
    slips = {"margin": 2.0, "missing": 1.0, "syntax": 1.0, "naming": 1.0, "endless": 0.08}
    slip_rate = 0.12
    literal_names = ("RADII", "CENTERS")

    def __init__(self) -> None:
        # scipy.optimize (about half a second to import) serves only the joint polish: loaded here,
        # when a worker makes its agent and before an attempt's clock starts, and never by a
        # process that runs another task's agent (importing this module does not load it)
        import scipy.optimize  # noqa: F401

    # -- reading and writing -------------------------------------------------------------------
    def read_state(self, task: Task, code: str, rng: np.random.Generator) -> Layout:
        n = int(getattr(task, "n", 26))
        centers = _array(read_literal(code, "CENTERS"), (n, 2))
        if centers is None:  # no usable layout: start over from a jittered ring layout
            centers = np.clip(ring_layout(n) + rng.normal(0.0, 0.02, (n, 2)), 0.01, 0.99)
            return centers, safe_radii(centers)
        radii = _array(read_literal(code, "RADII"), (n,))
        return centers, safe_radii(centers) if radii is None else np.clip(radii, 0.0, None)

    def program(self, task: Task, state: Layout, notes: str) -> str:
        centers, radii = state
        return PROGRAM.format(n=len(centers), notes=notes, total=float(radii.sum()),
                              centers=format_array(centers), radii=format_array(radii))

    def repair(self, task: Task, state: Layout, error: str, rng: np.random.Generator) -> tuple[Layout, str]:
        centers, radii = state
        radii = shrink_to_feasible(centers, radii)
        squeezed = np.flatnonzero(radii < 1e-6)
        for i in squeezed:
            centers = centers.copy()
            centers[i] = emptiest_spot(centers, radii, int(i), rng)
            radii = regrow(centers, radii, np.array([i]), rng)
        return (centers, radii), "repair: shrink overlapping radii, move squeezed circles, rewrite the literals"

    # -- operators -----------------------------------------------------------------------------
    def _op_nudge(self, task: Task, state: Layout, rng: np.random.Generator) -> tuple[Layout, str]:
        k = int(rng.choice([1, 2, 3], p=[0.5, 0.3, 0.2]))
        sigma = float(rng.choice([0.004, 0.01, 0.025]))

        def variant() -> Layout:
            centers, radii = state[0].copy(), state[1].copy()
            moved = rng.choice(len(centers), k, replace=False)
            radii[moved] = 0.0
            centers[moved] = np.clip(centers[moved] + rng.normal(0.0, sigma, (k, 2)), 0.005, 0.995)
            radii = regrow(centers, radii, moved, rng)
            return centers, regrow(centers, radii, neighbours(centers, radii, moved), rng)

        return self._pick(rng, [variant() for _ in range(variants(rng))]), \
            f"move {k} circle(s) by ~{sigma}, let them and their neighbours grow"

    def _op_grow(self, task: Task, state: Layout, rng: np.random.Generator) -> tuple[Layout, str]:
        centers, radii = state
        k = int(rng.integers(2, 6))
        which = rng.choice(len(centers), k, replace=False)
        return (centers, regrow(centers, radii, which, rng)), f"grow {k} circles until they touch"

    def _op_trade(self, task: Task, state: Layout, rng: np.random.Generator) -> tuple[Layout, str]:
        factor = float(rng.uniform(0.85, 0.98))

        def variant() -> Layout:
            centers, radii = state[0], state[1].copy()
            big = int(rng.choice(np.argsort(radii)[-8:]))
            radii[big] *= factor
            return centers, regrow(centers, radii, neighbours(centers, radii, np.array([big])), rng)

        return self._pick(rng, [variant() for _ in range(variants(rng))]), \
            f"shrink a large circle by {factor:.2f}, let its neighbours grow"

    def _op_relocate(self, task: Task, state: Layout, rng: np.random.Generator) -> tuple[Layout, str]:
        centers, radii = state[0].copy(), state[1].copy()
        small = int(np.argsort(radii)[int(rng.integers(0, 3))])
        radii[small] = 0.0
        centers[small] = emptiest_spot(centers, radii, small, rng)
        radii = regrow(centers, radii, np.array([small]), rng)
        return (centers, radii), "move one of the smallest circles to the emptiest spot"

    def _op_local(self, task: Task, state: Layout, rng: np.random.Generator) -> tuple[Layout, str]:
        k = int(rng.integers(3, 8))
        iters = int(rng.integers(2, 9))

        def variant() -> Layout:
            centers, radii = state
            middle = int(rng.integers(len(centers)))
            free = np.argsort(np.hypot(*(centers - centers[middle]).T))[:k]
            moved, shrunk = joint_polish(centers, radii, iters, 100.0, free)
            return moved, regrow(moved, shrunk, free, rng)

        return self._pick(rng, [variant() for _ in range(variants(rng))]), \
            f"optimise {k} neighbouring circles together ({iters} steps)"

    def _op_polish(self, task: Task, state: Layout, rng: np.random.Generator) -> tuple[Layout, str]:
        iters = int(rng.integers(1, 4))
        mu = float(rng.choice([30.0, 100.0, 300.0]))
        centers, radii = joint_polish(state[0], state[1], iters, mu)
        radii = regrow(centers, radii, np.arange(len(centers)), rng)
        return (centers, radii), f"{iters} joint optimisation steps on centers and radii (penalty {mu:g})"

    def _op_rewrite(self, task: Task, state: Layout, rng: np.random.Generator) -> tuple[Layout, str]:
        n = len(state[0])
        rows = int(rng.integers(4, 7))
        counts = np.full(rows, n // rows)
        counts[: n - counts.sum()] += 1
        stagger = float(rng.choice([0.0, 0.25]))  # offset odd rows by a quarter spacing (hexagon-like)
        centers = np.array([((k + 0.5 + (stagger if r % 2 else -stagger)) / count, (r + 0.5) / rows)
                            for r, count in enumerate(counts) for k in range(count)])
        centers = np.clip(centers + rng.normal(0.0, 0.01, centers.shape), 0.01, 0.99)
        return (centers, safe_radii(centers)), f"new layout from scratch: {rows} rows of {', '.join(map(str, counts))}"

    def _pick(self, rng: np.random.Generator, options: list[Layout]) -> Layout:
        return judged_pick(rng, options, lambda layout: float(layout[1].sum()), insight=0.65)

    # -- slips ---------------------------------------------------------------------------------
    def _slip_margin(self, task: Task, state: Layout, notes: str, rng: np.random.Generator) -> tuple[str, str]:
        centers, radii = state
        grown = radii.copy()
        grown[int(rng.integers(len(radii)))] += float(rng.choice([1e-7, 1e-5, 1e-3]))
        return self.program(task, (centers, grown), notes), "slip: one radius rounded up past its neighbour"

    def _slip_missing(self, task: Task, state: Layout, notes: str, rng: np.random.Generator) -> tuple[str, str]:
        centers, radii = state
        drop = int(rng.integers(len(radii)))
        keep = np.delete(np.arange(len(radii)), drop)
        return self.program(task, (centers[keep], radii[keep]), notes), f"slip: circle {drop} left out"

    def _slip_endless(self, task: Task, state: Layout, notes: str, rng: np.random.Generator) -> tuple[str, str]:
        code = self.program(task, state, notes)
        return code.split("\n\ndef construct_packing", 1)[0] + ENDLESS, "slip: a refinement loop that never ends"


def _array(value: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    if array.shape != shape or not np.isfinite(array).all():
        return None
    return np.clip(array, 0.0, 1.0) if len(shape) == 2 else array
