"""Gymnasium adapter over a replay session: ``gym.make("DreamGym/Replay-v1", world=...)``."""

from __future__ import annotations

import os
import struct
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from dream_gym.registry import is_path, resolve_world, shipped_datasets, shipped_env_ids, shipped_world_names
from dream_gym.replay import ROOT
from dream_gym.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.session import ReplaySession
from dream_gym.view import render_tree
from dream_gym.world import World

# Columns of the observation's "nodes" matrix (one row per observed id) and "globals" vector.
NODE_COLUMNS: tuple[str, ...] = ("revealed", "parent", "depth", "scored", "frontier")
GLOBAL_COLUMNS: tuple[str, ...] = ("root_slots", "baseline", "rounds", "attempts")
REVEALED, PARENT, DEPTH, SCORED, FRONTIER = range(len(NODE_COLUMNS))
ROOT_SLOTS, BASELINE, ROUNDS, ATTEMPTS = range(len(GLOBAL_COLUMNS))
PADDING_ROW = np.array([0, -1, 0, 0, 0], dtype=np.int32)  # a row no revealed node uses
_WIDTH = len(NODE_COLUMNS)
_ROW = struct.Struct(f"={_WIDTH}i")  # one row of "nodes" (native int32)
_ROW_BYTES = _ROW.size
_pack_row = _ROW.pack_into
_pack_globals = struct.Struct(f"={len(GLOBAL_COLUMNS)}d").pack_into  # "globals" (native float64)

# The observation capacity when ``max_nodes`` is not given: a constant, so that the shape of an
# observation never tells a policy how big the world is. 1,024 holds every shipped world (the
# largest has 1,001 nodes) and every imported real run (at most 201).
DEFAULT_MAX_NODES = 1024
# The behaviour version of ReplayEnv: the N of "DreamGym/Replay-vN" and "DreamGym/<world>-vN".
# The dataset a world comes from has its own version, in the world reference of the id's kwargs.
ENV_VERSION = 1
RENDER_MODES = ("ansi", "rgb_array")


def observation_space(max_nodes: int, workers: int) -> spaces.Dict:
    """The observation space of an env with capacity ``max_nodes`` and W = ``workers``."""
    n = max_nodes
    low = np.broadcast_to(np.array([0, -1, 0, 0, 0], dtype=np.int32), (n, len(NODE_COLUMNS)))
    high = np.broadcast_to(np.array([1, n - 1, n - 1, 1, 1], dtype=np.int32), (n, len(NODE_COLUMNS)))
    return spaces.Dict(
        {
            "nodes": spaces.Box(low.copy(), high.copy(), dtype=np.int32),
            "score": spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float64),
            "globals": spaces.Box(
                np.array([0, -np.inf, 0, 0], dtype=np.float64),
                np.array([workers, np.inf, np.inf, np.inf], dtype=np.float64),
                dtype=np.float64,
            ),
        }
    )


def capacity_for(max_nodes: int | None, world_size: int, workers: int, what: str = "the world") -> int:
    """The observation capacity: ``max_nodes``, or :data:`DEFAULT_MAX_NODES` when it is None.

    A world bigger than the default capacity is an error here, at make time, rather than episodes
    cut short without the caller asking for it.
    """
    if max_nodes is None:
        if world_size > DEFAULT_MAX_NODES:
            raise ValueError(
                f"{what} has {world_size} nodes, more than the default capacity max_nodes={DEFAULT_MAX_NODES}: "
                f"pass max_nodes={world_size} (or more) to hold every episode whole, or a smaller max_nodes "
                "to truncate episodes when the next batch might not fit"
            )
        return DEFAULT_MAX_NODES
    if max_nodes < world_size and max_nodes < workers + 1:
        raise ValueError(f"max_nodes must exceed W={workers} (or hold all {world_size} nodes of {what}), "
                         f"got {max_nodes}")
    return int(max_nodes)


