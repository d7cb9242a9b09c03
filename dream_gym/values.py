"""Episode values: what the vector envs and the macro envs reward.

A value function (Jumanji-style, passed to the envs as ``value_fn=``) maps :class:`Progress`
(per-episode arrays, or scalars for a single env) to the episode's value so far; each step's
reward is the change it causes, starting from 0 before the first step, so an episode's rewards
sum to its final value. The default :func:`replay_value` is the replay score V of SPEC §4
(``dream_gym.score.replay_score``) written for arrays; a beta-conditioned training objective is
another value function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Progress:
    """An episode's progress: best q revealed, attempts N, rounds k, and its beta/beta1/beta2."""

    best_q: Any
    attempts: Any
    rounds: Any
    beta: Any
    beta1: float
    beta2: float


ValueFn = Callable[[Progress], Any]


def replay_value(progress: Progress) -> Any:
    """V = best q - beta1 * N + beta2 * N / max(1, k): ``score.replay_score`` on arrays (the same
    operations in the same order, so the same bits; tests/test_vector_replay.py pins the two)."""
    p = progress
    return p.best_q - p.beta1 * p.attempts + p.beta2 * p.attempts / np.maximum(1, p.rounds)
