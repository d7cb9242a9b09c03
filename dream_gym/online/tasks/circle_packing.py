"""Circle packing: maximise the sum of radii of n disjoint circles inside the unit square."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from dream_gym.online.tasks.base import HARD, REPAIRABLE, Check, HarnessTask, Limits

TOL = 1e-9
BEST_KNOWN = {26: 2.635983, 32: 2.939572}

def safe_radii(centers):
    """Largest radii that keep every circle inside the square, then shrink overlapping pairs."""
    centers = np.asarray(centers, dtype=float)
    radii = np.min(np.hstack([centers, 1.0 - centers]), axis=1)
    for i in range(len(centers)):
        for j in range(i + 1, len(centers)):
            dist = float(np.hypot(*(centers[i] - centers[j])))
            if radii[i] + radii[j] > dist:
                scale = dist / (radii[i] + radii[j])
                radii[i] *= scale
                radii[j] *= scale
    return radii * (1.0 - 1e-9)


#: The initial program: a ring layout and :func:`safe_radii`, whose text it holds as written here
#: (the built-in agent calls the same function for the radii of the layouts it writes).
INITIAL_TEMPLATE = '''"""Circle packing of {n} circles in the unit square: a ring layout with safe radii.

construct_packing() returns (centers (n, 2), radii (n,)); the evaluator computes the score
(sum of radii) itself and checks that circles are disjoint and inside the square.
"""
import numpy as np

# One circle in the middle, a ring of 8 around it, the rest on an outer ring (clipped).
CENTERS = {centers}


{safe_radii}

def construct_packing():
    centers = np.array(CENTERS, dtype=float)
    return centers, safe_radii(centers)
'''


def ring_layout(n: int) -> np.ndarray:
    """OpenEvolve's baseline layout: centre, ring of 8 at 0.3, outer ring at 0.7 clipped."""
    centers = [(0.5, 0.5)]
    centers += [(0.5 + 0.3 * np.cos(2 * np.pi * i / 8), 0.5 + 0.3 * np.sin(2 * np.pi * i / 8)) for i in range(8)]
    outer = n - len(centers)
    centers += [(0.5 + 0.7 * np.cos(2 * np.pi * i / outer), 0.5 + 0.7 * np.sin(2 * np.pi * i / outer))
                for i in range(outer)]
    return np.clip(np.array(centers[:n]), 0.01, 0.99)


def format_array(array: np.ndarray) -> str:
    """A Python literal for an array, one row per line, with round-trip float precision."""
    if array.ndim == 1:
        return "[" + ", ".join(repr(float(x)) for x in array) + "]"
    rows = ",\n    ".join("[" + ", ".join(repr(float(x)) for x in row) + "]" for row in array)
    return "[\n    " + rows + ",\n]"


