"""The coverage recorder: a behaviour policy whose worlds answer many policies' requests."""

from __future__ import annotations

import math

import numpy as np

from dream_gym.policies.base import BasePolicy, BatchSlots, BranchInfo, branch_table
from dream_gym.policy import RunContext
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import NodeView, PrefixView


class CoveragePolicy(BasePolicy):
    """Grows a tree that mixes depth and breadth at random (seeded), for replay to run on.

    Replay answers only what the recording run tried, so a world recorded by one policy answers
    that policy's requests and few of the others': greedy's own worlds are single deep chains,
    OpenEvolve's are wide and shallow. This recorder tries a bit of everything each round, so
    that the requests of policies that go deep (greedy), wide (hyperband, stagnation) and
    anywhere (OpenEvolve's sampling) find recorded children (docs/concepts/recorders.md).

    Each branch draws its own traits when it first appears, from the run's seed and its number:
    a deepening probability ``p`` (uniform in ``deepen``) and a depth preference ``λ`` (uniform
    in ``depth``). Each round draws the share ``q`` of slots that open new branches (uniform in
    ``widen``). Each slot of a batch then:

    * with probability ``q`` (and while the root has slots) opens a new branch;
    * else draws a branch, better branches more often (weight ``1 + favour · r``, ``r`` the
      branch's rank by best score, 0 for the worst, 1 for the best), and with the branch's ``p``
      *deepens* it: selects its best improved leaf (a revealed node without children whose score
      beats its parent's, or that repaired a failed parent: where a greedy policy goes next);
    * otherwise, or when the branch has no improved leaf, continues a random open node of the
      branch with weight ``exp(λ · depth / deepest)``: ``λ > 0`` prefers the branch's deep nodes,
      ``λ < 0`` its shallow ones; failed nodes are among them, so repair attempts are recorded too.

    A slot that finds nothing (every open node already in the batch) opens a branch if it can.
    The recorder never stops by itself while anything is open: the recording command's budget
    (``--rounds``, ``--max-attempts``, ``--budget``) ends the run, or ``rounds`` when given.
    The draws of round k come from (seed, k), so a resumed run records what an uninterrupted
    one would.

    Args (a range is a pair, or on the command line ``--policy-arg deepen=0.2,0.9``):
        deepen: range of the per-branch deepening probability; default (0.2, 0.9).
        depth: range of the per-branch depth preference λ; default (-1.5, 2.5).
        widen: range of the per-round share of slots that open a branch; default (0.05, 0.3).
        favour: the best branch is drawn 1 + favour times as often as the worst; default 4.
        rounds: stop after this many rounds (default: never by itself).
    """

    name = "coverage"

    def __init__(
        self,
        deepen: tuple[float, float] | str = (0.2, 0.9),
        depth: tuple[float, float] | str = (-1.5, 2.5),
        widen: tuple[float, float] | str = (0.05, 0.3),
        favour: float = 4.0,
        rounds: int | None = None,
    ):
        super().__init__()
        self.deepen = _range("deepen", deepen, 0.0, 1.0)
        self.depth = _range("depth", depth, -math.inf, math.inf)
        self.widen = _range("widen", widen, 0.0, 1.0)
        if not favour >= 0:
            raise ValueError(f"favour must be >= 0, got {favour}")
        self.favour = float(favour)
        self.rounds = rounds
        self.seed = 0
        self._traits: dict[int, tuple[float, float]] = {}

    def reset(self, context: RunContext) -> None:
        super().reset(context)
        self.seed = int(context.seed) % 2**63
        self._traits = {}

    def traits(self, branch: int) -> tuple[float, float]:
        """(deepening probability, depth preference) of ``branch``: a function of (seed, branch)."""
        if branch not in self._traits:
            rng = np.random.default_rng([self.seed, 1, branch])
            self._traits[branch] = (float(rng.uniform(*self.deepen)), float(rng.uniform(*self.depth)))
        return self._traits[branch]

    def act(self, view: PrefixView) -> list[int]:
        if self.rounds is not None and view.rounds >= self.rounds:
            return []
        rng = np.random.default_rng([self.seed, 2, view.rounds])
        widen = float(rng.uniform(*self.widen))
        table = branch_table(view)
        weights = _branch_weights(table, self.favour)
        leaves = _leaves(view)
        batch = BatchSlots(view)
        for _ in range(view.workers):
            pick = None
            if not (batch.roots_left and (not table or rng.random() < widen)):
                pick = self._continue(view, table, weights, leaves, batch.taken, rng)
            if pick is None and batch.roots_left:
                pick = ROOT
            if pick is None:
                break
            batch.add(pick)
        return batch.picks

    def _continue(self, view: PrefixView, table: dict[int, BranchInfo], weights: dict[int, float],
                  leaves: set[int], taken: set[int], rng: np.random.Generator) -> int | None:
        """A node that continues a branch drawn by weight (None when no branch has one left)."""
        live = [b for b, info in table.items() if any(i not in taken for i in info.open)]
        if not live:
            return None
        chances = np.array([weights[b] for b in live])
        branch = live[int(rng.choice(len(live), p=chances / chances.sum()))]
        open_ids = [i for i in table[branch].open if i not in taken]  # best first (branch_table's order)
        p_deepen, preference = self.traits(branch)
        if rng.random() < p_deepen:  # under "any" the best improved node again, as greedy re-selects it
            improved = [i for i in open_ids if (i in leaves or view.frontier_rule == "any")
                        and _improved(view.nodes[i])]
            if improved:
                return improved[0]
        nodes = [view.nodes[i] for i in open_ids]
        deepest = max(n.depth for n in nodes)
        chances = np.array([math.exp(preference * n.depth / deepest) for n in nodes])
        return nodes[int(rng.choice(len(nodes), p=chances / chances.sum()))].id


def _improved(node: NodeView) -> bool:
    """A valid node that beats its parent, or repaired a parent without a score."""
    return node.score is not None and (node.delta_parent is None or node.delta_parent > 0)


def _leaves(view: PrefixView) -> set[int]:
    """The revealed nodes without a revealed child."""
    parents = {n.parent for n in view.nodes if n.parent is not None}
    return {n.id for n in view.nodes if n.id not in parents}


def _branch_weights(table: dict[int, BranchInfo], favour: float) -> dict[int, float]:
    """1 + favour · (rank of the branch's best score in [0, 1]; a tie ranks the older branch higher)."""
    def worst_first(branch: int) -> tuple[bool, float, int]:
        best = table[branch].best
        return best is not None, -math.inf if best is None else best, -branch

    order = sorted(table, key=worst_first)
    span = max(1, len(order) - 1)
    return {b: 1.0 + favour * rank / span for rank, b in enumerate(order)}


def _range(label: str, value: tuple[float, float] | str, lowest: float, highest: float) -> tuple[float, float]:
    """A (low, high) pair from a pair or a "low,high" string, checked to lie in [lowest, highest]."""
    try:
        parts = value.split(",") if isinstance(value, str) else list(value)
        low, high = (float(part) for part in parts)
    except (TypeError, ValueError):
        raise ValueError(f"{label} must be a range low,high, got {value!r}") from None
    if not lowest <= low <= high <= highest:
        raise ValueError(f"{label} must be a range low <= high within [{lowest:g}, {highest:g}], got {value!r}")
    return low, high
