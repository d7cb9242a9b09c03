"""``VectorEpisodes``: N replay episodes stepped together in one process, as a Gymnasium ``VectorEnv``.

The machinery the vector envs share (the node-level :class:`dream_gym.envs.vector_env.ReplayVectorEnv`
and the macro :class:`dream_gym.rl.vector.MacroVectorEnv`): autoreset as Gymnasium 1.x defines it
(``metadata["autoreset_mode"]``), ``reset_mask``, and rewards as changes of a value function over
the episodes of one :class:`~dream_gym.replay.vector.VectorReplay`. Subclasses choose the actions
and the observations.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from dream_gym.replay.objectives import Progress, ValueFn
from dream_gym.replay.settings import whole_at_least_one
from dream_gym.replay.vector import VectorReplay
from dream_gym.world.registry import resolve_world
from dream_gym.world.tree import World

WorldRef = World | str | os.PathLike[str]


def reset_mask(options: dict[str, Any], num_envs: int) -> np.ndarray:
    """The episodes a ``reset`` starts: ``options["reset_mask"]`` (popped; a bool array of shape
    ``(num_envs,)``), or all of them when it is absent."""
    mask = options.pop("reset_mask", None)
    if mask is None:
        return np.ones(num_envs, dtype=bool)
    mask = np.asarray(mask)
    if mask.shape != (num_envs,) or mask.dtype != np.bool_:
        raise ValueError(f"options['reset_mask'] must be a bool array of shape ({num_envs},)")
    return mask


def as_world_list(worlds: WorldRef | Sequence[WorldRef]) -> list[World]:
    """One world reference or a sequence of them, resolved."""
    if isinstance(worlds, (World, str, os.PathLike)):
        return [resolve_world(worlds)]
    resolved = [resolve_world(w) for w in worlds]
    if not resolved:
        raise ValueError("a vector env needs at least one world")
    return resolved


def final_entries(observation: Any, info: dict[str, Any], ended: np.ndarray) -> dict[str, Any]:
    """The ``info`` entries of a ``SAME_STEP`` autoreset, in the layout of Gymnasium's own vector
    envs: ``final_obs``, an object array over the sub-envs holding each ended episode's last
    observation (None elsewhere; a dict of arrays for a Dict space), and ``final_info``, the
    step's info of those episodes (each entry an array over the sub-envs, zero where no episode
    ended, with its ``_name`` mask), both marked by ``_final_obs`` and ``_final_info``. Copies:
    the buffers under ``observation`` and ``info`` are the next episode's once it starts."""
    rows = np.flatnonzero(ended)
    final_obs = np.full(len(ended), None, dtype=object)
    if isinstance(observation, dict):
        kept = {key: array[rows] for key, array in observation.items()}
        for k, row in enumerate(rows.tolist()):
            final_obs[row] = {key: array[k] for key, array in kept.items()}
    else:
        kept_rows = np.asarray(observation)[rows]
        for k, row in enumerate(rows.tolist()):
            final_obs[row] = kept_rows[k]
    final_info: dict[str, Any] = {}
    for key, value in info.items():
        value = np.asarray(value)
        final_info[key] = np.where(ended.reshape(-1, *([1] * (value.ndim - 1))), value, np.zeros_like(value))
        final_info[f"_{key}"] = ended.copy()
    return {"final_obs": final_obs, "_final_obs": ended.copy(), "final_info": final_info,
            "_final_info": ended.copy()}


class VectorEpisodes(VectorEnv):  # type: ignore[type-arg]
    """Autoreset, ``reset_mask`` and rewards for N replay episodes (subclasses choose the actions
    and observations).

    Subclasses set ``self.replay`` and the spaces, and implement :meth:`_start` (begin the
    episodes of a mask), :meth:`_act` (one round where ``active``; returns terminated,
    truncated and info) and :meth:`_observe` (the observations, a copy).
    """

    metadata: dict[str, Any] = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}
    replay: VectorReplay

    def _init_episodes(self, num_envs: int, autoreset_mode: AutoresetMode | str, value_fn: ValueFn,
                       beta1: float, beta2: float) -> None:
        if not whole_at_least_one(num_envs):
            raise ValueError(f"num_envs must be a whole number >= 1, got {num_envs!r}")  # 2.5 was 2 envs
        self.num_envs = int(num_envs)
        mode = AutoresetMode(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.autoreset_mode = mode
        self.value_fn = value_fn
        self.beta1, self.beta2 = float(beta1), float(beta2)
        self.beta = np.zeros(self.num_envs)  # per episode
        self._value = np.zeros(self.num_envs)  # value so far: rewards are its changes
        self._recorded = np.maximum(1, self.replay.pool.sizes - 1)  # per pool world: v2's unit of work
        self._ended = np.zeros(self.num_envs, dtype=bool)
        self._all = np.ones(self.num_envs, dtype=bool)

    @property
    def value(self) -> np.ndarray:
        """V so far of each sub-env's episode (the sum of its rewards; an ended episode's final
        V until it starts again): a copy. N and k are ``info["attempts"]`` and ``info["rounds"]``."""
        return self._value.copy()

    # -- subclass hooks -----------------------------------------------------------------
    def _start(self, mask: np.ndarray, options: dict[str, Any]) -> None:
        raise NotImplementedError

    def _act(self, actions: Any, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        raise NotImplementedError

    def _observe(self) -> Any:
        raise NotImplementedError

    def _info(self) -> dict[str, Any]:
        return {}

    # -- gymnasium API ------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start every episode, or only those of ``options["reset_mask"]`` (a bool array)."""
        super().reset(seed=seed)
        options = dict(options or {})
        mask = reset_mask(options, self.num_envs)
        self._start(mask, options)
        self._value[mask] = 0.0
        self._ended[mask] = False
        return self._observe(), self._info()

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        mode = self.autoreset_mode
        if mode == AutoresetMode.NEXT_STEP:
            resetting = self._ended
            active = ~resetting
        else:
            if mode == AutoresetMode.DISABLED and self._ended.any():
                raise RuntimeError(
                    f"sub-envs {np.flatnonzero(self._ended).tolist()} ended: reset them with "
                    "reset(options={'reset_mask': mask}) before stepping (autoreset is disabled)")
            resetting, active = None, self._all
        terminated, truncated, info = self._act(actions, active)
        replay = self.replay
        value = self.value_fn(Progress(replay.best_q, replay.attempts, replay.rounds, self.beta, self.beta1, self.beta2,
                                       self._recorded[replay.world]))
        reward = np.where(active, value - self._value, 0.0)
        self._value = np.where(active, value, self._value)
        ended = terminated | truncated
        if resetting is not None and resetting.any():
            self._start(resetting, {})
            self._value[resetting] = 0.0
        elif mode == AutoresetMode.SAME_STEP and ended.any():
            info.update(final_entries(self._observe(), {**info, **self._info()}, ended))
            self._start(ended, {})
            self._value[ended] = 0.0
        self._ended = ended
        info.update(self._info())
        return self._observe(), reward, terminated, truncated, info


__all__ = ["VectorEpisodes", "WorldRef", "as_world_list", "final_entries"]
