"""PUCT over branches: AlphaZero's prior-weighted exploration, priors from branch heads."""

from __future__ import annotations

import math

import numpy as np

from dream_gym.policies.base import NEW_BRANCH, BranchInfo, check_params, gain, interpolate, score_scale
from dream_gym.policies.ucb import BranchBandit
from dream_gym.replay.view import PrefixView


class PUCTPolicy(BranchBandit):
    """PUCT over branches; opening a new branch is one more arm.

    Index of arm ``a`` with ``n_a`` pulls after ``N`` attempts:
    ``Q_a + c_puct * P_a * sqrt(N) / (1 + n_a)``.

    * ``Q_b`` = the branch's best normalised improvement ``clip((best_b - baseline)/scale, 0, 1)``
      (``scale`` = largest |score - baseline| revealed); for the new-branch arm, the mean head
      gain of the opened branches (0 before any).
    * ``P`` = softmax over arms of ``z / temperature``: ``z_b = (head score - baseline)/scale``
      (an invalid head gets -1), ``z_new = 0`` (a fresh branch starts from the baseline).
    * ``n_b`` = revealed nodes of the branch, ``n_new`` = branches opened; within a batch each
      pick adds a virtual pull. Pulling a branch selects its best legal node.

    Stops after ``rounds`` decision rounds or ``patience`` rounds without a new best score.

    Args:
        c_puct: exploration constant; default 0.5 + 2.0 * beta (AlphaZero-style, scaled by beta).
        temperature: softmax temperature of the prior; default 0.25 + 0.75 * beta (higher beta
            = flatter prior = weaker pruning of weak-headed branches).
        rounds: round budget; default round(8 + 32 * beta).
        patience: rounds without improvement before stopping; default round(2 + 6 * beta).
    Source: Silver et al., "A general reinforcement learning algorithm that masters chess,
    shogi and Go through self-play" (Science 2018), the PUCT rule of AlphaZero (after Rosin,
    "Multi-armed bandits with episode context", 2011), with branches as the root's actions.
    """

    name = "puct"

    def __init__(
        self,
        c_puct: float | None = None,
        temperature: float | None = None,
        rounds: int | None = None,
        patience: int | None = None,
    ):
        super().__init__(rounds=rounds, patience=patience)
        check_params(c_puct=(c_puct, 0), temperature=(temperature, 0))
        self.c_puct = c_puct
        self.temperature = temperature
        self.q: dict[int, float] = {}
        self.prior: dict[int, float] = {}

    def constants(self) -> tuple[float, float]:
        c = self.c_puct if self.c_puct is not None else interpolate(0.5, 2.5, self.beta)
        t = self.temperature if self.temperature is not None else interpolate(0.25, 1.0, self.beta)
        return c, max(t, 1e-6)

    def priors(self, view: PrefixView, table: dict[int, BranchInfo]) -> dict[int, float]:
        """Softmax prior over the opened branches and the new-branch arm (sums to 1)."""
        _, temperature = self.constants()
        scale = score_scale(view)
        arms = [*table, NEW_BRANCH]
        z = np.array(
            [
                0.0 if a == NEW_BRANCH
                else -1.0 if table[a].head.score is None
                else (float(table[a].head.score) - view.baseline_score) / scale  # type: ignore[arg-type]
                for a in arms
            ]
        ) / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        return {a: float(v) for a, v in zip(arms, p, strict=True)}

    def prepare(self, view: PrefixView, table: dict[int, BranchInfo]) -> None:
        scale = score_scale(view)
        self.prior = self.priors(view, table)
        self.q = {b: gain(info.best, view, scale) for b, info in table.items()}
        heads = [gain(info.head.score, view, scale) for info in table.values()]
        self.q[NEW_BRANCH] = sum(heads) / len(heads) if heads else 0.0

    def index(self, arm: int, pulls: int, total: int) -> float:
        c, _ = self.constants()
        return self.q[arm] + c * self.prior[arm] * math.sqrt(total) / (1 + pulls)
