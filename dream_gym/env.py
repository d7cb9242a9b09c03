"""Gymnasium adapter over a replay session: ``gym.make("DreamGym/Replay-v0", world=...)``."""

from __future__ import annotations

import struct
import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from dream_gym.registry import resolve_world, shipped_env_ids
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


class ReplayEnv(gym.Env):  # type: ignore[type-arg]
    """Replay of a recorded discovery tree: choose where the next attempts start.

    ## Description
    A recorded world is the search tree of a finished AI discovery run (root = the initial
    program; every other node one generate-and-evaluate attempt). Each step the agent submits a
    batch of at most W selections from the revealed tree; each selection reveals one recorded
    attempt (SPEC §3): selecting the root (id 0) opens the next branch in creation order and may
    be repeated up to ``root_slots`` times; selecting a revealed non-root node reveals its
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
    instead. ``action_masks()`` gives the per-slot masks MaskablePPO expects.

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
    normalised: q depends on the world's best recorded score, which a policy must not learn. The
    observation never depends on unrevealed nodes, except through the frontier (a revealed leaf
    off the frontier is where the original run stopped) and through its capacity: by default
    ``max_nodes`` is the world's size, so the shape tells the size (pass ``max_nodes`` to hide
    it). Each observation is a fresh copy (``share_obs=True``: read-only views of the env's
    buffers, overwritten by the next step, for callers that copy what they keep).

    ## Rewards
    The change of the replay score ``V = max q - beta1 * N + beta2 * N / max(1, k)`` caused by
    the step (V is 0 before the first step), so an episode's rewards sum to its final V.

    ## Starting State
    Only the root is revealed. The env is deterministic: ``seed`` changes nothing.

    ## Episode End
    Terminated when the batch has no legal selection (see Action Space) or nothing is left to
    reveal. Truncated when ``k`` reaches ``max_rounds``, or, with an explicit ``max_nodes``
    smaller than the world, when fewer than W free rows remain (``info["capacity_full"]``, and a
    warning the first time). With the default capacity no episode is ever cut short.

    ## Info
    ``view`` (a :class:`dream_gym.view.PrefixView`, the policy interface's input),
    ``frontier`` ({id: allowed multiplicity}), ``replay_score`` (V so far), ``attempts`` (N),
    ``rounds`` (k), ``new_ids``, ``dropped`` ([(selection, reason)], empty unless strict=False
    dropped something) and, when they apply, ``illegal_stop`` and ``capacity_full``.

    ## Arguments
    ``world`` (folder, shipped world name, ``namespace/name-vN/<world>`` or a World),
    ``workers`` (W, default the world's), ``beta`` (budget preference shown to policies, in
    [0, 1]), ``beta1``, ``beta2`` (score coefficients), ``max_rounds`` (K2, default none),
    ``frontier`` ("leaves" | "any", default the world's), ``max_nodes`` (observation capacity,
    default the world's size), ``strict`` (default False), ``share_obs`` (default False),
    ``render_mode`` (None | "ansi").

    ## Version History
    * v0 (unreleased; changes before the first release are listed here):
      - 2026-12: every element of the action space is valid (``strict=False`` by default; an
        action with no legal selection stops); capacity defaults to the world's size; the
        observation is three arrays (``nodes``, ``score``, ``globals``) instead of ten, written
        row by row. Then a faster step (same spaces, still a fresh observation every step):
        ``info["frontier"]`` lists its ids in frontier order (the root first).
      - 2026-11: initial version.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        world: World | str,
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
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
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
        if max_nodes is None:
            max_nodes = self.world.size
        elif max_nodes < self.world.size and max_nodes < workers + 1:
            raise ValueError(f"max_nodes must exceed W={workers} (or hold the world's {self.world.size} nodes), "
                             f"got {max_nodes}")
        self.max_nodes = int(max_nodes)
        # Only a capacity below the world's size can fill up.
        self._can_fill = self.max_nodes < self.world.size
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
        # flat memoryviews for single-element writes (typed Any: numpy arrays are buffers)
        self._flat_nodes: Any = memoryview(self._nodes).cast("B").cast("i")  # type: ignore[arg-type]
        self._flat_scores: Any = memoryview(self._scores)  # type: ignore[arg-type]
        self._flat_globals: Any = memoryview(self._globals)  # type: ignore[arg-type]
        self._shared = {key: self._read_only(array) for key, array in self._buffers().items()}
        self._used = 0  # rows of _nodes written in this episode

    def _buffers(self) -> dict[str, np.ndarray]:
        return {"nodes": self._nodes, "score": self._scores, "globals": self._globals}

    @staticmethod
    def _read_only(array: np.ndarray) -> np.ndarray:
        view = array.view()
        view.flags.writeable = False
        return view

    # -- observation encoding: only the rows a step changed are written -------------------
    def _write_step(self, new_ids: Sequence[int], parents: Sequence[int]) -> None:
        """Write the rows of the new nodes and the frontier flags the step changed (``parents``:
        the new nodes' parents, i.e. the batch, whose members may leave the frontier).

        A node's row is packed in one ``struct`` call and single elements go through flat
        memoryviews: a fraction of the cost of numpy indexing for the few elements a step changes.
        """
        replay = self._replay
        # the hot path reads the session's node list and the replay's frontier set directly
        views, is_open, flat = self.session._nodes, replay._open, self._flat_nodes
        root_selected = False
        for obs_id, parent in zip(new_ids, parents):  # noqa: B905 - same length by construction
            view = views[obs_id]
            score = view.score
            if score is None:
                _pack_row(flat, obs_id * _ROW_BYTES, 1, parent, view.depth, 0, obs_id in is_open)
            else:
                self._flat_scores[obs_id] = score
                _pack_row(flat, obs_id * _ROW_BYTES, 1, parent, view.depth, 1, obs_id in is_open)
            if parent == ROOT:
                root_selected = True
            elif parent not in is_open:  # a selected node leaves the frontier, or stays on it ("any")
                flat[parent * _WIDTH + FRONTIER] = 0
        glob = self._flat_globals
        if root_selected:  # the root's flag and slots change only when it is selected
            root_slots = replay.root_slots
            flat[ROOT * _WIDTH + FRONTIER] = 1 if root_slots else 0
            glob[ROOT_SLOTS] = root_slots
        glob[ROUNDS] = replay.rounds
        glob[ATTEMPTS] = replay.attempts
        self._used = new_ids[-1] + 1

    def _write_reset(self) -> None:
        """Back to the root alone: clear the rows the last episode wrote, write the root's."""
        self._nodes[: self._used] = PADDING_ROW  # only the rows the last episode wrote
        self._scores[: self._used] = 0.0
        replay = self.session.replay
        root = self.session.node(ROOT)
        if root.score is not None:
            self._scores[ROOT] = root.score
        _pack_row(self._flat_nodes, 0, 1, -1, 0, root.score is not None, replay.root_slots > 0)
        _pack_globals(self._flat_globals, 0, replay.root_slots, self._baseline, 0, 0)
        self._used = 1

    def _result(self, new_ids: list[int], dropped: list[tuple[object, str]]) -> tuple[dict[str, np.ndarray],
                                                                                     dict[str, Any]]:
        """The observation (fresh copies unless ``share_obs``) and the info of the current state."""
        if self.share_obs:
            obs = self._shared
        else:
            obs = {"nodes": self._nodes.copy(), "score": self._scores.copy(), "globals": self._globals.copy()}
        session = self.session
        view = session.view()
        return obs, {
            "view": view,
            "frontier": self._replay.frontier_counts(),
            "replay_score": session.value,
            "attempts": view.attempts,
            "rounds": view.rounds,
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
            full = self._can_fill and not session.done and self._used + session.workers > self.max_nodes
            if full:  # an explicit capacity below the world's size: fewer than W free rows left
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

    def _warn_full(self) -> None:
        if not self._warned_full:
            self._warned_full = True
            warnings.warn(
                f"max_nodes={self.max_nodes} is smaller than world {self.world.id!r} ({self.world.size} nodes): "
                "the episode was truncated when fewer than W free observation rows remained "
                "(info['capacity_full']); leave max_nodes unset to hold the whole world",
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
        """Per-slot legality masks, concatenated (sb3-contrib's MultiDiscrete mask layout).

        Every slot may hold the padding value; slots beyond ``root_slots`` cannot hold the root.
        Duplicate non-root selections across slots cannot be masked per slot: they are dropped.
        """
        replay = self.session.replay
        workers, width = self.session.workers, self.max_nodes + 1
        masks = np.zeros((workers, width), dtype=bool)
        masks[:, self.max_nodes] = True
        masks[:, replay.open_ids()] = True
        masks[: replay.root_slots, ROOT] = True
        return masks.reshape(-1)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return render_tree(self.session.view())


def register_envs() -> None:
    """Register ``DreamGym/Replay-v0`` (with its native vector env) and one ``DreamGym/<world>-v<N>``
    per shipped world (N: the version of its dataset: -v0 for recorded-v0, -v1 for recorded-v1)."""
    vector_entry_point = "dream_gym.vector_env:ReplayVectorEnv"
    if "DreamGym/Replay-v0" not in gym.registry:
        gym.register(id="DreamGym/Replay-v0", entry_point="dream_gym.env:ReplayEnv",
                     vector_entry_point=vector_entry_point)
    for env_id, name in shipped_env_ids().items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="dream_gym.env:ReplayEnv", kwargs={"world": name},
                         vector_entry_point=vector_entry_point)
