"""Helpers shared by the built-in policies.

A *branch* is the subtree under one child of the root (``NodeView.branch``). The bandit
policies (UCB, PUCT) and the branch schedulers (Hyperband, stagnation) read a
:class:`BranchInfo` table built from the prefix view only: each branch's head, best score,
number of revealed nodes (its pulls), newest node and its legal (frontier) nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.random  # noqa: F401 - numpy loads it on first use, which a policy episode cannot (it reads no file)

from dream_gym.policy import RunContext
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.settings import DEFAULT_BETA
from dream_gym.replay.view import NodeView, PrefixView


class BasePolicy:
    """Keeps the run context; subclasses implement ``act``."""

    name = "base"

    def __init__(self) -> None:
        self.context: RunContext | None = None

    def reset(self, context: RunContext) -> None:
        self.context = context

    @property
    def beta(self) -> float:
        return self.context.beta if self.context else DEFAULT_BETA


def open_nodes(view: PrefixView) -> list[NodeView]:
    """The non-root nodes a batch may select."""
    return [view.nodes[i] for i in view.frontier if i != ROOT]


def score_key(node: NodeView) -> tuple[int, float]:
    """Sort key: valid before invalid, then higher score first (use with reverse=True)."""
    return (1, node.score) if node.score is not None else (0, float("-inf"))


def check_params(**given: tuple[Any, ...]) -> None:
    """Each of a built-in's parameters, ``name=(value, least)`` or ``name=(value, least, most)``
    (a value None: its beta-dependent default), within its bounds, else a ValueError naming it:
    ``--policy-arg patience=-5`` replayed as an episode of no attempt."""
    for name, (value, low, *high) in given.items():
        top = high[0] if high else math.inf
        if value is not None and not low <= value <= top:  # NaN fails both
            said = f"in [{low:g}, {top:g}]" if high else f"at least {low:g}"
            raise ValueError(f"{name} must be {said}, got {value!r}")


def interpolate(low: float, high: float, beta: float) -> float:
    """Linear map of the budget preference beta in [0, 1] onto [low, high]."""
    return low + (high - low) * beta


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


class BatchSlots:
    """A batch filled one pick at a time: the picks so far, the root's slots left and the nodes
    taken (a round continues a node once; the root up to its slots)."""

    def __init__(self, view: PrefixView):
        self.picks: list[int] = []
        self.roots_left = view.root_slots
        self.taken: set[int] = set()

    def add(self, pick: int) -> None:
        self.picks.append(pick)
        if pick == ROOT:
            self.roots_left -= 1
        else:
            self.taken.add(pick)


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


class BudgetedPolicy(BasePolicy):
    """A policy that stops on its own: after ``rounds`` decision rounds, or after ``patience``
    rounds without a new best score. Also keeps ``rng``, seeded from the RunContext.

    Args:
        rounds: round budget; default round(8 + 32 * beta).
        patience: rounds without improvement before stopping; default round(2 + 6 * beta).
    """

    def __init__(self, rounds: int | None = None, patience: int | None = None):
        super().__init__()
        check_params(rounds=(rounds, 1), patience=(patience, 1))
        self.rounds = rounds
        self.patience = patience
        self.rng = np.random.default_rng(0)
        self._patience = Patience()

    def reset(self, context: RunContext) -> None:
        super().reset(context)
        self.rng = np.random.default_rng(context.seed)
        self._patience = Patience()

    def out_of_budget(self, view: PrefixView) -> bool:
        """Count this decision's progress; True when the policy should return []."""
        stale = self._patience.update(view)
        patience = self.patience if self.patience is not None else default_patience(self.beta)
        budget = self.rounds if self.rounds is not None else default_round_budget(self.beta)
        return stale >= patience or view.rounds >= budget
