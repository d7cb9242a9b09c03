"""Native vector replay: N episodes in numpy arrays, stepped in one call.

``gym.make_vec("DreamGym/Replay-v1", num_envs=N, vectorization_mode="vector_entry_point",
world=...)`` builds :class:`ReplayVectorEnv`: the node-level env of :mod:`dream_gym.envs.env` for N
episodes at once on :class:`~dream_gym.replay.vector.VectorReplay`, with the same spaces (one
row per sub-env), rewards, flags and action convention, and autoreset as Gymnasium 1.x defines
it (``metadata["autoreset_mode"]``, default ``AutoresetMode.NEXT_STEP``).

:class:`~dream_gym.envs.vector_episodes.VectorEpisodes` is the shared machinery (autoreset modes,
``reset_mask``, rewards as changes of a value function) that the macro vector env of
:mod:`dream_gym.rl.vector` reuses.
"""

from __future__ import annotations

import mmap
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from dream_gym.envs.buffers import BufferPool, bases_of, read_only_arrays
from dream_gym.envs.ids import SpecOfOneWorld
from dream_gym.envs.spaces import (
    BASELINE,
    GLOBAL_COLUMNS,
    NODE_COLUMNS,
    PADDING_ROW,
    capacity_for,
    observation_space,
)
from dream_gym.envs.vector_episodes import VectorEpisodes, WorldRef, as_world_list, final_entries, reset_mask
from dream_gym.replay.mechanics import IllegalBatchError
from dream_gym.replay.objectives import replay_value
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.replay.settings import DEFAULT_BETA, DEFAULT_MAX_ATTEMPTS, ReplaySettings, check_flags
from dream_gym.replay.vector import _FRONTIER_CODES, NONE, ROOT, VectorReplay, WorldPool
from dream_gym.replay.vector_engine import (
    ATTEMPTS_LIMIT,
    CAPACITY_FULL,
    FLAGS,
    ILLEGAL_STOP,
    TERMINATED,
    TRUNCATED,
    compiled_for,
    step_kernel,
)

#: What an action value that no id can be becomes: a selection the rules drop (-1 is the engine's
#: "no selection", and the single env drops a -1 as an id that was never observed).
_NOT_AN_ID = np.iinfo(np.int64).min


def selections(actions: Any, shape: tuple[int, int]) -> np.ndarray:
    """``actions`` as the engine's int64 selections, each value judged as the single env judges it:
    an integer is a node id (``max_nodes`` none); a float, a bool or an integer past int64 is no
    id, and the rules drop it. An array of another shape is a ValueError (a reshape would take
    (W, N) as (N, W), scrambled)."""
    try:
        batch = np.asarray(actions)
    except ValueError as exc:  # ragged lists
        raise ValueError(f"actions must have the action space's shape (num_envs, W) = {shape}: {exc}") from None
    if batch.shape != shape:
        raise ValueError(f"actions must have the action space's shape (num_envs, W) = {shape}, got {batch.shape}")
    kind = batch.dtype.kind
    if kind == "i":
        ids = batch.astype(np.int64, copy=False)
    elif kind == "u":
        ids = np.where(batch > np.iinfo(np.int64).max, _NOT_AN_ID, batch.astype(np.int64))
    elif kind == "O":
        ids = np.array([_NOT_AN_ID if isinstance(value, bool) or not isinstance(value, (int, np.integer))
                        or not _NOT_AN_ID < value <= np.iinfo(np.int64).max else int(value)
                        for value in batch.reshape(-1).tolist()], dtype=np.int64).reshape(shape)
    else:  # floats, bools, text: no value is an id
        return np.full(shape, _NOT_AN_ID, dtype=np.int64)
    if (ids == NONE).any():
        ids = np.where(ids == NONE, _NOT_AN_ID, ids)
    return ids


