"""Greedy best-first: continue from the best-scoring open nodes, stop when progress stalls."""

from __future__ import annotations

from dream_gym.policies.base import BasePolicy, Patience, check_params, interpolate, open_nodes, score_key
from dream_gym.policy import RunContext
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import PrefixView


class GreedyPolicy(BasePolicy):
    """Best-first search over the revealed tree.

    Each round continues from the open nodes of highest valid score, up to W of them; a node
    whose program failed is never continued. It opens new branches from the root while fewer
    than ``min_branches`` are open, and one a round when no open node has a valid score (the
    round's other slots then stay empty). It stops after ``patience`` rounds without a new best
    score.

    Args:
        min_branches: branches to open before exploiting; default 1 + round(beta * (W - 1)).
        patience: rounds without improvement before stopping; default 1 + round(5 * beta).
    Source: best-first search as used by AlphaEvolve-style systems' "exploit" mode.
    """

    name = "greedy"

    def __init__(self, min_branches: int | None = None, patience: int | None = None):
        super().__init__()
        check_params(min_branches=(min_branches, 1), patience=(patience, 1))
        self.min_branches = min_branches
        self.patience = patience
        self._progress = Patience()

    def reset(self, context: RunContext) -> None:
        super().reset(context)
        self._progress = Patience()

    def act(self, view: PrefixView) -> list[int]:
        stale = self._progress.update(view)
        patience = self.patience if self.patience is not None else 1 + round(5 * self.beta)
        if stale >= patience:
            return []
        min_branches = self.min_branches
        if min_branches is None:
            min_branches = 1 + round(interpolate(0, view.workers - 1, self.beta))
        candidates = sorted(open_nodes(view), key=score_key, reverse=True)
        valid = [n.id for n in candidates if n.score is not None]
        batch: list[int] = []
        want_root = view.n_branches < min_branches or not valid
        if want_root and view.root_slots:
            batch += [ROOT] * min(view.root_slots, max(1, min_branches - view.n_branches))
        batch += valid[: view.workers - len(batch)]
        if not batch and view.root_slots:
            batch = [ROOT]
        return batch[: view.workers]
