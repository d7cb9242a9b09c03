"""A ShinkaEvolve-style weighted parent sampler (performance sigmoid x novelty discount)."""

from __future__ import annotations

import math

import numpy as np

from dream_gym.policies.base import BudgetedPolicy, check_params, interpolate
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import PrefixView


class ShinkaPolicy(BudgetedPolicy):
    """Sample up to W parents without replacement, weighted by performance and novelty.

    Candidate parents are the legal nodes with a valid score, plus the root (a new branch,
    scored at the baseline) once per free root slot. Weight of candidate ``i``::

        w_i = sigmoid(lam * (s_i - median) / scale) * 1 / (1 + children_i)

    ``median`` and ``scale`` (standard deviation; 1 when it is 0) are taken over all
    revealed valid scores and the baseline; ``children_i`` counts ``i``'s revealed
    children (the j-th extra copy of the root counts j more). Under the ``leaves`` rule
    legal non-root nodes have no revealed child, so the discount acts on the root (and
    on every node under ``any``). Legal nodes without a valid score are not candidates
    (ShinkaEvolve samples parents among correct programs). Stops after ``rounds`` rounds
    or ``patience`` rounds without a new best, or when no candidate is left.

    Args:
        lam: sigmoid sharpness; default 15 - 10 * beta (10 at beta 0.5, ShinkaEvolve's
            default; a lower value = flatter = weaker pruning).
        rounds: round budget; default round(8 + 32 * beta).
        patience: rounds without improvement before stopping; default round(2 + 6 * beta).
    Source: Lange et al., "ShinkaEvolve: Towards Open-Ended and Sample-Efficient Program
    Evolution" (Sakana AI, 2025), the "weighted" parent selection (sigmoid of the score
    relative to the median times 1/(1 + number of offspring)). Seeded from ``RunContext.seed``.
    """

    name = "shinka"

    def __init__(self, lam: float | None = None, rounds: int | None = None, patience: int | None = None):
        super().__init__(rounds=rounds, patience=patience)
        check_params(lam=(lam, 0))
        self.lam = lam

    def weights(self, view: PrefixView) -> list[tuple[int, float]]:
        """(candidate id, unnormalised weight) pairs; the root appears once per free slot."""
        lam = self.lam if self.lam is not None else interpolate(15.0, 5.0, self.beta)
        population = [view.baseline_score] + [n.score for n in view.nodes[1:] if n.score is not None]
        median = float(np.median(population))
        scale = float(np.std(population)) or 1.0
        out: list[tuple[int, float]] = []
        root_children = len(view.children(ROOT))
        for j in range(view.root_slots):
            out.append((ROOT, _sigmoid(lam * (view.baseline_score - median) / scale) / (1 + root_children + j)))
        for i in view.frontier:
            node = view.nodes[i]
            if i == ROOT or node.score is None:
                continue
            out.append((i, _sigmoid(lam * (node.score - median) / scale) / (1 + len(view.children(i)))))
        return out

    def act(self, view: PrefixView) -> list[int]:
        if self.out_of_budget(view):
            return []
        pairs = self.weights(view)
        if not pairs:
            return []
        w = np.array([p for _, p in pairs], dtype=float) + 1e-12
        size = min(view.workers, len(pairs))
        picks = self.rng.choice(len(pairs), size=size, replace=False, p=w / w.sum())
        return sorted(pairs[int(k)][0] for k in picks)


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)
