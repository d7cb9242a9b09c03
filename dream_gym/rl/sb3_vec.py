"""The vector macro env as a stable-baselines3 ``VecEnv`` (imports stable_baselines3; build it
with :func:`dream_gym.rl.sb3_vec_env`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from dream_gym.rl.vector import MacroVectorEnv


class SB3MacroVecEnv(VecEnv):
    """:class:`MacroVectorEnv` (same-step autoreset) behind SB3's ``VecEnv`` interface.

    ``env_method("action_masks")`` returns one mask row per sub-env (what sb3-contrib's
    ``get_action_masks`` stacks); ``get_attr`` reads attributes of the vector env (the same for
    every sub-env). The vector env itself is ``.env``.
    """

    def __init__(self, worlds: Any, n_envs: int = 1, **options: Any):
        self.env = MacroVectorEnv(worlds, n_envs, autoreset_mode=AutoresetMode.SAME_STEP, **options)
        super().__init__(n_envs, self.env.single_observation_space, self.env.single_action_space)
        self._actions: np.ndarray | None = None
        self._returns = np.zeros(n_envs)
        self._lengths = np.zeros(n_envs, dtype=np.int64)
        self._started = time.time()

    # -- stepping ----------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        seed = self._seeds[0]
        options = self._options[0] if all(o == self._options[0] for o in self._options) else {}
        obs, _ = self.env.reset(seed=seed, options=dict(options) or None)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self._actions is None:
            raise RuntimeError("step_async() must come before step_wait()")
        obs, rewards, terminated, truncated, info = self.env.step(self._actions)
        self._actions = None
        dones = terminated | truncated
        self._returns += rewards
        self._lengths += 1
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        ended = np.flatnonzero(dones)
        if len(ended):
            final = info["final_obs"]
            seconds = round(time.time() - self._started, 6)
            for k, i in enumerate(ended.tolist()):
                infos[i] = {
                    "terminal_observation": final[k],
                    "TimeLimit.truncated": bool(truncated[i] and not terminated[i]),
                    "episode": {"r": float(self._returns[i]), "l": int(self._lengths[i]), "t": seconds},
                }
            self._returns[ended] = 0.0
            self._lengths[ended] = 0
        return obs, rewards.astype(np.float32), dones, infos

    # -- attributes and methods ----------------------------------------------------------
    def _indices(self, indices: VecEnvIndices) -> list[int]:
        return list(self._get_indices(indices))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self.env, attr_name)
        return [value for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if len(self._indices(indices)) != self.num_envs:
            raise ValueError("the sub-envs of a vector env share their attributes: set them for all at once")
        setattr(self.env, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        rows = self._indices(indices)
        if isinstance(result, np.ndarray) and result.shape[:1] == (self.num_envs,):
            return list(result[rows])  # one row per sub-env (action_masks)
        return [result for _ in rows]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:  # type: ignore[type-arg]
        return [False for _ in self._indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in range(self.num_envs)]

    def close(self) -> None:
        self.env.close()
