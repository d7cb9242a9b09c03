"""``MacroReplayEnv``: one replay episode at a time over a pool of worlds, with macro actions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np
from gymnasium import spaces

from dream_gym.replay.objectives import ValueFn, replay_value
from dream_gym.replay.settings import ReplaySettings
from dream_gym.replay.view import PrefixView
from dream_gym.rl.discrete import discrete_action
from dream_gym.rl.features import MACRO_FEATURES, FeatureSet
from dream_gym.rl.macro import MACRO_ACTIONS, batch_for, macro_masks
from dream_gym.rl.pool_episodes import PoolEpisodes, WorldRef
from dream_gym.rl.pool_settings import PoolKwargs, pool_signature


@pool_signature
class MacroReplayEnv(PoolEpisodes):
    """Replay over a pool of worlds with :data:`MACRO_ACTIONS` and :func:`view_features`.

    ## Description
    Each ``reset`` draws a world from the pool with the env's seeded ``np_random`` (or takes
    ``options={"world": i}``) and a beta (fixed, or drawn from ``betas``; ``options={"beta": b}``
    overrides), then plays a :class:`~dream_gym.replay.session.ReplaySession`.

    ## Action Space
    ``Discrete(len(MACRO_ACTIONS))``. Every action is valid: one whose batch would be empty
    (masked by :meth:`action_masks`) stops the episode, as "stop" does. A value that is no element
    of the space (a negative index, a float, a text) is a ValueError.

    ## Observation Space
    ``Box(-1, 1, (N_FEATURES,), float32)``: the :class:`FeatureSet` (default
    :data:`MACRO_FEATURES`, computed from the prefix view only).

    ## Rewards
    The change of ``value_fn`` (default :func:`replay_value`, the replay score V), 0 before the
    first step, so an episode's rewards sum to its value.

    ## Episode End
    Terminated on stop (or a masked action) or when nothing is left to reveal; truncated at
    ``max_rounds``.

    ## Info
    ``world`` (id), ``beta``, ``replay_score`` (V so far) and ``batch`` (the ids the macro
    selected); the current view is ``env.view`` (not in ``info``: SB3's vector envs deep-copy
    infos every step, and views hold read-only mappings).

    ## Arguments
    ``worlds`` (World objects or references), ``workers`` (W for every world, default :data:`~dream_gym.replay.settings.STANDARD_WORKERS`),
    ``beta`` (a fixed budget preference, or a sequence to draw from per episode), ``beta1``,
    ``beta2`` (V's coefficients), ``max_rounds`` (K2, default none), ``features``, ``value_fn``.
    The replay settings may come as one value instead, ``settings=ReplaySettings(...)`` (its
    fields left at their defaults count as not given; a keyword that gives one of its fields
    another value is a ValueError): :mod:`dream_gym.rl.pool_settings`.

    ## Version History
    * v0 (unreleased): 2026-12 ``settings``, ``features`` and ``value_fn`` arguments; 2026-11 initial version.
    """

    def __init__(
        self,
        worlds: Sequence[WorldRef],
        *,
        features: FeatureSet = MACRO_FEATURES,
        value_fn: ValueFn = replay_value,
        settings: ReplaySettings | None = None,
        **replay: Unpack[PoolKwargs],
    ):
        self._init_pool(worlds, settings, replay)
        self.features, self.value_fn = features, value_fn
        self.action_space = spaces.Discrete(len(MACRO_ACTIONS))
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(features.size,), dtype=np.float32)
        self.view: PrefixView | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self.view = self._start_episode(seed, options).view()
        return self.features.from_view(self.view), self._info([])

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.session is None or self.view is None:
            raise RuntimeError("call reset() before step()")
        session = self.session
        batch = batch_for(self.view, discrete_action(self.action_space, action))  # a masked action gives [] and stops
        outcome = session.step(batch)
        self.view = session.view()
        return self.features.from_view(self.view), self._reward(), outcome.terminated, outcome.truncated, \
            self._info(batch)

    def action_masks(self) -> np.ndarray:
        if self.view is None:
            raise RuntimeError("call reset() before action_masks()")
        return macro_masks(self.view)
