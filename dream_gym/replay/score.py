"""Scores: quality normalisation q, the replay score V (v1) and the Pareto objective (v2).

v1, per episode (the paper's replay score; docs/concepts/score.md)::

    V = max_{v revealed} q(s_v) - beta1 * N + beta2 * N / max(1, k)

with ``q(s) = (s - baseline) / (best recorded - baseline)``: 0 at the baseline, 1 at the best
score recorded in the world. Unscored nodes count as attempts only. When a world records no
improvement over its baseline, every q is 0.

Defaults (our own choices; the paper gives no numbers): ``beta1 = 0.003`` per attempt and
``beta2 = 0.02`` per attempt-per-round. On the shipped worlds (151 to 1,001 nodes, W 4-8) revealing
everything costs 0.45 to 3.0 of quality, so neither "reveal everything" nor "stop at once" is
optimal (tests/test_score.py checks it on the shipped worlds); a full batch every round earns at
most ``W * 0.02`` (0.08 at W = 4, 0.16 at W = 8), enough to prefer wide rounds over serial ones
without dominating quality.

v2, per policy and world over a beta grid (the paper's appendix): each episode gives a point
(work, attainment) with work = attempts / (recorded nodes - 1) and attainment = clip(q_best, 0, 1).
``auc`` is the area of [0,1]^2 dominated by the points (reference point (1, 0)); the parallel
penalty is the mean of rounds/attempts over the grid; ``value = auc - lambda * penalty``.

The oracle limit (the best V any policy can reach on a world) lives in :mod:`dream_gym.replay.oracle`,
which builds on these formulas (this module imports nothing of dream_gym).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_BETA1 = 0.003
DEFAULT_BETA2 = 0.02
DEFAULT_LAMBDA = 0.1
DEFAULT_BETA_GRID: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))


@dataclass(frozen=True)
class Normalizer:
    """Maps oriented scores to q: 0 at the baseline, 1 at the world's best recorded score."""

    baseline: float
    best: float

    def q(self, score: float | None) -> float | None:
        if score is None or math.isnan(score):
            return None
        span = self.best - self.baseline
        if span <= 0:
            return 0.0
        return (score - self.baseline) / span


def replay_score(best_q: float, attempts: int, rounds: int, beta1: float, beta2: float) -> float:
    """V (v1) from the best quality revealed, N attempts and k rounds:
    ``best_q - beta1 * N + beta2 * N / max(1, k)``.

    Args:
        best_q: the best quality revealed, in [0, 1] (0: the baseline, 1: the best the world recorded).
        attempts: N, the attempts spent (>= 0). rounds: k, the rounds taken (>= 0).
        beta1: the cost of an attempt; beta2: the bonus of an attempt per round (both >= 0).

    A formula, unchecked (the oracle calls it in its search); :class:`~dream_gym.replay.settings.ReplaySettings`
    checks the prices an episode is replayed at.
    """
    return best_q - beta1 * attempts + beta2 * attempts / max(1, rounds)


def pareto_front(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated (work, attainment) points (less work, more attainment is better), by work."""
    front: list[tuple[float, float]] = []
    for work, attain in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or attain > front[-1][1]:
            front.append((work, attain))
    return front


def pareto_auc(points: Iterable[tuple[float, float]]) -> float:
    """Area of the box [0,1]x[0,1] dominated by the points, reference point (1, 0)."""
    clipped = [(min(max(w, 0.0), 1.0), min(max(a, 0.0), 1.0)) for w, a in points]
    front = pareto_front(clipped)
    area = 0.0
    for i, (work, attain) in enumerate(front):
        next_work = front[i + 1][0] if i + 1 < len(front) else 1.0
        area += (next_work - work) * attain
    return area


@dataclass(frozen=True)
class V2Result:
    auc: float
    penalty: float
    value: float
    front: tuple[tuple[float, float], ...]


def parallel_penalty(rounds: int, attempts: int) -> float:
    """rounds/attempts: 1 when every round runs one attempt, 1/W when every round is full."""
    return rounds / attempts if attempts else 0.0


def check_lambda(lam: float) -> float:
    """``lam``, the weight of v2's parallel penalty, when it is a finite number >= 0 (a negative
    one would reward the penalty); else a ValueError naming it."""
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or not 0 <= float(lam) < math.inf:
        raise ValueError(f"lam (v2's parallel-penalty weight) must be a finite number >= 0, got {lam!r}")
    return float(lam)


def v2_objective(
    episodes: Sequence[tuple[float, float, int, int]], lam: float = DEFAULT_LAMBDA
) -> V2Result:
    """The Pareto objective over a beta sweep.

    Args:
        episodes: one ``(work, attainment, rounds, attempts)`` per beta of the grid.
        lam: weight of the parallel penalty.
    """
    if not episodes:
        raise ValueError("v2_objective needs at least one episode (one per beta of the grid)")
    if any(len(episode) != 4 for episode in episodes):
        raise ValueError("v2_objective takes one (work, attainment, rounds, attempts) per beta, got "
                         f"{next(e for e in episodes if len(e) != 4)!r}")
    if not all(math.isfinite(w) and math.isfinite(a) for w, a, _, _ in episodes):  # NaN: an auc of NaN
        raise ValueError("v2_objective: work and attainment must be finite numbers")
    check_lambda(lam)
    points = [(w, a) for w, a, _, _ in episodes]
    auc = pareto_auc(points)
    penalty = sum(parallel_penalty(k, n) for _, _, k, n in episodes) / len(episodes)
    return V2Result(auc=auc, penalty=penalty, value=auc - lam * penalty, front=tuple(pareto_front(points)))


__all__ = [
    "DEFAULT_BETA1",
    "DEFAULT_BETA2",
    "DEFAULT_BETA_GRID",
    "DEFAULT_LAMBDA",
    "Normalizer",
    "check_lambda",
    "V2Result",
    "pareto_auc",
    "pareto_front",
    "parallel_penalty",
    "replay_score",
    "v2_objective",
]
