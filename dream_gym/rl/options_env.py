"""``OptionsReplayEnv``: replay over a pool of worlds, each round run by one built-in's proposal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np
from gymnasium import spaces

from dream_gym.policy import RunContext
from dream_gym.replay.objectives import ValueFn, replay_value
from dream_gym.replay.settings import ReplaySettings
from dream_gym.replay.view import PrefixView
from dream_gym.rl.discrete import discrete_action
from dream_gym.rl.option_set import N_OPTION_ACTIONS, N_OPTION_FEATURES, OptionSet, Proposals, option_features
from dream_gym.rl.pool_episodes import PoolEpisodes, WorldRef
from dream_gym.rl.pool_settings import PoolKwargs, pool_signature


@pool_signature
class OptionsReplayEnv(PoolEpisodes):
    """Replay over a pool of worlds where each action picks whose batch runs this round.

    ## Description
    As :class:`~dream_gym.rl.MacroReplayEnv` (a world and a beta drawn per episode with the
    env's seeded ``np_random``, or given as ``options={"world": i, "beta": b}``), but the batch of
    a round is the one a built-in policy of :data:`~dream_gym.rl.option_set.OPTION_POLICIES`
    proposes on the view. Every built-in is reset at the episode's start (with a
    :class:`~dream_gym.policy.RunContext` of the view and a seed drawn from ``np_random``) and
    asked once per round, whichever proposal ran.

    ## Action Space
    ``Discrete(1 + len(OPTION_POLICIES))``: 0 stops, i runs option i's proposal. Every action is
    valid: one whose proposal is empty (masked by :meth:`action_masks`) stops the episode. A value
    that is no element of the space (a negative index, a float, a text) is a ValueError.

    ## Observation Space
    ``Box(-1, 1, (38,), float32)``: the 22 macro features and, per option, its proposal's size
    and root selections over W (:func:`~dream_gym.rl.option_set.option_features`).

    ## Rewards
    The change of ``value_fn`` (default the replay score V), so an episode's rewards sum to it.

    ## Episode End
    Terminated on stop (or a masked action) or when nothing is left to reveal; truncated at
    ``max_rounds``.

    ## Info
    ``world``, ``beta``, ``replay_score`` and ``batch``; the view is ``env.view``.

    ## Arguments
    ``worlds``, ``workers`` (default :data:`~dream_gym.replay.settings.STANDARD_WORKERS`, 4), ``beta`` (fixed or a sequence to draw from),
    ``beta1``, ``beta2``, ``max_rounds``, ``value_fn``, ``settings`` (as for MacroReplayEnv); ``draws``: (W,
    beta1, beta2) settings, one drawn per episode (default: the one given by ``workers``, ``beta1``, ``beta2``).

    ## Version History
    * v0 (unreleased): 2026-12 ``settings`` argument; 2026-12 initial version.
    """

    def __init__(
        self,
        worlds: Sequence[WorldRef],
        *,
        value_fn: ValueFn = replay_value,
        draws: Sequence[tuple[int, float, float]] = (),
        settings: ReplaySettings | None = None,
        **replay: Unpack[PoolKwargs],
    ):
        self._init_pool(worlds, settings, replay, draws)
        self.value_fn = value_fn
        self.action_space = spaces.Discrete(N_OPTION_ACTIONS)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(N_OPTION_FEATURES,), dtype=np.float32)
        self.options = OptionSet()
        self.view: PrefixView | None = None
        self.proposals: Proposals | None = None

    def _observe(self) -> np.ndarray:
        assert self.session is not None
        self.view = self.session.view()
        self.proposals = self.options.propose(self.view) if not self.session.done else Proposals(
            tuple([] for _ in self.options.names))
        return option_features(self.view, self.proposals)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        session = self._start_episode(seed, options)
        self.options.reset(RunContext.from_view(session.view(), seed=int(self.np_random.integers(2**31))))
        return self._observe(), self._info([])

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.session is None or self.proposals is None:
            raise RuntimeError("call reset() before step()")
        session = self.session
        batch = self.proposals.batch(discrete_action(self.action_space, action))  # a masked action gives [] and stops
        outcome = session.step(batch)
        return self._observe(), self._reward(), outcome.terminated, outcome.truncated, self._info(batch)

    def action_masks(self) -> np.ndarray:
        if self.proposals is None:
            raise RuntimeError("call reset() before action_masks()")
        return self.proposals.masks()


__all__ = ["OptionsReplayEnv"]
