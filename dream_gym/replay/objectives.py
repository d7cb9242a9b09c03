"""Episode values: what the vector envs and the macro envs reward.

A value function (Jumanji-style, passed to the envs as ``value_fn=``) maps :class:`Progress`
(per-episode arrays, or scalars for a single env) to the episode's value so far; each step's
reward is the change it causes, starting from 0 before the first step, so an episode's rewards
sum to its final value.

* :func:`replay_value` (the default): the replay score V (docs/concepts/score.md; ``dream_gym.replay.score.replay_score``)
  written for arrays. It does not depend on beta, so a policy trained on it has no reason to act
  differently at different betas, and its v2 Pareto front collapses to one point.
* :class:`PricedAttainment`: the beta-conditioned training objective, the per-episode Lagrangian of
  v2: ``attainment - price(beta) * work - lam * rounds / attempts``, the price of work falling
  geometrically from ``price_high`` at beta = 0 to ``price_low`` at beta = 1.

Why the priced objective matches v2 (``dream_gym.replay.score.v2_objective``): v2 scores a policy on a
world by the area of [0, 1]^2 its (work, attainment) points, one per beta of the grid, dominate,
minus ``lam`` times the mean over the grid of rounds / attempts. Of everything a policy can reach,
the points on the upper boundary that dominate the most area are the supporting points of its
concave hull, each the maximiser of ``attainment - c * work`` for some slope c >= 0, and a staircase
through such points at slopes from steep to flat dominates the largest area. Pricing work at
``c = price(beta)`` asks for the point of slope ``price(beta)`` at each beta; the penalty term is
v2's own, per episode (v2 averages it over the grid, so it adds up over episodes). Work and
attainment are v2's exactly: work = N / (recorded attempts), attainment = clip(best q, 0, 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dream_gym.replay.score import DEFAULT_LAMBDA


@dataclass(frozen=True)
class Progress:
    """An episode's progress: best q revealed, attempts N, rounds k, its beta/beta1/beta2, and its
    world's recorded attempts (nodes - 1, at least 1; v2's unit of work). Replay knows the last
    one; a policy never sees it: it enters rewards, like q, never observations."""

    best_q: Any
    attempts: Any
    rounds: Any
    beta: Any
    beta1: float
    beta2: float
    recorded: Any = None


ValueFn = Callable[[Progress], Any]


def replay_value(progress: Progress) -> Any:
    """V = best q - beta1 * N + beta2 * N / max(1, k): ``score.replay_score`` on arrays (the same
    operations in the same order, so the same bits; tests/test_vector_replay.py pins the two)."""
    p = progress
    return p.best_q - p.beta1 * p.attempts + p.beta2 * p.attempts / np.maximum(1, p.rounds)


# Price range of PricedAttainment (per unit of work, i.e. per all of a world's recorded attempts):
# the oracle's points maximising attainment - c * work on the shipped train worlds move for c in
# about [0.2, 25] (below, the oracle already reaches q = 1; above, it stops at once); V's own
# price, beta1 * (recorded attempts), is 0.75 on a 250-attempt world. 2 -> 0.5 was chosen on an
# inner split of the shipped models' train pool (recorded-v1's and recorded-v0's train splits, with
# prefixes), never a held-out split (experiments/rl/price_range.py; 2 -> 0.1 before the pool and the
# observation changed).
DEFAULT_PRICE_HIGH = 2.0
DEFAULT_PRICE_LOW = 0.5


@dataclass(frozen=True)
class PricedAttainment:
    """The beta-conditioned objective: ``clip(best q, 0, 1) - price(beta) * N / recorded - lam * k / N``
    (the last term 0 while N = 0), with ``price(beta) = price_high * (price_low / price_high) ** beta``.

    Args:
        price_high: the price of work (all the world's recorded attempts) at beta = 0.
        price_low: the same at beta = 1 (0 < price_low <= price_high).
        lam: weight of v2's parallel penalty rounds / attempts (v2's lambda, default 0.1).
    """

    price_high: float = DEFAULT_PRICE_HIGH
    price_low: float = DEFAULT_PRICE_LOW
    lam: float = DEFAULT_LAMBDA

    def __post_init__(self) -> None:
        if not (0 < self.price_low <= self.price_high and math.isfinite(self.price_high)):
            raise ValueError(f"PricedAttainment needs 0 < price_low <= price_high, got {self.price_low}, {self.price_high}")
        if not self.lam >= 0:
            raise ValueError(f"PricedAttainment needs lam >= 0, got {self.lam}")

    def price(self, beta: Any) -> Any:
        """The price of work at beta: price_high at 0, falling geometrically to price_low at 1."""
        return self.price_high * (self.price_low / self.price_high) ** np.asarray(beta, dtype=np.float64)

    def __call__(self, progress: Progress) -> Any:
        p = progress
        if p.recorded is None:
            raise ValueError("PricedAttainment needs Progress.recorded (the world's recorded attempts)")
        attempts = np.asarray(p.attempts, dtype=np.float64)
        penalty = np.where(attempts > 0, np.asarray(p.rounds, dtype=np.float64) / np.maximum(attempts, 1.0), 0.0)
        work = attempts / np.maximum(1, np.asarray(p.recorded, dtype=np.float64))
        value = np.clip(p.best_q, 0.0, 1.0) - self.price(p.beta) * work - self.lam * penalty
        return float(value) if np.ndim(value) == 0 else value


OBJECTIVES = ("v", "v2")


def make_objective(name: str, **params: Any) -> ValueFn:
    """A value function by name: ``"v"`` (:func:`replay_value`, no parameters) or ``"v2"``
    (:class:`PricedAttainment`; ``params`` are its arguments)."""
    if name == "v":
        if params:
            raise ValueError(f"objective 'v' takes no parameters, got {sorted(params)}")
        return replay_value
    if name == "v2":
        return PricedAttainment(**params)
    raise ValueError(f"unknown objective {name!r}; known: {', '.join(OBJECTIVES)}")
