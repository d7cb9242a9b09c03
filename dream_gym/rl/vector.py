"""``MacroVectorEnv``: N macro-action replay episodes over a pool of worlds, stepped in one call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from dream_gym.envs.vector_episodes import VectorEpisodes, WorldRef, as_world_list
from dream_gym.replay.objectives import ValueFn, replay_value
from dream_gym.replay.settings import ReplaySettings
from dream_gym.replay.vector import NONE, VectorReplay, WorldPool
from dream_gym.rl.discrete import discrete_actions
from dream_gym.rl.features import MACRO_FEATURES, EpisodeParams, FeatureSet
from dream_gym.rl.macro import MACRO_ACTIONS, MacroTable, batch_masks, macro_batches
from dream_gym.rl.pool_settings import PoolKwargs, pool_settings, pool_signature


@pool_signature
class MacroVectorEnv(VectorEpisodes):
    """:class:`~dream_gym.rl.MacroReplayEnv` for N episodes at once, in numpy arrays.

    The same actions (:data:`MACRO_ACTIONS`, every one valid: a masked action stops), features
    (a :class:`FeatureSet`, default :data:`MACRO_FEATURES`), rewards (changes of ``value_fn``,
    default the replay score V), episode ends and pool semantics: each new episode of a sub-env
    draws its world (uniformly from the pool) and its beta (from ``beta``) with the vector env's
    generator, seeded by ``reset(seed=...)``; ``reset(options={"world": w, "beta": b})`` sets
    them instead (scalars or (N,) arrays). Autoreset as Gymnasium 1.x defines it
    (``autoreset_mode``, default NEXT_STEP; SAME_STEP puts the ended episodes' last
    observations and infos in ``info["final_obs"]`` and ``info["final_info"]``, laid out as
    Gymnasium's own vector envs lay them out).

    ``info`` holds ``world`` (pool index of each sub-env's current episode), ``beta`` and
    ``replay_score`` (the value so far). ``action_masks()`` gives (N, len(MACRO_ACTIONS)).
    Every episode is the one a :class:`~dream_gym.rl.MacroReplayEnv` gives for the same world,
    beta and actions (tests/test_rl_vector.py). Its arguments are MacroReplayEnv's (the replay
    keywords ``workers``, ``beta``, ``beta1``, ``beta2``, ``max_rounds`` or ``settings=``,
    ``features``, ``value_fn``), ``num_envs`` and ``autoreset_mode``.
    """

    def __init__(
        self,
        worlds: WorldRef | Sequence[WorldRef],
        num_envs: int = 1,
        *,
        features: FeatureSet = MACRO_FEATURES,
        value_fn: ValueFn = replay_value,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        settings: ReplaySettings | None = None,
        **replay: Unpack[PoolKwargs],
    ):
        pool = pool_settings(self, settings, replay)
        self.betas = np.array(pool.betas)
        # every world of the pool at one W; the beta of an episode replaces the first one's
        self.settings = settings = pool.settings
        self.worlds = as_world_list(worlds)
        self.pool = WorldPool(self.worlds)
        self.replay = VectorReplay(self.pool, num_envs, pool.workers)
        self._init_episodes(num_envs, autoreset_mode, value_fn, settings.beta1, settings.beta2)
        self.workers, self.max_rounds, self.features = pool.workers, settings.max_rounds, features
        self.table = MacroTable.for_workers(self.workers)
        self.single_action_space = spaces.Discrete(len(MACRO_ACTIONS))
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = spaces.Box(-1.0, 1.0, shape=(features.size,), dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self._ranked = np.full((self.num_envs, self.workers), NONE, dtype=np.int64)
        self._obs = np.zeros((self.num_envs, features.size), dtype=np.float32)
        self.reset()

    # -- episodes ----------------------------------------------------------------------
    def _start(self, mask: np.ndarray, options: dict[str, Any]) -> None:
        unknown = sorted(set(options) - {"world", "beta"})
        if unknown:  # ignored, they would look taken
            raise ValueError(f"{type(self).__name__}.reset takes the options 'reset_mask', 'world' (indices of the "
                             f"pool) and 'beta', got {', '.join(map(repr, unknown))}")
        e = np.flatnonzero(mask)
        rng = self.np_random
        drawn = "world" not in options
        if drawn:
            worlds = rng.integers(len(self.pool), size=len(e))
        else:
            given = np.asarray(options["world"])
            if given.dtype.kind not in "iu":  # 1.7 was world 1
                raise ValueError(f"options['world'] holds indices of worlds of the pool, got {options['world']!r}")
            worlds = np.broadcast_to(given.astype(np.int64), (self.num_envs,))[e]
        if "beta" in options:
            betas = np.asarray(options["beta"], dtype=np.float64)
            if not ((betas >= 0.0) & (betas <= 1.0)).all():
                raise ValueError(f"options['beta'] must be in [0, 1], got {options['beta']!r}")
            self.beta[e] = np.broadcast_to(betas, (self.num_envs,))[e]
        elif len(self.betas) > 1:
            self.beta[e] = self.betas[rng.integers(len(self.betas), size=len(e))]
        else:
            self.beta[e] = self.betas[0]
        self.replay.reset(mask, worlds, check=not drawn)
        self._refresh(e)

    def _act(self, actions: Any, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        replay = self.replay
        actions = discrete_actions(self.action_space, actions)
        batch = macro_batches(replay, actions, self._ranked, self.table)
        if not active.all():
            batch[~active] = NONE
        empty = active & (batch[:, 0] == NONE)
        replay.apply(batch)
        self._refresh(None if active.all() else np.flatnonzero(active))
        terminated = empty | (active & replay.exhausted())
        if self.max_rounds is None:
            truncated = np.zeros(self.num_envs, dtype=bool)
        else:
            truncated = active & ~terminated & (replay.rounds >= self.max_rounds)
        return terminated, truncated, {}

    def _refresh(self, rows: np.ndarray | None) -> None:
        """Rank the open nodes and compute the observations of the rows a step or reset changed."""
        self.replay.ranked_open(self.workers, out=self._ranked, rows=rows)
        self.features.from_batch(self.replay, self._params(), self._ranked[:, 0], out=self._obs, rows=rows)

    def _observe(self) -> np.ndarray:
        return self._obs.copy()

    def _params(self) -> EpisodeParams:
        return EpisodeParams(self.beta, self.beta1, self.beta2, self.max_rounds)

    def _info(self) -> dict[str, Any]:
        return {"world": self.replay.world.copy(), "beta": self.beta.copy(), "replay_score": self._value.copy()}

    def action_masks(self) -> np.ndarray:
        """(N, len(MACRO_ACTIONS)) booleans: an action is allowed unless its batch would be empty."""
        return batch_masks(self.replay)