class CirclePacking(HarnessTask):
    """``construct_packing() -> (centers (n, 2), radii (n,))``; score = sum of radii (maximise)."""

    entry = "construct_packing"
    direction = "maximize"
    limits = Limits(wall_s=20.0, memory_mb=1536)
    noisy = False
    # Accept OpenEvolve-style (centers, radii, reported_sum) too: the reported sum is ignored.
    # Plain Python (no numpy import): a program of literals is evaluated in ~0.05 s.
    convert = (
        "    if not isinstance(answer, (tuple, list)) or len(answer) not in (2, 3):\n"
        "        raise TypeError('construct_packing() must return (centers, radii)')\n"
        "    data = {'centers': [[float(x) for x in row] for row in answer[0]],\n"
        "            'radii': [float(x) for x in answer[1]],\n"
        "            'extra_values_ignored': len(answer) - 2}"
    )

    def __init__(self, n: int):
        self.n = n
        self.name = f"circle-packing-{n}"
        self.best_known = BEST_KNOWN.get(n)
        best = f" The best known sum is {self.best_known}." if self.best_known else ""
        self.description = (
            f"Pack {n} disjoint circles inside the unit square [0,1]^2 so that the sum of their radii is "
            f"as large as possible.{best} Write a Python program defining construct_packing() that "
            f"returns (centers, radii): an array of shape ({n}, 2) and one of shape ({n},). The evaluator "
            f"checks (tolerance {TOL:g}) that every radius is positive, every circle lies inside the square "
            "and no two circles overlap, then computes the sum of radii itself. numpy and scipy are "
            f"available; the program has {self.limits.wall_s:g} s and {self.limits.memory_mb} MB."
        )

    def initial_program(self) -> str:
        return INITIAL_TEMPLATE.format(n=self.n, centers=format_array(ring_layout(self.n)),
                                       safe_radii=inspect.getsource(safe_radii))

    def check(self, answer: Any) -> Check:
        centers = np.asarray(answer["centers"], dtype=float)
        radii = np.asarray(answer["radii"], dtype=float)
        n = self.n
        if centers.shape != (n, 2) or radii.shape != (n,):
            return Check.fail(f"wrong shape: expected centers ({n}, 2) and radii ({n},), got centers "
                              f"{centers.shape} and radii {radii.shape}", REPAIRABLE)
        if not (np.isfinite(centers).all() and np.isfinite(radii).all()):
            return Check.fail("non-finite number (nan or inf) in centers or radii", REPAIRABLE)
        problem = feasibility_problem(centers, radii)
        summary = {"centers": centers.tolist(), "radii": radii.tolist()}
        if problem:
            check = Check.fail(problem, HARD, f"Infeasible packing: {problem}.")
            check.parsed = summary
            return check
        total = float(radii.sum())
        metrics = packing_metrics(centers, radii, self.best_known)
        return Check(total, self._diagnostics(total, metrics, answer), metrics=metrics, parsed=summary)

    def _diagnostics(self, total: float, metrics: dict[str, Any], answer: Any) -> str:
        lines = [f"valid packing of {self.n} circles; sum of radii {total:.6f}"]
        if self.best_known:
            lines.append(f"best known {self.best_known} ({100 * total / self.best_known:.2f}% of it)")
        lines.append(f"radii from {metrics['min_radius']:.4f} to {metrics['max_radius']:.4f}; "
                     f"{metrics['touching_pairs']} touching pairs, {metrics['touching_walls']} wall contacts "
                     f"(slack < 1e-6); smallest pair slack {metrics['min_pair_slack']:.2e}")
        if answer.get("extra_values_ignored"):
            lines.append("note: construct_packing returned extra values; they were ignored "
                         "(the evaluator computes the score itself)")
        return "; ".join(lines)


def feasibility_problem(centers: np.ndarray, radii: np.ndarray, tol: float = TOL) -> str | None:
    """The first violated constraint, in words (None when the packing is feasible)."""
    bad = np.flatnonzero(radii <= 0)
    if bad.size:
        return f"circle {bad[0]} has non-positive radius {radii[bad[0]]:.3g}"
    out = np.maximum(radii[:, None] - centers, centers + radii[:, None] - 1.0).max(axis=1)
    if (out > tol).any():
        i = int(np.argmax(out))
        return f"circle {i} sticks out of the unit square by {out[i]:.3g}"
    dist = np.hypot(*(centers[:, None, :] - centers[None, :, :]).transpose(2, 0, 1))
    overlap = radii[:, None] + radii[None, :] - dist
    np.fill_diagonal(overlap, -np.inf)
    if (overlap > tol).any():
        a, b = (int(k) for k in np.unravel_index(int(np.argmax(overlap)), overlap.shape))
        return f"circles {min(a, b)} and {max(a, b)} overlap by {overlap[a, b]:.3g}"
    return None


def packing_metrics(centers: np.ndarray, radii: np.ndarray, best: float | None) -> dict[str, Any]:
    dist = np.hypot(*(centers[:, None, :] - centers[None, :, :]).transpose(2, 0, 1))
    slack = dist - radii[:, None] - radii[None, :]
    upper = slack[np.triu_indices(len(radii), 1)]
    walls = np.hstack([centers - radii[:, None], 1.0 - centers - radii[:, None]])
    total = float(radii.sum())
    return {
        "sum_radii": total,
        "fraction_of_best_known": total / best if best else None,
        "min_radius": float(radii.min()),
        "max_radius": float(radii.max()),
        "min_pair_slack": float(upper.min()) if upper.size else 0.0,
        "touching_pairs": int((upper < 1e-6).sum()),
        "touching_walls": int((walls < 1e-6).sum()),
    }
