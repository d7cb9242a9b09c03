"""UCB1 over branches, plus the branch bookkeeping shared by the branch-level baselines.

A *branch* is the subtree under one child of the root (``NodeView.branch``). The bandit
policies here (UCB, PUCT) and the branch schedulers (Hyperband, stagnation) read a
:class:`BranchInfo` table built from the prefix view only: each branch's head, best score,
number of revealed nodes (its pulls), newest node and its legal (frontier) nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dream_gym.policies.base import BasePolicy, interpolate, score_key
from dream_gym.policy import RunContext
from dream_gym.replay import ROOT
from dream_gym.view import NodeView, PrefixView

NEW_BRANCH = -1  # the arm "open one more branch from the root"


@dataclass
class BranchInfo:
    """What the view says about one branch."""

    branch: int
    head: NodeView
    tip: NodeView  # the most recently revealed node of the branch
    best: float | None = None  # best valid score in the branch
    pulls: int = 0  # revealed nodes in the branch (each one attempt spent on it)
    open: list[int] = field(default_factory=list)  # legal ids, best first (valid, score, newest)


def branch_table(view: PrefixView) -> dict[int, BranchInfo]:
    """One :class:`BranchInfo` per opened branch, in one pass over the revealed nodes."""
    table: dict[int, BranchInfo] = {}
    for node in view.nodes[1:]:
        if node.branch is None:
            continue
        info = table.get(node.branch)
        if info is None:
            info = table[node.branch] = BranchInfo(node.branch, head=node, tip=node)
        info.pulls += 1
        if node.id > info.tip.id:
            info.tip = node
        if node.score is not None and (info.best is None or node.score > info.best):
            info.best = node.score
    legal = [view.nodes[i] for i in view.frontier if i != ROOT]
    legal.sort(key=lambda n: (*score_key(n), n.id), reverse=True)
    for node in legal:
        if node.branch is not None and node.branch in table:
            table[node.branch].open.append(node.id)
    return table


def score_scale(view: PrefixView) -> float:
    """A positive scale for score differences: the largest |score - baseline| seen (1 if none)."""
    scale = max((abs(n.score - view.baseline_score) for n in view.nodes if n.score is not None), default=0.0)
    return scale if scale > 0 else 1.0


def gain(best: float | None, view: PrefixView, scale: float) -> float:
    """Normalised improvement of a score over the baseline, clipped to [0, 1]."""
    if best is None:
        return 0.0
    return min(1.0, max(0.0, (best - view.baseline_score) / scale))


class Patience:
    """Counts decision rounds without a new best revealed score (one ``update`` per ``act``)."""

    def __init__(self) -> None:
        self.best: float | None = None
        self.stale = 0

    def update(self, view: PrefixView) -> int:
        best = view.best_score()
        if best is not None and (self.best is None or best > self.best):
            self.best, self.stale = best, 0
        elif view.rounds:
            self.stale += 1
        return self.stale


def default_round_budget(beta: float) -> int:
    """The bandits' own round budget: 8 rounds at beta 0 up to 40 at beta 1."""
    return round(interpolate(8, 40, beta))


def default_patience(beta: float) -> int:
    """Rounds without a new best before a bandit stops: 2 at beta 0 up to 8 at beta 1."""
    return round(interpolate(2, 8, beta))


class BranchBandit(BasePolicy):
    """Shared loop of the branch bandits: score every arm, fill the batch greedily by index.

    Arms are the opened branches with a legal node left (pulling one selects its best legal
    node) and ``NEW_BRANCH`` (selecting the root) while the root may open branches. After
    each pick the arm's pull count is raised by one ("virtual pull") before the next slot, so
    a batch spreads over arms the way sequential play would.
    """

    name = "branch-bandit"

    def __init__(self, rounds: int | None = None, patience: int | None = None):
        super().__init__()
        self.rounds = rounds
        self.patience = patience
        self._patience = Patience()

    def reset(self, context: RunContext) -> None:
        super().reset(context)
        self._patience = Patience()

    def prepare(self, view: PrefixView, table: dict[int, BranchInfo]) -> None:
        """Compute per-round quantities (means, priors) once before the batch is filled."""

    def index(self, arm: int, pulls: int, total: int) -> float:
        """The arm's selection index given its (virtual) pull count and the total attempts."""
        raise NotImplementedError

    def act(self, view: PrefixView) -> list[int]:
        stale = self._patience.update(view)
        patience = self.patience if self.patience is not None else default_patience(self.beta)
        budget = self.rounds if self.rounds is not None else default_round_budget(self.beta)
        if stale >= patience or view.rounds >= budget:
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
