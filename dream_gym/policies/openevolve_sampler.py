"""An OpenEvolve-style parent sampler: exploration / exploitation (elite archive) / fitness-weighted."""

from __future__ import annotations

import math

import numpy as np

from dream_gym.policies.base import BatchSlots, BudgetedPolicy, check_params, interpolate
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import PrefixView


class OpenEvolvePolicy(BudgetedPolicy):
    """Each slot of a batch samples one parent, as OpenEvolve's program database does.

    With probability ``exploration_ratio`` the parent is drawn uniformly from all legal slots
    (the root, i.e. a new branch, included); with probability ``exploitation_ratio`` it is
    drawn uniformly from the *elite archive*: the top ``max(1, ceil(elite_ratio * m))`` (at
    most ``archive_size``) of the ``m`` legal nodes with a valid score; otherwise (the
    remaining probability) it is drawn with probability proportional to fitness
    ``score - min + eps`` over the legal scored slots (the root counts with the baseline
    score). An empty mode falls back to exploration. Non-root nodes are drawn without
    replacement within a batch; the root up to ``root_slots`` times. Only legal nodes are
    candidates, so under the ``leaves`` rule an expanded elite is continued through its
    revealed leaf. Stops after ``rounds`` rounds or ``patience`` rounds without a new best.

    Args:
        exploration_ratio: default 0.1 + 0.2 * beta (0.2 at beta 0.5, OpenEvolve's default).
        exploitation_ratio: default 0.7 (OpenEvolve's default).
        elite_ratio: fraction of scored legal nodes in the elite archive; default
            0.1 + 0.2 * beta (OpenEvolve's ``elite_selection_ratio`` is 0.1).
        archive_size: cap on the elite archive; default 100 (OpenEvolve's).
        rounds: round budget; default round(8 + 32 * beta).
        patience: rounds without improvement before stopping; default round(2 + 6 * beta).
    Source: OpenEvolve (github.com/codelion/openevolve), ``ProgramDatabase.sample`` and its
    ``exploration_ratio`` / ``exploitation_ratio`` / ``elite_selection_ratio`` /
    ``archive_size`` options (islands and MAP-Elites cells are not modelled); after
    AlphaEvolve (Novikov et al., 2025). Seeded from ``RunContext.seed``.
    """

    name = "openevolve"

    def __init__(
        self,
        exploration_ratio: float | None = None,
        exploitation_ratio: float | None = None,
        elite_ratio: float | None = None,
        archive_size: int = 100,
        rounds: int | None = None,
        patience: int | None = None,
    ):
        super().__init__(rounds=rounds, patience=patience)
        check_params(exploration_ratio=(exploration_ratio, 0, 1), exploitation_ratio=(exploitation_ratio, 0, 1),
                     elite_ratio=(elite_ratio, 0, 1), archive_size=(archive_size, 1))
        self.exploration_ratio = exploration_ratio
        self.exploitation_ratio = exploitation_ratio
        self.elite_ratio = elite_ratio
        self.archive_size = archive_size

    def ratios(self) -> tuple[float, float]:
        explore = self.exploration_ratio
        if explore is None:
            explore = interpolate(0.1, 0.3, self.beta)
        exploit = self.exploitation_ratio if self.exploitation_ratio is not None else 0.7
        return explore, exploit

    def elites(self, view: PrefixView) -> list[int]:
        """The elite archive: the best legal non-root nodes with a valid score, best first."""
        scored = [view.nodes[i] for i in view.frontier if i != ROOT and view.nodes[i].score is not None]
        scored.sort(key=lambda n: (n.score, n.id), reverse=True)
        ratio = self.elite_ratio if self.elite_ratio is not None else interpolate(0.1, 0.3, self.beta)
        size = min(self.archive_size, max(1, math.ceil(ratio * len(scored)))) if scored else 0
        return [n.id for n in scored[:size]]

    def act(self, view: PrefixView) -> list[int]:
        if self.out_of_budget(view):
            return []
        explore, exploit = self.ratios()
        elites = self.elites(view)
        batch = BatchSlots(view)
        while len(batch.picks) < view.workers:
            slots = ([ROOT] if batch.roots_left else []) + [
                i for i in view.frontier if i != ROOT and i not in batch.taken]
            if not slots:
                break
            u = self.rng.random()
            pick: int | None = None
            if explore <= u < explore + exploit:
                pool = [i for i in elites if i not in batch.taken]
                if pool:
                    pick = pool[int(self.rng.integers(len(pool)))]
            elif u >= explore + exploit:
                pick = self._fitness_pick(view, slots)
            if pick is None:  # exploration, or a fallback from an empty mode
                pick = slots[int(self.rng.integers(len(slots)))]
            batch.add(pick)
        return batch.picks

    def _fitness_pick(self, view: PrefixView, slots: list[int]) -> int | None:
        scores = [view.baseline_score if i == ROOT else view.nodes[i].score for i in slots]
        pairs = [(i, s) for i, s in zip(slots, scores, strict=True) if s is not None]
        if not pairs:
            return None
        low = min(s for _, s in pairs)
        weights = np.array([s - low for _, s in pairs], dtype=float) + 1e-9 + 1e-3 * (
            max(s for _, s in pairs) - low
        )
        weights /= weights.sum()
        return pairs[int(self.rng.choice(len(pairs), p=weights))][0]
