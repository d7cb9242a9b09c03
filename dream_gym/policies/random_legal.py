"""Random legal policy: the floor every other policy should beat."""

from __future__ import annotations

import numpy as np

from dream_gym.policies.base import BasePolicy, check_params, interpolate
from dream_gym.policy import RunContext
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import PrefixView


class RandomPolicy(BasePolicy):
    """Each round: stop with probability ``p_stop``, else a random legal batch of random size.

    Args:
        p_stop: probability of stopping each round; default from beta, 0.25 (beta 0) to 0.02
            (beta 1): a higher budget preference is more patient.
    Source: a standard baseline; seeded from the RunContext, so episodes are reproducible.
    """

    name = "random"

    def __init__(self, p_stop: float | None = None):
        super().__init__()
        check_params(p_stop=(p_stop, 0, 1))
        self.p_stop = p_stop
        self.rng = np.random.default_rng(0)

    def reset(self, context: RunContext) -> None:
        super().reset(context)
        self.rng = np.random.default_rng(context.seed)

    def act(self, view: PrefixView) -> list[int]:
        p_stop = self.p_stop if self.p_stop is not None else interpolate(0.25, 0.02, self.beta)
        if view.attempts and self.rng.random() < p_stop:
            return []
        slots = [ROOT] * view.root_slots + [i for i in view.frontier if i != ROOT]
        if not slots:
            return []
        size = int(self.rng.integers(1, min(view.workers, len(slots)) + 1))
        picks = self.rng.choice(len(slots), size=size, replace=False)
        return [slots[int(i)] for i in sorted(picks)]
