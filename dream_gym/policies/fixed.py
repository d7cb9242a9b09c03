"""The paper's Recursive Fixed Exploration: B branches x D refinements, W at a time."""

from __future__ import annotations

from dream_gym.policies.base import BasePolicy, check_params, interpolate, open_nodes
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import PrefixView


class FixedPolicy(BasePolicy):
    """Open B branches from the root, then refine each branch's newest node until depth D.

    Each round uses up to W workers: first the branches still to open, then the branches
    whose newest open node is shallowest. Stops when B branches reached depth D (or cannot go on).

    Args:
        branches: B; default round(W * (0.5 + beta)) (at least 1).
        depth: D; default round(3 + 7 * beta).
    Source: Dream-RSI's controlled baseline ("Recursive Fixed Exploration"), the fixed
    schedule that the learned policies are compared against.
    """

    name = "fixed"

    def __init__(self, branches: int | None = None, depth: int | None = None):
        super().__init__()
        check_params(branches=(branches, 1), depth=(depth, 1))
        self.branches = branches
        self.depth = depth

    def act(self, view: PrefixView) -> list[int]:
        branches = self.branches or max(1, round(view.workers * (0.5 + self.beta)))
        depth = self.depth or round(interpolate(3, 10, self.beta))
        batch = [ROOT] * min(view.root_slots, max(0, branches - view.n_branches), view.workers)
        newest: dict[int, tuple[int, int]] = {}  # branch -> (depth, id) of its deepest open node
        for node in open_nodes(view):
            if node.branch is not None and node.branch < branches and node.depth < depth:
                if node.branch not in newest or node.depth > newest[node.branch][0]:
                    newest[node.branch] = (node.depth, node.id)
        for _, node_id in sorted(newest.values()):
            if len(batch) >= view.workers:
                break
            batch.append(node_id)
        return batch
