"""Native vector replay: N episodes in numpy arrays, stepped in one call.

``gym.make_vec("DreamGym/Replay-v1", num_envs=N, vectorization_mode="vector_entry_point",
world=...)`` builds :class:`ReplayVectorEnv`: the node-level env of :mod:`dream_gym.env` for N
episodes at once on :class:`~dream_gym.vector_replay.VectorReplay`, with the same spaces (one
row per sub-env), rewards, flags and action convention, and autoreset as Gymnasium 1.x defines
it (``metadata["autoreset_mode"]``, default ``AutoresetMode.NEXT_STEP``).

:class:`VectorReplayEnv` is the shared machinery (autoreset modes, ``reset_mask``, rewards as
changes of a value function) that the macro vector env of :mod:`dream_gym.rl.vector` reuses.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from numba import njit

from dream_gym.env import (
    ATTEMPTS,
    BASELINE,
    DEPTH,
    FRONTIER,
    GLOBAL_COLUMNS,
    NODE_COLUMNS,
    PADDING_ROW,
    PARENT,
    REVEALED,
    ROOT_SLOTS,
    ROUNDS,
    SCORED,
    capacity_for,
    observation_space,
)
from dream_gym.registry import resolve_world
from dream_gym.replay import IllegalBatchError
from dream_gym.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.values import Progress, ValueFn, replay_value
from dream_gym.vector_replay import NONE, ROOT, VectorReplay, WorldPool
from dream_gym.world import World

WorldRef = World | str | os.PathLike[str]


def as_world_list(worlds: WorldRef | Sequence[WorldRef]) -> list[World]:
    """One world reference or a sequence of them, resolved."""
    if isinstance(worlds, (World, str, os.PathLike)):
        return [resolve_world(worlds)]
    resolved = [resolve_world(w) for w in worlds]
    if not resolved:
        raise ValueError("a vector env needs at least one world")
    return resolved


class VectorReplayEnv(VectorEnv):  # type: ignore[type-arg]
    """Autoreset, ``reset_mask`` and rewards for N replay episodes (subclasses choose the actions
    and observations).

    Subclasses set ``self.replay`` and the spaces, and implement :meth:`_start` (begin the
    episodes of a mask), :meth:`_act` (one round where ``active``; returns terminated,
    truncated and info) and :meth:`_observe` (the observations of some rows).
    """

    metadata: dict[str, Any] = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}
    replay: VectorReplay

    def _init_episodes(self, num_envs: int, autoreset_mode: AutoresetMode | str, value_fn: ValueFn,
                       beta1: float, beta2: float) -> None:
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

    # -- subclass hooks -----------------------------------------------------------------
    def _start(self, mask: np.ndarray, options: dict[str, Any]) -> None:
        raise NotImplementedError

    def _act(self, actions: Any, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        raise NotImplementedError

    def _observe(self, rows: np.ndarray | None = None) -> Any:
        raise NotImplementedError

    def _info(self) -> dict[str, Any]:
        return {}

    # -- gymnasium API ------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start every episode, or only those of ``options["reset_mask"]`` (a bool array)."""
        super().reset(seed=seed)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is None:
            mask = self._all
        else:
            mask = np.asarray(mask)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},)")
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
            info["final_obs"] = self._observe(ended)
            info["_final_obs"] = ended
            self._start(ended, {})
            self._value[ended] = 0.0
        self._ended = ended
        info.update(self._info())
        return self._observe(), reward, terminated, truncated, info


