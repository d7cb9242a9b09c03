"""Successive halving over branches, run in Hyperband brackets."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dream_gym.policies.base import BasePolicy, BranchInfo, branch_table
from dream_gym.policy import RunContext
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import PrefixView


@dataclass
class Bracket:
    """One successive-halving run: ``n`` branches, ``r`` refinements each at rung 0."""

    s: int
    n: int
    r: int
    start: int = -1  # index of the first branch this bracket opened
    rung: int = 0
    alive: list[int] | None = None  # None while branches are still being opened
    given: dict[int, int] = field(default_factory=dict)  # refinements given in this rung


def bracket_plan(eta: int, max_bracket: int, brackets: int) -> list[tuple[int, int, int]]:
    """Hyperband's (s, n, r) for the ``brackets`` most exploratory brackets s = s_max, s_max-1, ...

    ``R = eta ** s_max``; bracket ``s`` opens ``n = ceil((s_max + 1) / (s + 1) * eta ** s)``
    branches with ``r = R / eta ** s`` refinements each at rung 0.
    """
    big_r = eta**max_bracket
    plan = []
    for s in range(max_bracket, max(-1, max_bracket - brackets), -1):
        n = math.ceil((max_bracket + 1) / (s + 1) * eta**s)
        plan.append((s, n, max(1, big_r // eta**s)))
    return plan


class HyperbandPolicy(BasePolicy):
    """Successive halving over branches, in Hyperband brackets.

    A bracket ``(s, n, r)`` opens ``n`` branches from the root, then runs rungs
    ``i = 0..s``: every surviving branch gets ``r * eta**i`` more refinements (a refinement
    selects the branch's best legal node; a branch with no legal node is done for the rung),
    then the branches are ranked by their best score (invalid = worst, ties: earlier branch)
    and the top ``max(1, floor(alive / eta))`` survive. While branches are still being opened,
    spare workers refine the opened ones. Brackets run from the most exploratory
    (``s = s_max``: many branches, few refinements) down; the policy stops after the last
    bracket, or when no bracket can open a branch.

    Args:
        eta: the halving rate; default 3 (Hyperband's).
        max_bracket: s_max (``R = eta ** s_max``); default 1 + round(2 * beta).
        brackets: how many brackets to run, from s_max down; default 1 + round(beta * s_max).
    Source: Jamieson & Talwalkar, "Non-stochastic Best Arm Identification and Hyperparameter
    Optimization" (AISTATS 2016, successive halving); Li et al., "Hyperband: A Novel
    Bandit-Based Approach to Hyperparameter Optimization" (JMLR 2018).
    """

    name = "hyperband"

    def __init__(self, eta: int = 3, max_bracket: int | None = None, brackets: int | None = None):
        super().__init__()
        if eta < 2:
            raise ValueError(f"eta must be >= 2, got {eta}")
        self.eta = int(eta)
        self.max_bracket = max_bracket
        self.brackets = brackets
        self._plan: list[Bracket] = []
        self._planned = False

    def reset(self, context: RunContext) -> None:
        super().reset(context)
        self._planned = False

    def _make_plan(self, beta: float) -> None:
        s_max = self.max_bracket if self.max_bracket is not None else 1 + round(2 * beta)
        count = self.brackets if self.brackets is not None else 1 + round(beta * s_max)
        self._plan = [Bracket(s, n, r) for s, n, r in bracket_plan(self.eta, s_max, count)]
        self._planned = True

    def act(self, view: PrefixView) -> list[int]:
        if not self._planned:
            self._make_plan(self.context.beta if self.context else view.beta)
        table = branch_table(view)
        while self._plan:
            bracket = self._plan[0]
            if bracket.start < 0:
                bracket.start = view.n_branches
            quota = bracket.r * self.eta**bracket.rung
            if bracket.alive is None:
                opened = view.n_branches - bracket.start
                if opened < bracket.n and view.root_slots:
                    batch = [ROOT] * min(view.root_slots, bracket.n - opened, view.workers)
                    mine = list(range(bracket.start, view.n_branches))
                    return batch + self._refine(mine, table, bracket, quota, view.workers - len(batch))
                bracket.alive = list(range(bracket.start, bracket.start + opened))
                if not bracket.alive:  # the root cannot open any more branches
                    self._plan.clear()
                    break
            batch = self._refine(bracket.alive, table, bracket, quota, view.workers)
            if batch:
                return batch
            if bracket.rung >= bracket.s:
                self._plan.pop(0)
                continue
            bracket.alive = self.survivors(bracket.alive, table)
            bracket.rung += 1
            bracket.given = {}
        return []

    def survivors(self, alive: list[int], table: dict[int, BranchInfo]) -> list[int]:
        """The top ``max(1, floor(len(alive) / eta))`` branches by best score."""
        keep = max(1, len(alive) // self.eta)
        ranked = sorted(
            alive,
            key=lambda b: (table[b].best is not None, table[b].best or 0.0, -b) if b in table else (False, 0.0, -b),
            reverse=True,
        )
        return sorted(ranked[:keep])

    def _refine(
        self, branches: list[int], table: dict[int, BranchInfo], bracket: Bracket, quota: int, slots: int
    ) -> list[int]:
        batch: list[int] = []
        for b in branches:
            info = table.get(b)
            if info is None:
                continue
            for node_id in info.open:
                if len(batch) >= slots or bracket.given.get(b, 0) >= quota:
                    break
                batch.append(node_id)
                bracket.given[b] = bracket.given.get(b, 0) + 1
        return batch