class ReplayEnv(gym.Env):  # type: ignore[type-arg]
    """Replay of a recorded discovery tree: choose where the next attempts start.

    ## Description
    A recorded world is the search tree of a finished AI discovery run (root = the initial
    program; every other node one generate-and-evaluate attempt). Each step the agent submits a
    batch of at most W selections from the revealed tree; each selection reveals one recorded
    attempt: selecting the root (id 0) opens the next branch in creation order and may be
    repeated up to ``root_slots`` times; selecting a revealed non-root node reveals its
    earliest-created unrevealed recorded child. Nothing is generated: replay only reveals what
    was recorded.

    ## Action Space
    ``MultiDiscrete([max_nodes + 1] * W)``: each slot holds an observed node id, or
    ``max_nodes`` for "no selection". Every element of the space is a valid action: selections
    that break the reveal rules (an id not revealed yet, off the frontier, a non-root id twice,
    the root more often than ``root_slots``) are dropped and listed in ``info["dropped"]`` with
    the reason, and the legal rest is applied. **A batch with no legal selection left (all
    padding, all illegal, or ``[]``) is the empty batch: it stops the episode** (terminated,
    reward 0; ``info["illegal_stop"]`` is True when the action was not empty). Programmatic
    callers may pass any sequence of ids (``[0, 0, 3]``). With ``strict=True`` an illegal
    selection raises :class:`dream_gym.replay.IllegalBatchError` naming the id and the reason
    instead.

    Masks, as Gymnasium's Taxi gives them: ``info["action_mask"]`` is an ``int8`` array of shape
    ``(W, max_nodes + 1)``, row j the mask of slot j (1 where the slot may hold that value: the
    frontier, the padding value, and the root in the first ``root_slots`` slots). Masked sampling
    takes one mask per slot: ``env.action_space.sample(mask=tuple(info["action_mask"]))`` draws
    a selection per slot from the legal ones (two slots may still draw the same non-root node:
    the second is dropped). One array rather than a tuple, so that Gymnasium's vector envs stack
    the masks of their sub-envs. ``action_masks()`` gives the same masks as one flat bool array,
    the layout sb3-contrib's MaskablePPO expects.

    ## Observation Space
    A ``Dict`` of three boxes; observed ids index the rows:

    | key     | shape          | dtype   | content                                            |
    |---------|----------------|---------|----------------------------------------------------|
    | nodes   | (max_nodes, 5) | int32   | columns revealed (1 for ids in use), parent (-1    |
    |         |                |         | for the root and padding), depth, scored (1 for a  |
    |         |                |         | valid score), frontier (1 where selectable)        |
    | score   | (max_nodes,)   | float64 | raw score, higher is better (0 where unscored or   |
    |         |                |         | padding)                                           |
    | globals | (4,)           | float64 | root_slots, baseline, rounds (k), attempts (N)     |

    Column names: :data:`NODE_COLUMNS`, :data:`GLOBAL_COLUMNS`. Scores are raw, never
    normalised: q depends on the world's best recorded score, which a policy must not learn.
    The capacity ``max_nodes`` is :data:`DEFAULT_MAX_NODES` (1,024) unless given, whatever the
    world: the shape of an observation never tells the world's size. Nothing in the
    observation, the spaces or the info depends on unrevealed nodes, except through the frontier
    (a revealed leaf off the frontier is where the original run stopped; ``root_slots`` tells
    how many more branches the root may open, capped at W). Each observation is a fresh copy
    (``share_obs=True``: read-only views of the env's buffers, overwritten by the next step, for
    callers that copy what they keep; the action mask too).

    ## Rewards
    The change of the replay score ``V = max q - beta1 * N + beta2 * N / max(1, k)`` caused by
    the step (V is 0 before the first step), so an episode's rewards sum to its final V. q is 0
    at the baseline and 1 at the world's best recorded score: the reward is the one quantity a
    step returns that depends on a recorded fact the policy has not seen (the best recorded
    score, through q's scale). It is the training signal, never part of the observation or info.

    ## Starting State
    Only the root is revealed. The env is deterministic: ``seed`` changes nothing.

    ## Episode End
    Terminated when the batch has no legal selection (see Action Space) or nothing is left to
    reveal. Truncated when ``k`` reaches ``max_rounds``, or, with an explicit ``max_nodes``
    smaller than the world, when the next batch might not fit in the free rows (fewer free rows
    than ``min(W, root_slots + open nodes)``: decided from the frontier alone;
    ``info["capacity_full"]``, and a warning the first time). A world that fits the capacity is
    never cut short; one bigger than the default capacity is an error at make time.

    ## Info
    ``view`` (a :class:`dream_gym.view.PrefixView`, the policy interface's input),
    ``frontier`` ({id: allowed multiplicity}), ``action_mask`` (see Action Space), ``attempts``
    (N), ``rounds`` (k), ``new_ids``, ``dropped`` ([(selection, reason)], empty unless
    strict=False dropped something) and, when they apply, ``illegal_stop`` and
    ``capacity_full``. V so far is the sum of the rewards (``env.unwrapped.session.value``).
    Infos, observations, views and the env itself pickle and deep-copy (async vector envs and
    SB3's vector envs need it); a copied or unpickled env continues the same episode.

    ## Rendering
    ``render_mode="ansi"``: a text drawing of the revealed tree. ``"rgb_array"``: the revealed
    tree as an image (``uint8`` array, 480 x 640 x 3; nodes at their depth, coloured by score,
    the frontier ringed, the best revealed node starred), drawn with matplotlib's Agg canvas
    without touching pyplot or the caller's backend: the frames ``gymnasium.wrappers.RecordVideo``
    records (it needs moviepy), and what SB3's ``make_vec_env`` asks for.

    ## Arguments
    ``world`` (folder, shipped world name, ``namespace/name-vN/<world>`` or a World),
    ``workers`` (W, default the world's), ``beta`` (budget preference shown to policies, in
    [0, 1]), ``beta1``, ``beta2`` (score coefficients), ``max_rounds`` (K2, default none),
    ``frontier`` ("leaves" | "any", default the world's), ``max_nodes`` (observation capacity,
    default :data:`DEFAULT_MAX_NODES`), ``strict`` (default False), ``share_obs`` (default
    False), ``render_mode`` (None | "ansi" | "rgb_array").

    ## Registered ids
    ``DreamGym/Replay-v1`` (pass ``world=``) and one ``DreamGym/<world>-v1`` per shipped world,
    whose kwargs hold the full dataset reference (``{"world": "dream-gym/recorded-v1/<world>"}``).
    The ``-vN`` of an id is this env's behaviour version (below); the dataset's own version is
    the ``-vN`` inside that reference. All have ``vector_entry_point``
    :class:`dream_gym.vector_env.ReplayVectorEnv`.

    ## Version History
    * v1 (2026-12): the default capacity is the constant :data:`DEFAULT_MAX_NODES` instead of
      the world's size (which the observation's shape told); a world bigger than it is an error
      at make time naming ``max_nodes``; an explicit smaller capacity truncates when the next
      batch might not fit (from the frontier; before, from the world's size).
      ``info["replay_score"]`` removed (through q it told the world's best recorded score);
      ``info["action_mask"]`` added; ``render_mode="rgb_array"``; the env, its infos and views
      pickle and deep-copy. The v0 ids (``DreamGym/Replay-v0``, ``DreamGym/<world>-v0`` of
      recorded-v0 worlds) stay registered as aliases of v1; Gymnasium warns that they are out
      of date.
    * v0 (unreleased; changes before the first release are listed here):
      - 2026-12: every element of the action space is valid (``strict=False`` by default; an
        action with no legal selection stops); capacity defaults to the world's size; the
        observation is three arrays (``nodes``, ``score``, ``globals``) instead of ten, written
        row by row. Then a faster step (same spaces, still a fresh observation every step):
        ``info["frontier"]`` lists its ids in frontier order (the root first).
      - 2026-11: initial version.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(
        self,
        world: World | str | os.PathLike[str],
        workers: int | None = None,
        beta: float = 0.5,
        beta1: float = DEFAULT_BETA1,
        beta2: float = DEFAULT_BETA2,
        max_rounds: int | None = None,
        frontier: str | None = None,
        max_nodes: int | None = None,
        strict: bool = False,
        share_obs: bool = False,
        render_mode: str | None = None,
    ):
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be None, 'ansi' or 'rgb_array', got {render_mode!r}")
        # What pickling rebuilds the env from (a copy replays the episode's batches on it).
        self._arguments: dict[str, Any] = {
            "world": _portable_reference(world), "workers": workers, "beta": beta, "beta1": beta1, "beta2": beta2,
            "max_rounds": max_rounds, "frontier": frontier, "max_nodes": max_nodes, "strict": strict,
            "share_obs": share_obs, "render_mode": render_mode,
        }
        self.session = ReplaySession(
            resolve_world(world),
            workers=workers,
            beta=beta,
            beta1=beta1,
            beta2=beta2,
            max_rounds=max_rounds,
            frontier=frontier,
            strict=strict,
        )
        self.world = self.session.world
        self._replay = self.session.replay
        workers = self.session.workers
        self.max_nodes = capacity_for(max_nodes, self.world.size, workers, f"world {self.world.id!r}")
        # Truncation is checked only once fewer than W rows are free: before, any batch fits.
        self._rows_safe = self.max_nodes - workers
        self._warned_full = False
        self.share_obs = bool(share_obs)
        self.render_mode = render_mode
        self.action_space = spaces.MultiDiscrete(np.full(workers, self.max_nodes + 1, dtype=np.int64))
        self.observation_space = observation_space(self.max_nodes, workers)
        self._nodes = np.tile(PADDING_ROW, (self.max_nodes, 1))
        self._scores = np.zeros(self.max_nodes, dtype=np.float64)
        self._globals = np.zeros(len(GLOBAL_COLUMNS), dtype=np.float64)
        self._baseline = self.world.baseline_score
        self._globals[BASELINE] = self._baseline
        # Per-slot action masks (W, max_nodes + 1), kept up to date like the observation rows.
        self._mask = np.zeros((workers, self.max_nodes + 1), dtype=np.int8)
        self._mask[:, self.max_nodes] = 1
        # A column of the mask (one value, every slot) is one strided write into its flat bytes.
        self._mask_stride = self.max_nodes + 1
        self._on, self._off = b"\x01" * workers, b"\x00" * workers
        self._root_columns = tuple(bytes([1] * slots + [0] * (workers - slots)) for slots in range(workers + 1))
        # flat memoryviews for single-element writes (typed Any: numpy arrays are buffers)
        self._flat_nodes: Any = memoryview(self._nodes).cast("B").cast("i")  # type: ignore[arg-type]
        self._flat_scores: Any = memoryview(self._scores)  # type: ignore[arg-type]
        self._flat_globals: Any = memoryview(self._globals)  # type: ignore[arg-type]
        self._flat_mask: Any = memoryview(self._mask).cast("B")  # type: ignore[arg-type]
        self._shared = {key: self._read_only(array) for key, array in self._buffers().items()}
        self._shared_mask = self._read_only(self._mask)
        self._used = 0  # rows of _nodes written in this episode (0: never reset)

    def _buffers(self) -> dict[str, np.ndarray]:
        return {"nodes": self._nodes, "score": self._scores, "globals": self._globals}

    @staticmethod
    def _read_only(array: np.ndarray) -> np.ndarray:
        view = array.view()
        view.flags.writeable = False
        return view

    # -- observation encoding: only the rows a step changed are written -------------------
    def _write_step(self, new_ids: Sequence[int], parents: Sequence[int]) -> None:
        """Write the rows of the new nodes, and the frontier flags and mask columns the step
        changed (``parents``: the new nodes' parents, i.e. the batch, whose members may leave
        the frontier).

        A node's row is packed in one ``struct`` call and single elements go through flat
        memoryviews: a fraction of the cost of numpy indexing for the few elements a step changes.
        """
        replay = self._replay
        # the hot path reads the session's node list and the replay's frontier set directly
        views, is_open, flat, scores = self.session._nodes, replay._open, self._flat_nodes, self._flat_scores
        mask, stride = self._flat_mask, self._mask_stride
        root_selected = False
        for obs_id, parent in zip(new_ids, parents):  # noqa: B905 - same length by construction
            view = views[obs_id]
            score = view.score
            opened = obs_id in is_open
            if score is None:
                _pack_row(flat, obs_id * _ROW_BYTES, 1, parent, view.depth, 0, opened)
            else:
                scores[obs_id] = score
                _pack_row(flat, obs_id * _ROW_BYTES, 1, parent, view.depth, 1, opened)
            if opened:
                mask[obs_id::stride] = self._on
            if parent == ROOT:
                root_selected = True
            elif parent not in is_open:  # a selected node leaves the frontier, or stays on it ("any")
                flat[parent * _WIDTH + FRONTIER] = 0
                mask[parent::stride] = self._off
        glob = self._flat_globals
        if root_selected:  # the root's flag, slots and mask change only when it is selected
            root_slots = replay.root_slots
            flat[ROOT * _WIDTH + FRONTIER] = 1 if root_slots else 0
            glob[ROOT_SLOTS] = root_slots
            self._write_root_mask(root_slots)
        glob[ROUNDS] = replay.rounds
        glob[ATTEMPTS] = replay.attempts
        self._used = new_ids[-1] + 1

    def _write_root_mask(self, root_slots: int) -> None:
        self._flat_mask[ROOT :: self._mask_stride] = self._root_columns[root_slots]

    def _write_reset(self) -> None:
        """Back to the root alone: clear the rows the last episode wrote, write the root's."""
        used = self._used
        self._nodes[:used] = PADDING_ROW  # only the rows the last episode wrote
        self._scores[:used] = 0.0
        self._mask[:, :used] = 0
        replay = self.session.replay
        root = self.session.node(ROOT)
        if root.score is not None:
            self._scores[ROOT] = root.score
        _pack_row(self._flat_nodes, 0, 1, -1, 0, root.score is not None, replay.root_slots > 0)
        _pack_globals(self._flat_globals, 0, replay.root_slots, self._baseline, 0, 0)
        self._write_root_mask(replay.root_slots)
        self._used = 1

    def _result(self, new_ids: list[int], dropped: list[tuple[object, str]]) -> tuple[dict[str, np.ndarray],
                                                                                     dict[str, Any]]:
        """The observation (fresh copies unless ``share_obs``) and the info of the current state."""
        if self.share_obs:
            obs, action_mask = self._shared, self._shared_mask
        else:
            obs = {"nodes": self._nodes.copy(), "score": self._scores.copy(), "globals": self._globals.copy()}
            action_mask = self._mask.copy()
        replay = self._replay
        return obs, {
            "view": self.session.view(),
            "frontier": replay.frontier_counts(),
            "action_mask": action_mask,
            "attempts": replay.attempts,
            "rounds": replay.rounds,
            "new_ids": new_ids,
            "dropped": dropped,
        }

    # -- gymnasium API ----------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)  # the replay is deterministic; seeding only for API conformance
        self.session.reset()
        self._write_reset()
        return self._result([ROOT], [])

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if type(action) is list and self.max_nodes not in action:
            batch = action  # the common programmatic case: nothing to convert or filter
        else:
            batch = self._batch_from_action(action)
        session = self.session
        new_ids, reward, terminated, truncated, dropped = session.step(batch)
        if new_ids:
            self._write_step(new_ids, session.batches[-1])
            full = self._used > self._rows_safe and not session.done and self._next_batch_may_overflow()
            if full:  # the capacity cannot hold the next batch
                session.truncate()
                truncated = True
                self._warn_full()
            obs, info = self._result(new_ids, dropped)
            if full:
                info["capacity_full"] = True
        else:
            obs, info = self._result(new_ids, dropped)
            if batch:
                info["illegal_stop"] = True
        return obs, reward, terminated, truncated, info

    def _next_batch_may_overflow(self) -> bool:
        """Whether the largest batch the frontier allows next would need more rows than are free.
        Only the frontier decides (never the world's size), so the cut is the same for any two
        worlds that agree on what is revealed."""
        replay = self._replay
        largest = min(replay.workers, replay.root_slots + len(replay._open))
        return self._used + largest > self.max_nodes

    def _warn_full(self) -> None:
        if not self._warned_full:
            self._warned_full = True
            warnings.warn(
                f"max_nodes={self.max_nodes}: the episode was truncated when the next batch might not fit in "
                "the free observation rows (info['capacity_full']); leave max_nodes unset, or pass at least the "
                "world's size, to hold every episode whole",
                stacklevel=3,
            )

    def _batch_from_action(self, action: Any) -> list[Any]:
        if isinstance(action, np.ndarray):
            action = action.reshape(-1).tolist()
        elif type(action) is not list and (isinstance(action, (str, bytes)) or not isinstance(action, Sequence)):
            raise TypeError(f"action must be a sequence of node ids, got {type(action).__name__}")
        pad = self.max_nodes  # padding means "no selection"; anything else is judged by the rules
        if pad not in action:  # the common case: nothing to filter (a C-level scan)
            return action  # type: ignore[no-any-return]
        return [a for a in action if a != pad or not isinstance(a, (int, np.integer)) or isinstance(a, bool)]

    def action_masks(self) -> np.ndarray:
        """Per-slot legality masks, concatenated (sb3-contrib's MultiDiscrete mask layout): the
        masks of ``info["action_mask"]`` as one flat bool array.

        Every slot may hold the padding value; slots beyond ``root_slots`` cannot hold the root.
        Duplicate non-root selections across slots cannot be masked per slot: they are dropped.
        """
        return self._mask.astype(bool).reshape(-1)

    def render(self) -> Any:
        if self.render_mode == "ansi":
            return render_tree(self.session.view())
        if self.render_mode == "rgb_array":
            from dream_gym.tree_image import tree_image  # matplotlib loads on the first frame only

            return tree_image(self.session.view())
        return None

    # -- copies: rebuilt from the arguments, the episode replayed ------------------------
    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_env, (type(self), self._arguments, self._episode_state()))

    def __deepcopy__(self, memo: dict[int, Any]) -> ReplayEnv:
        # The world is immutable: the copy shares it instead of copying every record.
        return _restore_env(type(self), {**self._arguments, "world": self.world}, self._episode_state())

    def _episode_state(self) -> dict[str, Any]:
        session = self.session
        return {
            "started": self._used > 0,
            "batches": [list(batch) for batch in session.batches],
            "stopped": session.terminated and not self._replay.exhausted,  # by an empty batch
            "warned_full": self._warned_full,
            "np_random": self._np_random,
            "np_random_seed": self._np_random_seed,
        }


