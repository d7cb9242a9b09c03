"""Built-in agent for the lasso path: turns one or two knobs of the parent's solver a little.

The programs are one coordinate-descent solver with its strategy in ``CONFIG``: the method
(plain or Gram-matrix coordinate descent), a *damped warm start* (each lambda starts from
``warm`` times the previous solution: 0 is a cold start, 1 a full warm start), the strength of
strong-rule screening (``screen``: 0 keeps every feature, 1 is the strong rule, above 1 discards
more), a KKT re-check of the discarded features, active-set cycling, the stopping tolerance and
the sweep cap. Most edits nudge one or two numeric knobs (the speed-ups compound over many steps,
and too loose a tolerance or too strong a screen without the re-check breaks the KKT conditions:
hard failures the evaluator reports); sometimes a switch is flipped; rarely the whole strategy is
redrawn. After a KKT failure the agent tightens the tolerance and turns the re-check on. Slips:
coefficients returned transposed, a misspelled method name, syntax and naming errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dream_gym.online.agents.common import EditAgent, read_literal
from dream_gym.online.tasks.base import Task

DEFAULT: dict[str, Any] = {"method": "cd", "warm": 0.0, "screen": 0.0, "kkt_recheck": True, "active_set": False,
                           "tol": 1e-7, "max_iter": 1000}
NUDGE = {"warm": 0.15, "screen": 0.15}  # typical step of the numeric knobs
LIMITS = {"warm": (0.0, 1.0), "screen": (0.0, 1.5), "tol": (1e-10, 1e-2), "max_iter": (20, 3000)}

PROGRAM = '''"""Lasso path by coordinate descent: {notes}.

Strategy knobs live in CONFIG: method (cd | cd_gram), damped warm start (warm: 0 = cold start,
1 = start from the previous lambda's solution), strong-rule screening strength (screen: 0 keeps
every feature, 1 = strong rule), KKT re-check of discarded features, active-set cycling, stopping
tolerance on the coefficient change and the sweep cap per solve.
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


SOLVERS = {{"cd": _cd, "cd_gram": _cd_gram}}


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
        b = cfg["warm"] * b
        grad = np.abs(X.T @ (y - X @ b)) / n
        keep = (grad >= cfg["screen"] * (2 * lam - lam_prev)) | (b != 0)
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


class LassoPathAgent(EditAgent[dict[str, Any]]):
    """Knob edits of the parent's solver strategy (see the module docstring)."""

    name = "builtin-lasso-path"
    operators = {"nudge": 0.55, "tolerance": 0.15, "switch": 0.2, "redraw": 0.04, "cap": 0.06}
    slips = {"transpose": 1.0, "method": 1.0, "syntax": 1.0, "naming": 1.0}
    slip_rate = 0.08
    literal_names = ("coef", "CONFIG")

    def read_state(self, task: Task, code: str, rng: np.random.Generator) -> dict[str, Any]:
        value = read_literal(code, "CONFIG")
        config = dict(DEFAULT)  # a parent without CONFIG is the plain initial solver
        if isinstance(value, dict):
            config.update({k: v for k, v in value.items() if k in DEFAULT})
        if config["method"] not in ("cd", "cd_gram"):
            config["method"] = "cd"
        return config

    def program(self, task: Task, state: dict[str, Any], notes: str) -> str:
        return PROGRAM.format(notes=notes, config=state)

    def repair(self, task: Task, state: dict[str, Any], error: str, rng: np.random.Generator) -> tuple[dict[str, Any], str]:
        config = dict(state)
        if "KKT" in error:
            config["tol"] = max(float(config["tol"]) / 10.0, LIMITS["tol"][0])
            config["kkt_recheck"] = True
            config["screen"] = min(float(config["screen"]), 1.0)
            return config, f"repair KKT failure: tighten tol to {config['tol']:.1e}, re-check discarded features"
        if "timeout" in error:
            config["max_iter"] = max(LIMITS["max_iter"][0], int(config["max_iter"]) // 3)
            return config, "repair timeout: fewer sweeps per solve"
        return config, "repair: rewrite the program from its CONFIG"

    # -- operators -----------------------------------------------------------------------------
    def _op_nudge(self, task: Task, state: dict[str, Any], rng: np.random.Generator) -> tuple[dict[str, Any], str]:
        config = dict(state)
        changes = []
        for key in rng.choice(list(NUDGE), int(rng.choice([1, 2], p=[0.7, 0.3])), replace=False):
            key = str(key)
            step = float(rng.normal(0.6, 0.6)) * NUDGE[key]  # mostly up: the direction an engineer expects to help
            low, high = LIMITS[key]
            config[key] = round(float(np.clip(float(config[key]) + step, low, high)), 3)
            changes.append(f"{key}={config[key]:g}")
        return config, "nudge " + ", ".join(changes)

    def _op_tolerance(self, task: Task, state: dict[str, Any], rng: np.random.Generator) -> tuple[dict[str, Any], str]:
        config = dict(state)
        low, high = LIMITS["tol"]
        config["tol"] = float(np.clip(float(config["tol"]) * 10 ** rng.normal(0.3, 0.5), low, high))
        return config, f"tolerance {config['tol']:.1e}"

    def _op_cap(self, task: Task, state: dict[str, Any], rng: np.random.Generator) -> tuple[dict[str, Any], str]:
        config = dict(state)
        low, high = LIMITS["max_iter"]
        config["max_iter"] = int(np.clip(int(config["max_iter"]) * 2 ** rng.normal(-0.5, 1.0), low, high))
        return config, f"at most {config['max_iter']} sweeps per solve"

    def _op_switch(self, task: Task, state: dict[str, Any], rng: np.random.Generator) -> tuple[dict[str, Any], str]:
        config = dict(state)
        key = str(rng.choice(["method", "kkt_recheck", "active_set"]))
        if key == "method":
            config["method"] = "cd_gram" if config["method"] == "cd" else "cd"
        else:
            config[key] = not config[key]
        return config, f"switch {key} to {config[key]!r}"

    def _op_redraw(self, task: Task, state: dict[str, Any], rng: np.random.Generator) -> tuple[dict[str, Any], str]:
        config = {"method": str(rng.choice(["cd", "cd_gram"])), "warm": round(float(rng.uniform(0, 1)), 3),
                  "screen": round(float(rng.uniform(0, 1.2)), 3), "kkt_recheck": bool(rng.random() < 0.7),
                  "active_set": bool(rng.random() < 0.5), "tol": float(10 ** rng.uniform(-8, -4)),
                  "max_iter": int(rng.choice([100, 300, 1000]))}
        return config, "a new strategy: " + ", ".join(f"{k}={v!r}" for k, v in config.items())

    # -- slips ---------------------------------------------------------------------------------
    def _slip_transpose(self, task: Task, state: dict[str, Any], notes: str, rng: np.random.Generator) -> tuple[str, str]:
        return self.program(task, state, notes).replace("    return coef\n", "    return coef.T\n"), \
            "slip: coefficients returned transposed"

    def _slip_method(self, task: Task, state: dict[str, Any], notes: str, rng: np.random.Generator) -> tuple[str, str]:
        return self.program(task, {**state, "method": "cd_fast"}, notes), "slip: a method name that does not exist"
