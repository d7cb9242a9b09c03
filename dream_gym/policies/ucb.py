"""UCB1 over branches (and the bandit loop PUCT shares); branch bookkeeping is in base.py."""

from __future__ import annotations

import math

from dream_gym.policies.base import (
    NEW_BRANCH,
    BranchInfo,
    BudgetedPolicy,
    branch_table,
    check_params,
    gain,
    interpolate,
    score_scale,
)
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import PrefixView


class BranchBandit(BudgetedPolicy):
    """Shared loop of the branch bandits: score every arm, fill the batch greedily by index.

    Arms are the opened branches with a legal node left (pulling one selects its best legal
    node) and ``NEW_BRANCH`` (selecting the root) while the root may open branches. After
    each pick the arm's pull count is raised by one ("virtual pull") before the next slot, so
    a batch spreads over arms the way sequential play would.
    """

    name = "branch-bandit"

    def prepare(self, view: PrefixView, table: dict[int, BranchInfo]) -> None:
        """Compute per-round quantities (means, priors) once before the batch is filled."""

    def index(self, arm: int, pulls: int, total: int) -> float:
        """The arm's selection index given its (virtual) pull count and the total attempts."""
        raise NotImplementedError

    def act(self, view: PrefixView) -> list[int]:
        if self.out_of_budget(view):
            return []
        table = branch_table(view)
        pulls = {b: info.pulls for b, info in table.items()}
        pulls[NEW_BRANCH] = len(table)
        used = {b: 0 for b in table}
        total = max(1, view.attempts)
        self.prepare(view, table)
        batch: list[int] = []
        roots = 0
        while len(batch) < view.workers:
            arms = [b for b, info in table.items() if used[b] < len(info.open)]
            if roots < view.root_slots:
                arms.append(NEW_BRANCH)
            if not arms:
                break
            arm = max(arms, key=lambda a: (self.index(a, pulls[a], total), -a))
            if arm == NEW_BRANCH:
                batch.append(ROOT)
                roots += 1
            else:
                batch.append(table[arm].open[used[arm]])
                used[arm] += 1
            pulls[arm] += 1
            total += 1
        return batch


class UCBPolicy(BranchBandit):
    """UCB1 over branches; opening a new branch is one more arm.

    Reward of a pull = the normalised improvement of the branch's best score it brings, so a
    branch's summed reward telescopes to ``g_b = clip((best_b - baseline) / scale, 0, 1)``
    (``scale`` = largest |score - baseline| revealed). Index of branch ``b`` with ``n_b``
    revealed nodes after ``t`` attempts: ``g_b / n_b + c * sqrt(2 ln t / n_b)``. The new-branch
    arm's mean is the average head gain over opened branches, its pulls the number of branches;
    never pulled, its index is infinite (the first round opens branches). Pulling a branch
    selects its best legal node (valid first, higher score, newer). Stops after ``rounds``
    decision rounds or ``patience`` rounds without a new best score.

    Args:
        c: exploration constant; default 0.5 + 1.5 * beta (0.5 at beta 0, 2.0 at beta 1).
        rounds: round budget; default round(8 + 32 * beta).
        patience: rounds without improvement before stopping; default round(2 + 6 * beta).
    Source: Auer, Cesa-Bianchi & Fischer, "Finite-time Analysis of the Multiarmed Bandit
    Problem" (Machine Learning 47, 2002), UCB1, with each branch of the discovery tree as an arm.
    """

    name = "ucb"

    def __init__(self, c: float | None = None, rounds: int | None = None, patience: int | None = None):
        super().__init__(rounds=rounds, patience=patience)
        check_params(c=(c, 0))
        self.c = c
        self.means: dict[int, float] = {}

    def exploration(self) -> float:
        return self.c if self.c is not None else interpolate(0.5, 2.0, self.beta)

    def prepare(self, view: PrefixView, table: dict[int, BranchInfo]) -> None:
        scale = score_scale(view)
        heads = [gain(info.head.score, view, scale) for info in table.values()]
        self.means = {b: gain(info.best, view, scale) / max(1, info.pulls) for b, info in table.items()}
        self.means[NEW_BRANCH] = sum(heads) / len(heads) if heads else 0.0

    def index(self, arm: int, pulls: int, total: int) -> float:
        if pulls == 0:
            return math.inf
        bonus = self.exploration() * math.sqrt(2.0 * math.log(max(total, 1)) / pulls)
        return self.means[arm] + bonus
