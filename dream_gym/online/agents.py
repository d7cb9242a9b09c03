"""Built-in discovery agents: real stochastic improvement operators that need no LLM.

Each agent reads the parent's program *as text* (``ast``; the parent is never executed here),
applies a randomly chosen operator, and writes a new program. Like an LLM's, their proposals
usually work, sometimes improve, and sometimes fail (timeouts, slightly infeasible answers,
a tolerance too loose): the evaluator, not the agent, is the judge. When the parent failed,
they usually try to repair what its error names first.

``builtin_agent(task_name)`` returns the agent of a built-in task.
"""

from __future__ import annotations

import ast
import time
from typing import Any

import numpy as np

from dream_gym.online.agent_base import Agent, ParentContext, Proposal, zero_cost
from dream_gym.online.tasks.base import Task
from dream_gym.online.tasks.circle_packing import format_array, ring_layout
from dream_gym.online.tasks.sum_difference import MAX_SIZE, sum_difference_ratio


def read_literal(code: str, name: str) -> Any:
    """The value of a top-level ``NAME = <literal>`` in a program text, or None."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
    return None


# --------------------------------------------------------------------------------------------
# Circle packing. The optimiser below runs in this process for most operators and is also
# pasted into programs that optimise at run time (one source, two uses).
PACKING_OPT_SRC = '''
import numpy as np
from scipy.optimize import linprog, minimize


def pair_distances(centers):
    i, j = np.triu_indices(len(centers), 1)
    return i, j, np.hypot(*(centers[i] - centers[j]).T)


def lp_radii(centers):
    """Radii with the largest sum for fixed centers (a linear program)."""
    n = len(centers)
    i, j, dist = pair_distances(centers)
    rows = np.arange(len(i))
    A = np.zeros((len(i), n))
    A[rows, i] = 1.0
    A[rows, j] = 1.0
    wall = np.clip(np.min(np.hstack([centers, 1.0 - centers]), axis=1), 0.0, None)
    res = linprog(-np.ones(n), A_ub=A, b_ub=dist, bounds=list(zip(np.zeros(n), wall)), method="highs")
    return np.asarray(res.x) if res.success else np.zeros(n)


def make_feasible(centers, radii, margin=1e-12):
    """Shrink radii so every constraint holds with `margin` to spare."""
    wall = np.min(np.hstack([centers, 1.0 - centers]), axis=1)
    r = np.clip(np.minimum(radii, wall - margin), 0.0, None)
    dist = np.hypot(*(centers[:, None, :] - centers[None, :, :]).transpose(2, 0, 1))
    for _ in range(5):
        over = r[:, None] + r[None, :] - dist + margin
        np.fill_diagonal(over, -np.inf)
        if over.max() <= 0:
            break
        r = np.clip(r - np.clip(over, 0.0, None).max(axis=1) / 2.0, 0.0, None)
    return r


def penalty_polish(centers, radii, iters, stages=(1e2, 1e3, 1e4, 1e5)):
    """Move centers and radii together: maximise sum(r) minus a growing overlap penalty."""
    n = len(centers)
    i, j = np.triu_indices(n, 1)

    def objective(z, mu):
        c, r = z[:2 * n].reshape(n, 2), z[2 * n:]
        diff = c[i] - c[j]
        d = np.sqrt((diff ** 2).sum(axis=1)) + 1e-12
        ov = np.clip(r[i] + r[j] - d, 0.0, None)
        lo = np.clip(r[:, None] - c, 0.0, None)
        hi = np.clip(r[:, None] + c - 1.0, 0.0, None)
        value = -r.sum() + mu * ((ov ** 2).sum() + (lo ** 2).sum() + (hi ** 2).sum())
        g_r = -np.ones(n) + 2 * mu * (np.bincount(i, ov, n) + np.bincount(j, ov, n)
                                      + lo.sum(axis=1) + hi.sum(axis=1))
        push = (2 * mu * ov / d)[:, None] * diff
        g_c = 2 * mu * (hi - lo)
        for axis in range(2):
            g_c[:, axis] += np.bincount(j, push[:, axis], n) - np.bincount(i, push[:, axis], n)
        return value, np.concatenate([g_c.ravel(), g_r])

    z = np.concatenate([np.asarray(centers, float).ravel(), np.asarray(radii, float)])
    bounds = [(0.0, 1.0)] * (2 * n) + [(0.0, 0.5)] * n
    for mu in stages:
        z = minimize(objective, z, args=(mu,), jac=True, method="L-BFGS-B", bounds=bounds,
                     options={"maxiter": int(iters)}).x
    return z[:2 * n].reshape(n, 2), z[2 * n:]
'''
_packing: dict[str, Any] = {}
exec(PACKING_OPT_SRC, _packing)
lp_radii, make_feasible, penalty_polish = (_packing[k] for k in ("lp_radii", "make_feasible", "penalty_polish"))

LITERAL_PACKING = '''"""Circle packing of {n} circles: {notes}.