def _portable_reference(world: World | str | os.PathLike[str]) -> World | str:
    """A world reference that resolves the same in another process: folders become absolute."""
    if isinstance(world, World):
        return world
    if is_path(world, "is_dir"):
        return str(Path(world).expanduser().resolve())
    return os.fspath(world)


def _restore_env(cls: type[ReplayEnv], arguments: dict[str, Any], state: dict[str, Any]) -> ReplayEnv:
    """An env built from ``arguments`` and brought to the state of the episode it was copied in
    (the replay is deterministic: the same batches give the same observations and flags)."""
    env = cls(**arguments)
    env._np_random, env._np_random_seed = state["np_random"], state["np_random_seed"]
    if state["started"]:
        env.session.reset()
        env._write_reset()
        env._warned_full = True  # the original warned already, or will
        for batch in state["batches"]:
            env.step(batch)
        if state["stopped"] and not env.session.done:
            env.session.step([])
    env._warned_full = state["warned_full"]
    return env


# -- registration ------------------------------------------------------------------------------
def shipped_world_ids() -> dict[str, str]:
    """``DreamGym/<world>-v1`` -> the full dataset reference ``<dataset id>/<world>``, for every
    world of every shipped dataset (world names are unique across them; the default dataset wins)."""
    ids: dict[str, str] = {}
    for dataset_id in shipped_datasets():
        for name in shipped_world_names(dataset_id):
            ids.setdefault(f"DreamGym/{name}-v{ENV_VERSION}", f"{dataset_id}/{name}")
    return ids


