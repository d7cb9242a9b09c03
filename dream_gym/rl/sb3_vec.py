"""The vector macro env as a stable-baselines3 ``VecEnv`` (imports stable_baselines3; build it
with :func:`dream_gym.rl.sb3_vec_env`), and :class:`MixedVecEnv`, several of them side by side."""

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
            for i in ended.tolist():
                infos[i] = {
                    "terminal_observation": final[i],
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


class MixedVecEnv(VecEnv):
    """Several SB3 ``VecEnv`` of one observation and action space side by side, as one: sub-env i
    of the whole is sub-env i - start of the part holding it. Built by
    :func:`dream_gym.rl.sb3_vec_env` to train on several replay settings at once (each part
    replays at its own W, beta1 and beta2: a numba vector env holds one W).

    ``seed(s)`` gives part k the seed ``s + start_k`` (sub-env i gets ``s + i``, SB3's rule);
    ``get_attr``, ``env_method`` (``action_masks``: one row per sub-env) and ``set_attr`` reach
    the parts holding the indices asked for."""

    def __init__(self, parts: Sequence[VecEnv]):
        if not parts:
            raise ValueError("MixedVecEnv needs at least one part")
        first = parts[0]
        for part in parts[1:]:
            if part.observation_space != first.observation_space or part.action_space != first.action_space:
                raise ValueError("the parts of a MixedVecEnv must share their observation and action spaces")
        self.parts = list(parts)
        self.starts = np.cumsum([0] + [part.num_envs for part in self.parts])
        super().__init__(int(self.starts[-1]), first.observation_space, first.action_space)

    def _split(self, indices: VecEnvIndices) -> list[tuple[VecEnv, list[int]]]:
        """(part, its local indices) for the global ``indices``, in order of the parts."""
        wanted = list(self._get_indices(indices))
        out = []
        for k, part in enumerate(self.parts):
            start, stop = int(self.starts[k]), int(self.starts[k + 1])
            local = [i - start for i in wanted if start <= i < stop]
            if local:
                out.append((part, local))
        return out

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        seeds: list[int | None] = []
        for k, part in enumerate(self.parts):
            seeds += part.seed(None if seed is None else seed + int(self.starts[k]))
        return seeds

    def reset(self) -> np.ndarray:
        obs = np.concatenate([part.reset() for part in self.parts])
        self.reset_infos = [info for part in self.parts for info in getattr(part, "reset_infos", [{}] * part.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        for k, part in enumerate(self.parts):
            part.step_async(actions[int(self.starts[k]):int(self.starts[k + 1])])

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        steps = [part.step_wait() for part in self.parts]
        infos = [info for step in steps for info in step[3]]
        return (np.concatenate([s[0] for s in steps]), np.concatenate([s[1] for s in steps]),
                np.concatenate([s[2] for s in steps]), infos)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [value for part, local in self._split(indices) for value in part.get_attr(attr_name, local)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for part, local in self._split(indices):
            part.set_attr(attr_name, value, local)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        return [value for part, local in self._split(indices)
                for value in part.env_method(method_name, *method_args, indices=local, **method_kwargs)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:  # type: ignore[type-arg]
        return [value for part, local in self._split(indices) for value in part.env_is_wrapped(wrapper_class, local)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [image for part in self.parts for image in part.get_images()]

    def close(self) -> None:
        for part in self.parts:
            part.close()