class ReplayVectorEnv(VectorReplayEnv):
    """N node-level replay episodes (the :class:`dream_gym.env.ReplayEnv` of each sub-env).

    Sub-env i plays ``world[i % len(world)]`` (one world reference or a sequence of them). The
    spaces are ReplayEnv's, batched: actions (N, W) node ids with ``max_nodes`` for "no
    selection"; observations ``nodes`` (N, max_nodes, 5) int32, ``score`` (N, max_nodes) and
    ``globals`` (N, 4) float64, fresh arrays every step. Capacity: the single env's,
    :data:`~dream_gym.env.DEFAULT_MAX_NODES` unless given (a bigger world is an error naming
    ``max_nodes``; a smaller explicit one truncates an episode when its next batch might not fit,
    flags ``info["capacity_full"]`` and warns once). Every action is valid: illegal selections
    are dropped (counted in ``info["dropped"]``; the reasons are the single env's) and a row with
    no legal selection stops that episode (``info["illegal_stop"]``). ``strict=True`` raises
    instead. Also in ``info``: ``attempts``, ``rounds`` (arrays). V so far is the sum of an
    episode's rewards (not in ``info``: through q it would tell the world's best recorded score).

    Every episode is the one a :class:`~dream_gym.env.ReplayEnv` gives for the same actions
    (tests/test_vector_env.py checks it on random actions over mixed-size worlds).
    """

    def __init__(
        self,
        num_envs: int = 1,
        world: WorldRef | Sequence[WorldRef] | None = None,
        workers: int | None = None,
        beta: float = 0.5,
        beta1: float = DEFAULT_BETA1,
        beta2: float = DEFAULT_BETA2,
        max_rounds: int | None = None,
        frontier: str | None = None,
        max_nodes: int | None = None,
        strict: bool = False,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
    ):
        if world is None:
            raise TypeError("ReplayVectorEnv needs world= (a world reference or a sequence of them)")
        if render_mode is not None:
            raise ValueError("the vector replay env does not render; use a single ReplayEnv(render_mode='ansi')")
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {beta}")
        if max_rounds is not None and max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1 or None, got {max_rounds}")
        worlds = as_world_list(world)
        if workers is None:
            recorded = {w.workers for w in worlds}
            if len(recorded) > 1:
                raise ValueError(f"the worlds were recorded with different W {sorted(recorded)}: pass workers=")
            workers = recorded.pop()
        self.pool = WorldPool(worlds)
        self.replay = VectorReplay(self.pool, num_envs, workers, frontier=frontier)
        self._init_episodes(num_envs, autoreset_mode, replay_value, beta1, beta2)
        self.beta[:] = beta
        self.workers, self.max_rounds, self.strict = int(workers), max_rounds, strict
        self.max_nodes = m = capacity_for(max_nodes, self.pool.max_size, workers, "the largest world")
        self.world_of = np.arange(self.num_envs) % len(worlds)
        self._warned_full = False
        self.single_action_space = spaces.MultiDiscrete(np.full(workers, m + 1, dtype=np.int64))
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = observation_space(m, workers)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        n = self.num_envs
        self._nodes = np.tile(PADDING_ROW, (n, m, 1))
        self._scores = np.zeros((n, m))
        self._globals = np.zeros((n, len(GLOBAL_COLUMNS)))
        self._globals[:, BASELINE] = self.pool.baseline[self.world_of]
        self.reset()

    # -- episodes ----------------------------------------------------------------------
    def _start(self, mask: np.ndarray, options: dict[str, Any]) -> None:
        replay, pool = self.replay, self.pool
        e = np.flatnonzero(mask)
        used = int(replay.observed[e].max())
        self._nodes[e, :used] = PADDING_ROW
        self._scores[e, :used] = 0.0
        replay.reset(mask, self.world_of)
        root = pool.offsets[self.world_of[e]]
        valid = pool.valid[root]
        self._nodes[e, ROOT, REVEALED] = 1
        self._nodes[e, ROOT, SCORED] = valid
        self._scores[e, ROOT] = np.where(valid, pool.score[root], 0.0)
        self._write_counters(e)

    def _write_counters(self, e: np.ndarray | slice) -> None:
        replay = self.replay
        root_slots = replay.root_slots[e]
        self._nodes[e, ROOT, FRONTIER] = root_slots > 0
        self._globals[e, ROOT_SLOTS] = root_slots
        self._globals[e, ROUNDS] = replay.rounds[e]
        self._globals[e, ATTEMPTS] = replay.attempts[e]

    def _act(self, actions: Any, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        replay, pool = self.replay, self.pool
        batch = np.asarray(actions, dtype=np.int64).reshape(self.num_envs, self.workers)
        batch = np.where(batch == self.max_nodes, NONE, batch)
        kept, dropped = replay.legal_part(batch, active)
        if self.strict and dropped.any():
            e, j = np.argwhere(dropped)[0]
            raise IllegalBatchError(f"sub-env {e}, slot {j}: selection {batch[e, j]} breaks the reveal rules "
                                    "(the single ReplayEnv names the reason)", int(batch[e, j]))
        empty = active & (kept[:, 0] == NONE)
        before = replay.observed.copy()
        replay.apply(kept)
        _write_rows(kept, before, pool.arrays, replay._episode_arrays(), replay._observed_arrays(), self._nodes,
                    self._scores)
        self._write_counters(slice(None))
        terminated = empty | (active & replay.exhausted())
        truncated = active & ~terminated
        truncated &= (replay.rounds >= self.max_rounds) if self.max_rounds is not None else False
        # the single env's rule: the largest batch the frontier allows next must fit (never the world's size)
        largest = np.minimum(self.workers, replay.root_slots + replay.open_count)
        full = active & ~terminated & ~truncated & (replay.observed + largest > self.max_nodes)
        if full.any():
            self._warn_full()
        info = {"dropped": dropped.sum(axis=1), "illegal_stop": empty & dropped.any(axis=1), "capacity_full": full}
        return terminated, truncated | full, info

    def _warn_full(self) -> None:
        if not self._warned_full:
            self._warned_full = True
            warnings.warn(
                f"max_nodes={self.max_nodes}: episodes were truncated when their next batch might not fit in "
                "the free observation rows (info['capacity_full']); leave max_nodes unset, or pass at least the "
                "largest world's size, to hold every episode whole",
                stacklevel=3,
            )

    def _observe(self, rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
        if rows is None:
            return {"nodes": self._nodes.copy(), "score": self._scores.copy(), "globals": self._globals.copy()}
        return {"nodes": self._nodes[rows], "score": self._scores[rows], "globals": self._globals[rows]}

    def _info(self) -> dict[str, Any]:
        replay = self.replay
        return {"attempts": replay.attempts, "rounds": replay.rounds.copy()}

    def action_masks(self) -> np.ndarray:
        """Per-slot legality masks of every sub-env, (N, W * (max_nodes + 1)) (sb3-contrib's layout)."""
        replay, n, w, width = self.replay, self.num_envs, self.workers, self.max_nodes + 1
        masks = np.zeros((n, w, width), dtype=bool)
        masks[:, :, self.max_nodes] = True
        count = min(self.max_nodes, replay.capacity)
        is_open = replay.open_pos[:, :count] >= 0
        masks[:, :, :count] |= is_open[:, None, :]
        masks[:, :, ROOT] = np.arange(w)[None, :] < replay.root_slots[:, None]
        return masks.reshape(n, -1)


@njit(cache=True)
def _write_rows(kept: Any, before: Any, pool: Any, ep: Any, obs: Any, nodes: Any, scores: Any) -> None:  # pragma: no cover
    """The observation rows a round changed: the new nodes' rows and the selections' frontier flags."""
    score, valid, depth = pool[4], pool[5], pool[7]
    observed = ep[3]
    order, parent_obs, open_pos = obs[0], obs[1], obs[3]
    for e in range(kept.shape[0]):
        for j in range(kept.shape[1]):
            s = kept[e, j]
            if s < 0:
                break
            if s != 0:
                nodes[e, s, FRONTIER] = 1 if open_pos[e, s] >= 0 else 0
        for i in range(before[e], observed[e]):
            node = order[e, i]
            nodes[e, i, REVEALED] = 1
            nodes[e, i, PARENT] = parent_obs[e, i]
            nodes[e, i, DEPTH] = depth[node]
            nodes[e, i, SCORED] = 1 if valid[node] else 0
            nodes[e, i, FRONTIER] = 1 if open_pos[e, i] >= 0 else 0
            scores[e, i] = score[node] if valid[node] else 0.0


__all__ = ["NODE_COLUMNS", "ReplayVectorEnv", "VectorReplayEnv", "as_world_list"]
