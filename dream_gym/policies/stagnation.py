"""Stagnation-aware branch policy driven by failure classes (Reinforcement Dreaming)."""

from __future__ import annotations

from dream_gym.policies.base import BranchInfo, BudgetedPolicy, branch_table, check_params, interpolate
from dream_gym.policy import RunContext
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import NodeView, PrefixView


class StagnationPolicy(BudgetedPolicy):
    """Refine each live branch; close branches on hard failures, retry repairable ones.

    A branch's *tip* is its most recently revealed node. Each round:

    * a branch whose tip failed with ``fail_class == "hard"`` is closed for good;
    * a branch whose tip failed otherwise (``"repairable"`` or unclassified) is retried by
      selecting the failed tip (its recorded child is the repair attempt; if the tip has
      none, the branch's best legal node) while the run of consecutive failures ending at
      the tip is at most ``retries``; one more closes it;
    * a branch whose tip is valid continues from its best legal node;
    * a branch with no legal node left is dead (the record has nothing more there).

    Every live branch gets one selection per round; spare workers open new branches from the
    root while fewer than ``max_branches`` were opened, then take further legal nodes of live
    branches (``any`` rule). It stops when every branch is closed or dead and no branch may
    be opened, after ``patience`` rounds without a new best score, or after ``rounds`` rounds.

    Args:
        retries: repairable failures in a row a branch may retry; default round(1 + 2 * beta).
        patience: rounds without improvement before stopping; default round(2 + 6 * beta).
        max_branches: branches to open in total; default max(1, round(W * (1 + 3 * beta))).
        rounds: round budget; default round(8 + 32 * beta).
    Source: the failure classification of Reinforcement Dreaming (repairable = syntax/shape/
    resource/naming errors, hard = sustained algorithmic failure), used as a branch-pruning rule with stagnation (no-improvement) stopping.
    """

    name = "stagnation"

    def __init__(
        self,
        retries: int | None = None,
        patience: int | None = None,
        max_branches: int | None = None,
        rounds: int | None = None,
    ):
        super().__init__(rounds=rounds, patience=patience)
        check_params(retries=(retries, 0), max_branches=(max_branches, 1))
        self.retries = retries
        self.max_branches = max_branches
        self.closed: set[int] = set()

    def reset(self, context: RunContext) -> None:
        super().reset(context)
        self.closed = set()

    def failure_run(self, view: PrefixView, tip: NodeView) -> int:
        """Consecutive failed nodes ending at ``tip``, walking up the parent chain."""
        count, node = 0, tip
        while node.parent is not None and node.score is None:
            count += 1
            node = view.nodes[node.parent]
        return count

    def choice(self, view: PrefixView, info: BranchInfo) -> int | None:
        """The node that continues a branch, or None after closing it (or when it is dead)."""
        if info.branch in self.closed:
            return None
        tip = info.tip
        retries = self.retries if self.retries is not None else round(interpolate(1, 3, self.beta))
        if tip.score is None:
            if tip.fail_class == "hard" or self.failure_run(view, tip) > retries:
                self.closed.add(info.branch)
                return None
            if tip.id in info.open:
                return tip.id
        return info.open[0] if info.open else None

    def act(self, view: PrefixView) -> list[int]:
        if self.out_of_budget(view):
            return []
        max_branches = self.max_branches
        if max_branches is None:
            max_branches = max(1, round(view.workers * interpolate(1, 4, self.beta)))
        table = branch_table(view)
        batch: list[int] = []
        live: list[BranchInfo] = []
        for info in table.values():
            pick = self.choice(view, info)
            if pick is not None:
                live.append(info)
                if len(batch) < view.workers:
                    batch.append(pick)
        opens = min(view.root_slots, max(0, max_branches - view.n_branches), view.workers - len(batch))
        batch += [ROOT] * opens
        if view.frontier_rule == "any":  # spare workers: more legal nodes of live branches
            for info in live:
                for node_id in info.open:
                    if len(batch) >= view.workers:
                        break
                    if node_id not in batch and info.tip.score is not None:
                        batch.append(node_id)
        return batch