Centers and radii are stored as literals (sum of radii by the agent's own count: {total:.6f}).
"""
import numpy as np

CENTERS = {centers}

RADII = {radii}


def construct_packing():
    return np.array(CENTERS, dtype=float), np.array(RADII, dtype=float)
'''

RUNTIME_PACKING = '''"""Circle packing of {n} circles optimised at run time: {notes}.

Starts from the embedded layout, tries RESTARTS jittered penalty polishes, keeps the best.
"""
import numpy as np

CENTERS = {centers}
RESTARTS = {restarts}
ITERS = {iters}
JITTER = {jitter!r}
SEED = {seed}
FINAL_LP = {final_lp}
{optimizer}

def construct_packing():
    rng = np.random.default_rng(SEED)
    best_c = np.array(CENTERS, dtype=float)
    best_r = lp_radii(best_c)
    for _ in range(RESTARTS):
        start = np.clip(best_c + rng.normal(0.0, JITTER, best_c.shape), 0.01, 0.99)
        c, r = penalty_polish(start, lp_radii(start), ITERS)
        if FINAL_LP:
            r = lp_radii(c)
        if r.sum() > best_r.sum():
            best_c, best_r = c, r
    if FINAL_LP:
        best_r = make_feasible(best_c, best_r)
    return best_c, best_r
'''


class CirclePackingAgent:
    """Perturb-and-reoptimise operators on a packing read from the parent's CENTERS literal."""

    name = "builtin-circle-packing"

    def propose(self, task: Task, parent: ParentContext, rng: np.random.Generator) -> Proposal:
        started = time.perf_counter()
        n = int(getattr(task, "n", 26))
        centers = self._parent_centers(parent.code, n, rng)
        if parent.error and rng.random() < 0.7:
            op = "repair"
        else:
            op = str(rng.choice(["jitter", "relocate", "polish", "runtime"], p=[0.3, 0.25, 0.25, 0.2]))
        code, notes = getattr(self, f"_op_{op}")(centers, rng)
        return Proposal(code=code, notes=notes, cost=zero_cost(time.perf_counter() - started))

    @staticmethod
    def _parent_centers(code: str, n: int, rng: np.random.Generator) -> np.ndarray:
        value = read_literal(code, "CENTERS")
        try:
            centers = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            centers = np.empty(0)
        if centers.shape != (n, 2) or not np.isfinite(centers).all():
            # No usable literal: start over from a jittered baseline layout.
            centers = ring_layout(n) + rng.normal(0.0, 0.02, (n, 2))
        return np.clip(centers, 0.005, 0.995)

    def _emit(self, centers: np.ndarray, radii: np.ndarray, notes: str) -> tuple[str, str]:
        code = LITERAL_PACKING.format(n=len(centers), notes=notes, total=float(radii.sum()),
                                      centers=format_array(centers), radii=format_array(radii))
        return code, notes

    def _finish(self, centers: np.ndarray, rng: np.random.Generator, notes: str,
                optimiser_radii: np.ndarray | None = None) -> tuple[str, str]:
        if optimiser_radii is not None and rng.random() < 0.2:
            # A classic slip: keeping the penalty optimiser's radii, which overlap slightly.
            return self._emit(centers, np.clip(optimiser_radii, 1e-6, None),
                              notes + " (keeps the optimiser's own radii, no LP recompute)")
        centers, radii = self._fill_empty(centers, rng)
        # Most of the time the radii get a safety pass; sometimes the LP answer is written as is,
        # and the solver's feasibility tolerance can leave overlaps above the evaluator's 1e-9.
        if rng.random() < 0.85:
            radii = make_feasible(centers, radii, 1e-12)
        else:
            notes += " (LP radii written without a safety margin)"
        return self._emit(centers, radii, notes)

    def _op_repair(self, centers: np.ndarray, rng: np.random.Generator) -> tuple[str, str]:
        centers, radii = self._fill_empty(centers, rng)
        return self._emit(centers, make_feasible(centers, radii, 1e-12),
                          "repair: move zero-radius circles, recompute radii by LP, shrink to feasibility")

    def _fill_empty(self, centers: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """LP radii; a circle squeezed to radius ~0 usually gets moved to an empty spot first."""
        radii = lp_radii(centers)
        empty = np.flatnonzero(radii < 1e-6)
        if empty.size and rng.random() < 0.8:
            centers = self._move_to_holes(centers, radii, empty, rng)
            radii = lp_radii(centers)
        return centers, radii

    @staticmethod
    def _move_to_holes(centers: np.ndarray, radii: np.ndarray, which: np.ndarray,
                       rng: np.random.Generator) -> np.ndarray:
        centers = centers.copy()
        for idx in which:
            # Move the circle to the emptiest of a few random spots.
            spots = rng.uniform(0.02, 0.98, (300, 2))
            others = np.delete(np.arange(len(centers)), idx)
            gap = np.linalg.norm(spots[:, None] - centers[others][None], axis=2) - radii[others][None]
            clearance = np.minimum(gap.min(axis=1), np.minimum(spots, 1 - spots).min(axis=1))
            centers[idx] = spots[int(np.argmax(clearance))]
        return centers

    def _op_jitter(self, centers: np.ndarray, rng: np.random.Generator) -> tuple[str, str]:
        k = int(rng.integers(1, 5))
        sigma = float(rng.choice([0.01, 0.03, 0.08]))
        moved = rng.choice(len(centers), k, replace=False)
        centers = centers.copy()
        centers[moved] = np.clip(centers[moved] + rng.normal(0.0, sigma, (k, 2)), 0.005, 0.995)
        polish = rng.random() < 0.6
        hint = None
        if polish:
            centers, hint = self._polish(centers, rng)
        return self._finish(centers, rng, f"jitter {k} circles by {sigma}" + (", then polish" if polish else ""),
                            hint)

    def _op_relocate(self, centers: np.ndarray, rng: np.random.Generator) -> tuple[str, str]:
        radii = lp_radii(centers)
        k = int(rng.integers(1, 3))
        centers = self._move_to_holes(centers, radii, np.argsort(radii)[:k], rng)
        centers, hint = self._polish(centers, rng)
        return self._finish(centers, rng, f"relocate the {k} smallest circle(s) to empty spots, polish", hint)

    def _op_polish(self, centers: np.ndarray, rng: np.random.Generator) -> tuple[str, str]:
        sigma = float(rng.choice([0.0, 0.005, 0.02]))
        start = np.clip(centers + rng.normal(0.0, sigma, centers.shape), 0.005, 0.995)
        centers, hint = self._polish(start, rng)
        return self._finish(centers, rng, f"shake all centers by {sigma}, short penalty polish", hint)

    @staticmethod
    def _polish(centers: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        # A short budget on purpose: one proposal is one modest step, as an LLM edit would be.
        mu = float(rng.choice([1e2, 1e3, 1e4]))
        polished, radii = penalty_polish(centers, lp_radii(centers), int(rng.integers(2, 25)), (mu,))
        return np.asarray(polished), np.asarray(radii)

    def _op_runtime(self, centers: np.ndarray, rng: np.random.Generator) -> tuple[str, str]:
        # A heavy-tailed restart budget: usually seconds, occasionally more than the time limit.
        restarts = int(2 ** rng.uniform(0, 9))
        iters = int(rng.integers(5, 40))
        final_lp = bool(rng.random() < 0.75)
        notes = f"run-time optimiser, {restarts} restarts x {iters} iterations" + (
            "" if final_lp else ", returns penalty radii directly")
        code = RUNTIME_PACKING.format(
            n=len(centers), notes=notes, centers=format_array(centers), restarts=restarts, iters=iters,
            jitter=float(rng.choice([0.01, 0.03, 0.05])), seed=int(rng.integers(2**31)), final_lp=final_lp,
            optimizer=PACKING_OPT_SRC)
        return code, notes


# --------------------------------------------------------------------------------------------
# Sums versus differences.
MSTD_BASE = (0, 2, 3, 4, 7, 11, 12, 14)  # a classic set with more sums than differences

SET_PROGRAM = '''"""A set A for the sums-versus-differences problem: {notes}.

By the agent's own count: |A| = {size}, ratio {ratio:.6f}.
"""

A = {values}


def construct_set():
    return list(A)
'''


def _ratio(values: list[int]) -> float:
    distinct = sorted(set(values))
    if len(distinct) < 2 or min(distinct) < 0:
        return -np.inf
    return sum_difference_ratio(np.array(distinct))[0]


class SumDifferenceAgent:
    """Set mutations (add, remove, shift, splice MSTD structures, local search) on the parent's A."""

    name = "builtin-sum-difference"

    def propose(self, task: Task, parent: ParentContext, rng: np.random.Generator) -> Proposal:
        started = time.perf_counter()
        values = self._parent_set(parent.code)
        if parent.error and rng.random() < 0.7:
            values, notes = sorted({v for v in values if 0 <= v < 10**7})[:MAX_SIZE], "repair: dedupe, clip"
        else:
            op = str(rng.choice(["add", "remove", "shift", "splice", "local"], p=[0.2, 0.15, 0.2, 0.15, 0.3]))
            values, notes = getattr(self, f"_op_{op}")(values, rng)
        code = SET_PROGRAM.format(notes=notes, size=len(values), ratio=_ratio(values), values=values)
        return Proposal(code=code, notes=notes, cost=zero_cost(time.perf_counter() - started))

    @staticmethod
    def _parent_set(code: str) -> list[int]:
        value = read_literal(code, "A")
        if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            return list(value)
        return list(range(40))  # the parent built A in code: restart from an interval

    def _op_add(self, values: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        k = int(rng.integers(1, 6))
        top = max(values) + 1
        new = rng.integers(0, top + max(4, top // 4), k).tolist()
        return values + [int(v) for v in new if v not in values], f"add {k} random elements"

    def _op_remove(self, values: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        k = min(int(rng.integers(1, 4)), len(values) - 2)
        drop = set(rng.choice(len(values), max(k, 0), replace=False).tolist())
        return [v for i, v in enumerate(values) if i not in drop], f"remove {k} elements"

    def _op_shift(self, values: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        # Shifting without a duplicate check can collide or go negative: a realistic slip.
        k = int(rng.integers(1, 4))
        out = list(values)
        for i in rng.choice(len(out), min(k, len(out)), replace=False):
            out[int(i)] += int(rng.choice([-2, -1, 1, 2]))
        return out, f"shift {k} elements by +-1 or +-2"

    def _op_splice(self, values: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        if rng.random() < 0.5:
            return self._product(values, rng)
        scale = int(rng.integers(1, 4))
        offset = int(rng.integers(0, max(values) + 2))
        block = [offset + scale * b for b in MSTD_BASE]
        merged = sorted(set(values) | set(block))
        if len(merged) > MAX_SIZE and rng.random() < 0.5:
            merged = merged[:MAX_SIZE]
        return merged, f"splice the MSTD set {MSTD_BASE} scaled by {scale} at offset {offset}"

    @staticmethod
    def _product(values: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        # A + K*B with K beyond every difference multiplies the sizes of A+A, A-A and A, so
        # the ratio becomes a weighted mediant of the two sets' ratios.
        base = sorted(set(v for v in values if v >= 0)) or [0, 1]
        if len(base) * len(MSTD_BASE) > MAX_SIZE:
            base = base[: MAX_SIZE // len(MSTD_BASE)]
        inner, outer = (base, list(MSTD_BASE)) if rng.random() < 0.5 else (list(MSTD_BASE), base)
        k = 2 * max(inner) + 1
        merged = sorted({a + k * b for a in inner for b in outer})
        return merged, f"product set: {len(inner)} x {len(outer)} elements with stride {k}"

    def _op_local(self, values: list[int], rng: np.random.Generator) -> tuple[list[int], str]:
        best, best_ratio = sorted(set(v for v in values if v >= 0)), _ratio(values)
        tries = int(rng.integers(10, 40))
        top = max(best) + 1 if best else 40
        for _ in range(tries):
            trial = set(best)
            if rng.random() < 0.5 and len(trial) > 3:
                ordered = sorted(trial)
                trial.discard(ordered[int(rng.integers(len(ordered)))])
            if rng.random() < 0.7:
                trial.add(int(rng.integers(0, top + 8)))
            ratio = _ratio(sorted(trial))
            if ratio > best_ratio and len(trial) <= MAX_SIZE:
                best, best_ratio = sorted(trial), ratio
        return best, f"local search over {tries} single-element edits"


# --------------------------------------------------------------------------------------------
# Lasso path.
LASSO_PROGRAM = '''"""Lasso path solver: {notes}.

Strategy knobs live in CONFIG: method (cd | cd_gram | fista), warm starts, strong-rule
screening (with or without a KKT re-check of the discarded features), active-set cycling,
stopping tolerance on coefficient change and the iteration cap per solve.
"""
import numpy as np

CONFIG = {config!r}


def _soft(z, t):
    return np.sign(z) * np.maximum(np.abs(z) - t, 0.0)


def _cd(X, y, lam, b, cols, col_sq, tol, max_iter, cache):
    """Cyclic coordinate descent over `cols`, keeping the residual up to date."""
    n = len(y)
    r = y - X @ b
    for _ in range(max_iter):
        biggest = 0.0
        for j in cols:
            old = b[j]
            new = _soft(X[:, j] @ r / n + col_sq[j] * old, lam) / col_sq[j]
            if new != old:
                r -= X[:, j] * (new - old)
                b[j] = new
                biggest = max(biggest, abs(new - old))
        if biggest < tol:
            break
    return b


def _cd_gram(X, y, lam, b, cols, col_sq, tol, max_iter, cache):
    """Coordinate descent with the Gram matrix: the gradient is updated instead of the residual."""
    n = len(y)
    if "G" not in cache:
        cache["G"] = X.T @ X
        cache["Xty"] = X.T @ y
    G = cache["G"]
    grad = cache["Xty"] - G @ b
    for _ in range(max_iter):
        biggest = 0.0
        for j in cols:
            old = b[j]
            new = _soft(grad[j] / n + col_sq[j] * old, lam) / col_sq[j]
            if new != old:
                grad -= G[:, j] * (new - old)
                b[j] = new
                biggest = max(biggest, abs(new - old))
        if biggest < tol:
            break
    return b


def _fista(X, y, lam, b, cols, col_sq, tol, max_iter, cache):
    """Accelerated proximal gradient on the columns `cols`."""
    n = len(y)
    Xs = X[:, cols]
    step = n / max(np.linalg.norm(Xs, 2) ** 2, 1e-12)
    x = b[cols].copy()
    z = x.copy()
    t = 1.0
    for _ in range(max_iter):
        x_new = _soft(z - step * (Xs.T @ (Xs @ z - y) / n), step * lam)
        t_new = (1.0 + np.sqrt(1.0 + 4.0 * t * t)) / 2.0
        z = x_new + (t - 1.0) / t_new * (x_new - x)
        done = np.max(np.abs(x_new - x)) < tol
        x, t = x_new, t_new
        if done:
            break
    b[cols] = x
    return b


SOLVERS = {{"cd": _cd, "cd_gram": _cd_gram, "fista": _fista}}


def lasso_path(X, y, lambdas):
    cfg = CONFIG
    solve = SOLVERS[cfg["method"]]
    n, p = X.shape
    col_sq = (X ** 2).sum(axis=0) / n
    coef = np.zeros((len(lambdas), p))
    b = np.zeros(p)
    lam_prev = lambdas[0]
    cache = {{}}
    for k, lam in enumerate(lambdas):
        if not cfg["warm_start"]:
            b = np.zeros(p)
        if cfg["screening"] == "strong":
            grad = np.abs(X.T @ (y - X @ b)) / n
            keep = (grad >= 2 * lam - lam_prev) | (b != 0)
        else:
            keep = np.ones(p, dtype=bool)
        for _ in range(20):
            cols = np.flatnonzero(keep)
            if cfg["active_set"]:
                active = cols[b[cols] != 0]
                if active.size:
                    b = solve(X, y, lam, b, active, col_sq, cfg["tol"], cfg["max_iter"], cache)
            b = solve(X, y, lam, b, cols, col_sq, cfg["tol"], cfg["max_iter"], cache)
            if not cfg["kkt_recheck"] or keep.all():
                break
            grad = np.abs(X.T @ (y - X @ b)) / n
            missed = (grad > lam) & ~keep
            if not missed.any():
                break
            keep |= missed
        coef[k] = b
        lam_prev = lam
    return coef
'''

LASSO_CHOICES: dict[str, list[Any]] = {
    "method": ["cd", "cd_gram", "fista"],
    "warm_start": [True, False],
    "screening": ["none", "strong"],
    "kkt_recheck": [True, False],
    "active_set": [True, False],
    "max_iter": [20, 50, 100, 300, 1000, 3000],
}
LASSO_DEFAULT: dict[str, Any] = {"method": "cd", "warm_start": False, "screening": "none", "kkt_recheck": True,
                                 "active_set": False, "tol": 1e-7, "max_iter": 1000}


class LassoPathAgent:
    """Mutates the solver strategy (CONFIG) of the parent's program and rewrites the program."""

    name = "builtin-lasso-path"

    def propose(self, task: Task, parent: ParentContext, rng: np.random.Generator) -> Proposal:
        started = time.perf_counter()
        config = self._parent_config(parent.code)
        if parent.error and rng.random() < 0.7:
            config, notes = self._repair(config, parent.error)
        else:
            config, notes = self._mutate(config, rng)
        code = LASSO_PROGRAM.format(notes=notes, config=config)
        return Proposal(code=code, notes=notes, cost=zero_cost(time.perf_counter() - started))

    @staticmethod
    def _parent_config(code: str) -> dict[str, Any]:
        value = read_literal(code, "CONFIG")
        config = dict(LASSO_DEFAULT)  # a parent without CONFIG is the plain initial solver
        if isinstance(value, dict):
            config.update({k: v for k, v in value.items() if k in LASSO_DEFAULT})
        return config

    @staticmethod
    def _repair(config: dict[str, Any], error: str) -> tuple[dict[str, Any], str]:
        config = dict(config)
        if "KKT" in error:
            config["tol"] = max(float(config["tol"]) / 30.0, 1e-10)
            config["max_iter"] = max(int(config["max_iter"]), 1000)
            config["kkt_recheck"] = True
            return config, f"repair KKT failure: tighten tol to {config['tol']:.1e}, more iterations, re-check"
        if "timeout" in error:
            config.update(warm_start=True, active_set=True, method="cd")
            return config, "repair timeout: warm starts, active set, coordinate descent"
        return config, "repair: rewrite the program from its CONFIG"

    @staticmethod
    def _mutate(config: dict[str, Any], rng: np.random.Generator) -> tuple[dict[str, Any], str]:
        config = dict(config)
        changes = []
        for key in rng.choice([*LASSO_CHOICES, "tol"], int(rng.integers(1, 3)), replace=False):
            key = str(key)
            if key == "tol":
                # Log-normal steps: tighter is safe but slower, looser is fast but may break KKT.
                config["tol"] = float(np.clip(float(config["tol"]) * 10 ** rng.normal(0.3, 1.5), 1e-10, 1e-2))
            else:
                options = [v for v in LASSO_CHOICES[key] if v != config[key]]
                config[key] = options[int(rng.integers(len(options)))]
            changes.append(f"{key}={config[key]!r}" if key != "tol" else f"tol={config['tol']:.1e}")
        return config, "change " + ", ".join(changes)


# --------------------------------------------------------------------------------------------
# sleep-task (a measurement tool): edits a constant so the hash-based score changes.
class SleepTaskAgent:
    """Writes a trivially different program each time (its score is a hash of the text)."""

    name = "builtin-sleep-task"

    def propose(self, task: Task, parent: ParentContext, rng: np.random.Generator) -> Proposal:
        value = int(rng.integers(10**9))
        code = f'"""sleep-task program {value}."""\n\n\ndef payload():\n    return {value}\n'
        return Proposal(code=code, notes=f"payload {value}", cost=zero_cost(0.0))


BUILTIN_AGENTS: dict[str, type] = {
    "circle-packing": CirclePackingAgent,
    "sum-difference": SumDifferenceAgent,
    "lasso-path": LassoPathAgent,
    "sleep-task": SleepTaskAgent,
}


def builtin_agent(task_name: str) -> Agent:
    """The built-in (no-LLM) agent of a built-in task; ValueError for other tasks."""
    family = "circle-packing" if task_name.startswith("circle-packing-") else task_name
    try:
        agent: Agent = BUILTIN_AGENTS[family]()
    except KeyError:
        raise ValueError(f"no built-in agent for task {task_name!r}; built-in agents exist for "
                         "circle-packing-<n>, sum-difference, lasso-path and sleep-task") from None
    return agent