class ReplayVectorEnv(SpecOfOneWorld, VectorEpisodes):
    """N node-level replay episodes (the :class:`dream_gym.envs.env.ReplayEnv` of each sub-env).

    Sub-env i plays ``world[i % len(world)]`` (one world reference or a sequence of them). The
    spaces are ReplayEnv's, batched: actions (N, W) node ids with ``max_nodes`` for "no
    selection"; observations ``nodes`` (N, max_nodes, 5) int32, ``score`` (N, max_nodes) and
    ``globals`` (N, 4) float64, fresh arrays every step. Capacity: the single env's,
    :data:`~dream_gym.envs.env.DEFAULT_MAX_NODES` unless given (a bigger world is an error naming
    ``max_nodes``; a smaller explicit one truncates an episode when its next batch might not fit,
    flags ``info["capacity_full"]`` and warns once). Every element of the action space is valid (an
    array of another shape is a ValueError, never reshaped), and every value is judged as the
    single env judges it (a float, a bool, -1 or an integer past int64 is no id): illegal selections
    are dropped (counted in ``info["dropped"]``; the reasons are the single env's) and a row with
    no legal selection stops that episode (``info["illegal_stop"]``). ``strict=True`` raises
    instead. A row that would take its episode past ``max_attempts`` attempts (default
    :data:`~dream_gym.replay.settings.DEFAULT_MAX_ATTEMPTS`) is not applied and truncates the episode
    (``info["attempts_limit"]``, present on a step where it happened). Also in ``info``: ``attempts``, ``rounds`` (arrays). V so far is the sum of an
    episode's rewards (not in ``info``: through q it would tell the world's best recorded score).

    Every episode is the one a :class:`~dream_gym.envs.env.ReplayEnv` gives for the same actions
    (tests/test_vector_env.py checks it on random actions over mixed-size worlds).
    """

    def _replayed_world_ids(self) -> list[str]:
        return [world.id for world in self.pool.worlds]

    def __init__(
        self,
        num_envs: int = 1,
        world: WorldRef | Sequence[WorldRef] | None = None,
        workers: int | None = None,
        beta: float = DEFAULT_BETA,
        beta1: float = DEFAULT_BETA1,
        beta2: float = DEFAULT_BETA2,
        max_rounds: int | None = None,
        frontier: str | None = None,
        max_nodes: int | None = None,
        strict: bool = False,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        requests: bool = False,
    ):
        if world is None:
            raise TypeError("ReplayVectorEnv needs world= (a world reference or a sequence of them)")
        if requests:  # a measurement of replay's coverage, kept to the session and the single env
            raise ValueError("request mode (requests=True) is not in the vector envs, which replay the rule's "
                             "frontier: use a single ReplayEnv(requests=True), a ReplaySession or dream-gym eval "
                             "--requests")
        check_flags(strict=strict)
        if render_mode is not None:
            raise ValueError("the vector replay env does not render; use a single ReplayEnv(render_mode='ansi')")
        settings = ReplaySettings(workers, beta, beta1, beta2, max_rounds, frontier, max_attempts)
        worlds = as_world_list(world)
        workers = settings.pool_workers(worlds)
        self.settings = settings.replace(workers=workers)  # the frontier rule stays each world's when None
        self.pool = WorldPool(worlds)
        self.max_nodes = m = capacity_for(max_nodes, self.pool.max_size, workers, "the largest world")
        # an episode never holds more than min(max_nodes, its world) ids: room for them and one batch
        self.replay = VectorReplay(self.pool, num_envs, workers, frontier=frontier,
                                   capacity=min(m, self.pool.max_size) + workers, ranked=False)
        self._init_episodes(num_envs, autoreset_mode, replay_value, beta1, beta2)
        self.beta[:] = beta
        self.workers, self.max_rounds, self.strict = int(workers), max_rounds, strict
        self.world_of = np.arange(self.num_envs) % len(worlds)
        self._warned_full = False
        self.single_action_space = spaces.MultiDiscrete(np.full(workers, m + 1, dtype=np.int64))
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = observation_space(m, workers)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        n = self.num_envs
        self._baseline = self.pool.baseline[self.world_of]
        self._epoch = np.zeros(n, dtype=np.int64)  # episodes started, per sub-env
        self._pool: BufferPool[_VectorSet] = BufferPool(self._new_set)  # observation buffers (envs.buffers)
        self._sets = self._pool.sets
        self._no_actions = np.full((n, self.workers), NONE, dtype=np.int64)
        self._kept = np.empty((1, self.workers), dtype=np.int64)  # the engine's room for one row's legal part
        self._none = np.zeros(n, dtype=bool)
        self._observed_bound = 0  # at least the longest episode's observed ids (the replay's room)
        self._kernel: Any = None  # the engine, compiled for this env's argument types (on the first call)
        self.reset()

    # -- observation buffers ---------------------------------------------------------------
    def _new_set(self) -> _VectorSet:
        """A buffer set of N observations in their first state, readable through read-only
        arrays that cannot be made writeable (the engine writes the memory under them)."""
        n, m = self.num_envs, self.max_nodes
        shapes = ((np.int32, (n, m, len(NODE_COLUMNS))), (np.float64, (n, m)), (np.float64, (n, len(GLOBAL_COLUMNS))))
        layout, at = [], 0
        for dtype, shape in shapes:
            layout.append((dtype, shape, at))
            at += -(-int(np.prod(shape)) * np.dtype(dtype).itemsize // 8) * 8
        # private: Linux gives shared anonymous memory no huge pages. The N episodes' rows lie
        # max_nodes rows apart, a page or more each: with 4 KiB pages nearly every row a step
        # writes is a TLB miss, which made writing the rows two thirds of a step at N = 1,024
        memory = mmap.mmap(-1, max(at, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            memory.madvise(mmap.MADV_HUGEPAGE)
        read_only = memoryview(memory).toreadonly()
        rw = tuple(np.frombuffer(memory, dtype=dtype, count=int(np.prod(shape)), offset=offset).reshape(shape)
                   for dtype, shape, offset in layout)
        rw[0][:] = PADDING_ROW
        rw[2][:, BASELINE] = self._baseline
        out = read_only_arrays(read_only, layout)
        return _VectorSet(out, bases_of(out), rw, np.zeros(n, dtype=np.int64),  # type: ignore[arg-type]
                          np.full(n, -1, dtype=np.int64))

    def _run(self, actions: np.ndarray, act: np.ndarray, start: np.ndarray) -> tuple[int, dict[str, np.ndarray]]:
        """One call of the engine (dream_gym.replay.vector_engine.step_kernel) on a free buffer set."""
        replay, n = self.replay, self.num_envs
        self._observed_bound += self.workers
        if self._observed_bound + self.workers > replay.capacity:  # never, with the capacity __init__ gives
            self._observed_bound = int(replay.observed.max())
            replay._ensure_room()
        index = self._pool.free()
        entry = self._sets[index]
        reward, dropped, flags = np.empty(n), np.empty(n, dtype=np.int64), np.empty((FLAGS, n), dtype=bool)
        nodes, scores, glob = entry.rw
        # the compiled engine takes C-contiguous arrays of these dtypes only (a caller's reset
        # mask or actions may be strided views)
        actions, start = np.ascontiguousarray(actions, dtype=np.int64), np.ascontiguousarray(start, dtype=np.bool_)
        arguments = (actions, self.max_nodes, act, start, self.world_of, _FRONTIER_CODES[replay.frontier],
                     self.workers, -1 if self.max_rounds is None else self.max_rounds, self.settings.max_attempts,
                     self.max_nodes, self.beta1, self.beta2, self.pool.arrays, replay._episode_arrays(),
                     replay.root_revealed, replay.records, self._kept, nodes, scores, glob, entry.written, entry.epoch,
                     self._epoch, self._value, reward, dropped, flags)
        if self._kernel is None:
            self._kernel = compiled_for(step_kernel, arguments)
        self._kernel(*arguments)
        self._pool.last = index
        return index, {"reward": reward, "terminated": flags[TERMINATED], "truncated": flags[TRUNCATED],
                       "dropped": dropped, "illegal_stop": flags[ILLEGAL_STOP], "capacity_full": flags[CAPACITY_FULL],
                       "attempts_limit": flags[ATTEMPTS_LIMIT]}

    def _observation(self, index: int) -> dict[str, np.ndarray]:
        nodes, scores, glob = self._sets[index].out
        return {"nodes": nodes, "score": scores, "globals": glob}

    # -- gymnasium API ------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start every episode, or only those of ``options["reset_mask"]`` (a bool array)."""
        VectorEnv.reset(self, seed=seed)
        options = dict(options or {})
        mask = reset_mask(options, self.num_envs)
        if options:  # ignored, a beta given here would look taken (as ReplayEnv refuses them)
            raise ValueError(f"{type(self).__name__}.reset takes no options but reset_mask, got "
                             f"{', '.join(map(repr, options))}: W, beta and the other replay settings are "
                             "arguments of gym.make_vec")
        index, _ = self._run(self._no_actions, self._none, mask)
        self._ended = self._ended & ~mask
        return self._observation(index), self._info()

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        mode = self.autoreset_mode
        if mode == AutoresetMode.NEXT_STEP:
            start, act = self._ended, ~self._ended
        else:
            if mode == AutoresetMode.DISABLED and self._ended.any():
                raise RuntimeError(
                    f"sub-envs {np.flatnonzero(self._ended).tolist()} ended: reset them with "
                    "reset(options={'reset_mask': mask}) before stepping (autoreset is disabled)")
            start, act = self._none, self._all
        batch = selections(actions, (self.num_envs, self.workers))
        if self.strict:
            kept, dropped = self.replay.legal_part(np.where(batch == self.max_nodes, NONE, batch), act)
            if dropped.any():
                e, j = np.argwhere(dropped)[0]
                raise IllegalBatchError(f"sub-env {e}, slot {j}: selection {batch[e, j]} breaks the reveal rules "
                                        "(the single ReplayEnv names the reason)", int(batch[e, j]))
        index, out = self._run(batch, act, start)
        terminated, full, limit = out["terminated"], out["capacity_full"], out["attempts_limit"]
        truncated = out["truncated"] | full | limit
        if full.any():
            self._warn_full()
        info: dict[str, Any] = {"dropped": out["dropped"], "illegal_stop": out["illegal_stop"], "capacity_full": full}
        if limit.any():  # a row refused at max_attempts ended those episodes
            info["attempts_limit"] = limit
        ended = terminated | truncated
        if mode == AutoresetMode.SAME_STEP and ended.any():
            info.update(final_entries(self._observation(index), {**info, **self._info()}, ended))
            self._run(self._no_actions, self._none, ended)  # the ended episodes start again, in a free set
            index = self._pool.last
        self._ended = ended
        info.update(self._info())
        return self._observation(index), out["reward"], terminated, truncated, info

    def _warn_full(self) -> None:
        if not self._warned_full:
            self._warned_full = True
            warnings.warn(
                f"max_nodes={self.max_nodes}: episodes were truncated when their next batch might not fit in "
                "the free observation rows (info['capacity_full']); leave max_nodes unset, or pass at least the "
                "largest world's size, to hold every episode whole",
                stacklevel=3,
            )

    def _info(self) -> dict[str, Any]:
        replay = self.replay
        return {"attempts": replay.attempts, "rounds": replay.rounds.copy()}

    def action_masks(self) -> np.ndarray:
        """Per-slot legality masks of every sub-env, (N, W * (max_nodes + 1)) (sb3-contrib's layout)."""
        replay, n, w, width = self.replay, self.num_envs, self.workers, self.max_nodes + 1
        masks = np.zeros((n, w, width), dtype=bool)
        masks[:, :, self.max_nodes] = True
        count = min(self.max_nodes, replay.capacity)
        # the records past an episode's observed ids are a finished episode's: never legal
        is_open = (replay.open_pos[:, :count] >= 0) & (np.arange(count)[None, :] < replay.observed[:, None])
        masks[:, :, :count] |= is_open[:, None, :]
        masks[:, :, ROOT] = np.arange(w)[None, :] < replay.root_slots[:, None]
        return masks.reshape(n, -1)


class _VectorSet(NamedTuple):
    """One buffer set of the vector env: read-only arrays (nodes, score, globals), the arrays numpy
    views of them refer to, the arrays the engine writes, and per sub-env the rows written and
    the episode they belong to."""

    out: tuple[np.ndarray, np.ndarray, np.ndarray]
    bases: tuple[np.ndarray, np.ndarray, np.ndarray]
    rw: tuple[np.ndarray, np.ndarray, np.ndarray]
    written: np.ndarray
    epoch: np.ndarray


__all__ = ["NODE_COLUMNS", "ReplayVectorEnv"]
