"""Reveal rules: which revealed nodes a batch may select, what a selection reveals, and what
reaching a node costs — one interface, used by replay, the oracle and the online loop.

What every rule shares (the mechanics of replay, fixed):

* a selection reveals the selected node's earliest-created unrevealed recorded child, so the
  revealed children of a node are always a prefix of its recorded children
  (:func:`revealed_child`);
* the root opens branches: a batch may hold it up to ``min(W, unrevealed root children)``
  times (:func:`root_slots`);
* a non-root node appears at most once per batch, and only while the rule keeps it open.

What a rule decides is one number per node: how many rounds in a row a revealed non-root node
with ``recorded`` recorded children may be selected (one child revealed each time) before it
leaves the frontier for good — :meth:`RevealRule.selections`. The rest follows from it:

* **legality**: a revealed non-root node with ``revealed`` revealed children is on the
  frontier iff ``revealed < selections(recorded)`` (:meth:`RevealRule.is_open`). Online the
  future is not recorded yet: ``recorded`` is :data:`UNRECORDED` there;
* **the oracle's cost model**: the child of creation rank ``j`` under a non-root node is
  reachable iff ``j < selections(children of the node)``, and costs ``j + 1`` attempts and
  ``j + 1`` rounds below it; a root child of rank ``j`` costs ``j + 1`` attempts and
  ``ceil((j + 1) / W)`` rounds (:meth:`RevealRule.edge_costs`).

A node enters the frontier once (when it is revealed) and never comes back after leaving it,
which is what lets replay keep the frontier as an ascending list.

The two rules (:data:`REVEAL_RULES`): ``"leaves"``, the paper's and the default (a non-root node
is legal while it is a leaf of the revealed tree: it reveals its first child only), and
``"any"`` (any revealed node with an unrevealed recorded child, for imported non-chain worlds).
The compiled kernels of :mod:`dream_gym.replay.vector`, :mod:`dream_gym.replay.vector_engine` and the env
engine (:mod:`dream_gym.replay.engine`) keep their own loops over these two; ``tests/test_reveal_rule_conformance.py`` pins every implementation to this one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ROOT = 0
#: The recorded children of a node whose future is not recorded yet (online): unbounded.
UNRECORDED = math.inf


def revealed_child(revealed: int) -> int:
    """The creation rank, among its parent's recorded children, of the child the next selection
    of a node with ``revealed`` revealed children reveals (the earliest-created unrevealed one)."""
    return revealed


def root_slots(workers: int, unrevealed_root_children: float) -> int:
    """How many times the root may appear in the next batch (online: ``UNRECORDED`` children)."""
    return int(min(workers, unrevealed_root_children))


@dataclass(frozen=True)
class RevealRule:
    """A frontier rule: how often a revealed non-root node may be selected (see the module doc).

    Subclasses set ``name`` and ``summary`` and define :meth:`selections`; everything else is
    derived from it.
    """

    name: str
    summary: str

    def selections(self, recorded: float) -> float:
        """Rounds in a row a revealed non-root node with ``recorded`` recorded children may be
        selected; at most ``recorded`` (0 for a node without a recorded child)."""
        raise NotImplementedError

    def is_open(self, revealed: int, recorded: float) -> bool:
        """Whether a revealed non-root node with ``revealed`` of its ``recorded`` children
        revealed is on the frontier."""
        return revealed < self.selections(recorded)

    def why_closed(self, obs_id: int, revealed: int) -> str:
        """Why revealed non-root id ``obs_id`` (with ``revealed`` revealed children) is off the
        frontier, from revealed facts only: when the rule would close it whatever the record
        holds, that is the reason, and the words must not tell whether more children exist."""
        if revealed >= self.selections(UNRECORDED):
            return (
                f"id {obs_id} is not a leaf of the revealed tree (frontier rule {self.name!r}; "
                "a world or env with frontier='any' allows it)"
            )
        return f"id {obs_id} has no unrevealed recorded child (the original run did not continue there)"

    def selection_limits(self, recorded: np.ndarray) -> np.ndarray:
        """:meth:`selections` of every entry of an int array (evaluated once per distinct value)."""
        values, inverse = np.unique(np.asarray(recorded, dtype=np.int64), return_inverse=True)
        limits = np.array([self.selections(int(v)) for v in values], dtype=np.int64)
        return limits[inverse].reshape(np.shape(recorded))

    def edge_costs(
        self, rank: np.ndarray, parent_children: np.ndarray, from_root: np.ndarray, workers: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The oracle's cost model, per edge (node -> its parent), as arrays over nodes:
        (attempts, rounds, reachable) of revealing the node once its parent is revealed.

        ``rank``: the node's creation rank among its parent's children; ``parent_children``: how
        many recorded children its parent has; ``from_root``: whether its parent is the root.
        Revealing it needs its earlier siblings too (``rank + 1`` reveals); the root reveals up
        to W of them a round, any other node one a round, and only ``selections`` of them."""
        attempts = rank + 1
        rounds = np.where(from_root, (rank + workers) // workers, attempts)
        reachable = from_root | (rank < self.selection_limits(parent_children))
        return attempts, rounds, reachable


@dataclass(frozen=True)
class LeavesRule(RevealRule):
    """The paper's rule: a non-root node is legal while it is a leaf of the revealed tree."""

    def selections(self, recorded: float) -> float:
        return min(recorded, 1)


@dataclass(frozen=True)
class AnyRule(RevealRule):
    """The wider rule: any revealed node with an unrevealed recorded child is legal."""

    def selections(self, recorded: float) -> float:
        return recorded


#: The reveal rules by name (a world's ``frontier``); the first is the default.
REVEAL_RULES: dict[str, RevealRule] = {
    "leaves": LeavesRule("leaves", "a non-root node is legal while it is a leaf of the revealed tree (paper)"),
    "any": AnyRule("any", "any revealed node with an unrevealed recorded child is legal"),
}
DEFAULT_RULE = next(iter(REVEAL_RULES))


def reveal_rule(name: str) -> RevealRule:
    """The rule called ``name``, or a ValueError naming the known ones."""
    try:
        return REVEAL_RULES[name]
    except (KeyError, TypeError):
        raise ValueError(f"frontier must be one of {tuple(REVEAL_RULES)}, got {name!r}") from None


__all__ = ["DEFAULT_RULE", "REVEAL_RULES", "ROOT", "UNRECORDED", "AnyRule", "LeavesRule", "RevealRule",
           "reveal_rule", "revealed_child", "root_slots"]
