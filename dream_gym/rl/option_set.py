"""Options: a meta-controller over the built-in heuristics' proposals.

The macro actions (:mod:`dream_gym.rl.macro`) are fixed rules of one round; the heuristics
(Hyperband's brackets, stagnation's branch closing, the bandits' arm choice) carry state over
rounds that no single macro rule reproduces. An *option* policy's action picks, each round,
whose batch to run: stop, or the batch one of :data:`OPTION_POLICIES` proposes on the view.

:class:`OptionSet` holds one instance of every option policy. Each round it calls every one of
them exactly once on the current view (:meth:`OptionSet.propose`), whichever batch was run the
round before, so each heuristic's state follows the real history of the episode (Hyperband,
say, counts the refinements it proposed, not only those that ran; it is still a function of the
prefix view alone). The observation is the 22 macro features plus, per option, the width of its
proposal and its share of new branches (:func:`option_features`). An empty proposal (the
heuristic would stop) is masked; as for the macro actions every action is valid, and a masked
one stops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dream_gym.policies import make_policy
from dream_gym.policy import Policy, RunContext, batch_from
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import PrefixView
from dream_gym.rl.features import FEATURE_NAMES, view_features

OPTION_POLICIES: tuple[str, ...] = ("fixed", "greedy", "hyperband", "stagnation", "ucb", "puct", "shinka",
                                    "openevolve")
"""The built-ins an option policy chooses among (``random`` is left out: its batches are noise)."""
OPTION_STOP = 0
N_OPTION_ACTIONS = 1 + len(OPTION_POLICIES)
OPTION_FEATURE_NAMES: tuple[str, ...] = (
    *FEATURE_NAMES,
    *(f"{name}_{part}" for name in OPTION_POLICIES for part in ("width", "new")),
)
"""The macro features, then per option: its proposal's size / W and its root selections / W."""
N_OPTION_FEATURES = len(OPTION_FEATURE_NAMES)


@dataclass(frozen=True)
class Proposals:
    """What every option proposes on one view: the batches (in :data:`OPTION_POLICIES` order)."""

    batches: tuple[list[int], ...]

    def masks(self) -> np.ndarray:
        """Boolean mask over the option actions: stop always, an option iff its batch is not empty."""
        return np.array([True, *(bool(b) for b in self.batches)], dtype=bool)

    def batch(self, action: int) -> list[int]:
        """The batch of an action ([] for stop; an option's proposal, [] when it has none)."""
        action = int(action)
        return [] if action == OPTION_STOP else list(self.batches[action - 1])


class OptionSet:
    """One instance of each option policy, reset per episode and asked once per round.

    Args:
        names: the built-ins to propose batches (default :data:`OPTION_POLICIES`; a model is
            trained and run with one fixed list).
    """

    def __init__(self, names: tuple[str, ...] = OPTION_POLICIES):
        self.names = tuple(names)
        self.policies: list[Policy] = [make_policy(name) for name in self.names]

    def reset(self, context: RunContext) -> None:
        for policy in self.policies:
            policy.reset(context)

    def propose(self, view: PrefixView) -> Proposals:
        """Every option's batch on this view. Call once per round: the heuristics count rounds."""
        return Proposals(tuple(batch_from(policy.act(view)) for policy in self.policies))


def option_features(view: PrefixView, proposals: Proposals) -> np.ndarray:
    """The option env's observation (:data:`OPTION_FEATURE_NAMES`), float32 in [0, 1] for the
    added entries: the macro features of the view, then per option the size of its proposal and
    its root selections, both over W."""
    w = max(1, view.workers)
    extra = []
    for batch in proposals.batches:
        extra += [min(1.0, len(batch) / w), min(1.0, sum(1 for i in batch if i == ROOT) / w)]
    return np.concatenate([view_features(view), np.asarray(extra, dtype=np.float32)])


__all__ = ["N_OPTION_ACTIONS", "N_OPTION_FEATURES", "OPTION_FEATURE_NAMES", "OPTION_POLICIES", "OPTION_STOP",
           "OptionSet", "Proposals", "option_features"]