# The RL training envs (dream_gym.rl.gym_envs): id -> factory. Their default kwargs are the pool
# the shipped models were trained on, written out in full so that ``env.spec`` names it.
TRAINING_ENVS = {
    "DreamGym/Macro-v0": "dream_gym.rl.gym_envs:macro_env",
    "DreamGym/Node-v0": "dream_gym.rl.gym_envs:node_env",
    "DreamGym/Options-v0": "dream_gym.rl.gym_envs:options_env",
}
TRAINING_VECTOR_ENVS = {"DreamGym/Macro-v0": "dream_gym.rl.gym_envs:macro_vector_env"}
SHIPPED_MODELS_POOL: dict[str, Any] = {
    "worlds": "dream-gym/recorded-v1:train,dream-gym/recorded-v0:train",
    "prefixes": [50, 100, 200],
    "objective": "v2",
}


def register_envs() -> None:
    """Register ``DreamGym/Replay-v1``, one ``DreamGym/<world>-v1`` per shipped world (kwargs: the
    world's dataset reference), the v0 ids as aliases, and the RL training envs of
    :data:`TRAINING_ENVS`. Entry points are strings: nothing is imported until an env is made."""
    entry_point, vector_entry_point = "dream_gym.env:ReplayEnv", "dream_gym.vector_env:ReplayVectorEnv"

    def register(env_id: str, **kwargs: Any) -> None:
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, vector_entry_point=vector_entry_point, kwargs=kwargs)

    register(f"DreamGym/Replay-v{ENV_VERSION}")
    register("DreamGym/Replay-v0")  # the old id: an alias of v1 (Gymnasium warns it is out of date)
    world_ids = shipped_world_ids()
    for env_id, reference in world_ids.items():
        register(env_id, world=reference)
    references = {reference.rsplit("/", 1)[-1]: reference for reference in world_ids.values()}
    for env_id, name in shipped_env_ids().items():  # the old ids DreamGym/<world>-v<dataset version>
        register(f"DreamGym/{name}-v{ENV_VERSION}", world=references.get(name, name))
        register(env_id, world=references.get(name, name))
    for env_id, factory in TRAINING_ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=factory, kwargs=dict(SHIPPED_MODELS_POOL),
                         vector_entry_point=TRAINING_VECTOR_ENVS.get(env_id))
