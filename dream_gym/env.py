"""Gymnasium adapter over a replay session: ``gym.make("DreamGym/Replay-v0", world=...)``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from dream_gym.registry import resolve_world, shipped_env_ids
from dream_gym.replay import ROOT
from dream_gym.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.session import ReplaySession
from dream_gym.view import PrefixView, render_tree
from dream_gym.world import World

_INT_MAX = np.iinfo(np.int64).max


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
    ``max_nodes`` for "no selection". Programmatic callers may pass any sequence of ids
    (``[0, 0, 3]``); ``[]`` (or all padding) stops. With ``strict=True`` (default) an illegal
    selection raises :class:`dream_gym.replay.IllegalBatchError` naming the id and the reason;
    with ``strict=False`` illegal selections are dropped and listed in ``info["dropped"]``
    (an all-illegal batch then stops the episode). ``action_masks()`` gives the per-slot masks
    MaskablePPO expects.

    ## Observation Space
    A ``Dict`` of arrays padded to ``max_nodes`` (observed ids index them):

    | key          | shape        | meaning                                                  |
    |--------------|--------------|----------------------------------------------------------|
    | revealed     | (max_nodes,) | 1 for observed ids in use                                |
    | parent       | (max_nodes,) | parent's observed id (-1 for the root and padding)       |
    | depth        | (max_nodes,) | depth in the tree (root 0)                               |
    | score        | (max_nodes,) | raw score, higher is better (0 where unscored/padding)   |
    | scored       | (max_nodes,) | 1 where the node has a valid score                       |
    | frontier     | (max_nodes,) | 1 where the node may be selected                         |
    | root_slots   | (1,)         | times the root may appear in the next batch              |
    | baseline     | (1,)         | the baseline score                                       |
    | rounds       | (1,)         | decision rounds taken (k)                                |
    | attempts     | (1,)         | attempts revealed (N)                                    |

    Scores are raw, never normalised: q depends on the world's best recorded score, which a
    policy must not learn. The observation never depends on unrevealed nodes, except through
    the frontier (a revealed leaf off the frontier is where the original run stopped).

    ## Rewards
    The change of the replay score ``V = max q - beta1 * N + beta2 * N / max(1, k)`` caused by
    the step (V is 0 before the first step), so an episode's rewards sum to its final V.

    ## Starting State
    Only the root is revealed. The env is deterministic: ``seed`` changes nothing.

    ## Episode End
    Terminated when the batch is empty or nothing is left to reveal. Truncated when ``k``
    reaches ``max_rounds``, or when fewer than W free observation slots remain
    (``info["capacity_full"]``: raise ``max_nodes`` for large worlds).

    ## Info
    ``view`` (a :class:`dream_gym.view.PrefixView`, the policy interface's input),
    ``frontier`` ({id: allowed multiplicity}), ``replay_score`` (V so far), ``attempts`` (N),
    ``rounds`` (k), ``new_ids`` and, with ``strict=False``, ``dropped``.

    ## Arguments
    ``world`` (folder, shipped world name, ``namespace/name-vN/<world>`` or a World),
    ``workers`` (W, default the world's), ``beta`` (budget preference shown to policies, in
    [0, 1]), ``beta1``, ``beta2`` (score coefficients), ``max_rounds`` (K2, default none),
    ``frontier`` ("leaves" | "any", default the world's), ``max_nodes`` (observation capacity,
    default 512), ``strict`` (default True), ``render_mode`` (None | "ansi").

    ## Version History
    * v0: initial version.
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
        max_nodes: int = 512,
        strict: bool = True,
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
        workers = self.session.workers
        if max_nodes < workers + 1:
            raise ValueError(f"max_nodes must exceed W={workers}, got {max_nodes}")
        self.max_nodes = int(max_nodes)
        self.render_mode = render_mode
        self.action_space = spaces.MultiDiscrete(np.full(workers, self.max_nodes + 1, dtype=np.int64))
        n = self.max_nodes
        self.observation_space = spaces.Dict(
            {
                "revealed": spaces.MultiBinary(n),
                "parent": spaces.Box(-1, n - 1, shape=(n,), dtype=np.int64),
                "depth": spaces.Box(0, n, shape=(n,), dtype=np.int64),
                "score": spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float64),
                "scored": spaces.MultiBinary(n),
                "frontier": spaces.MultiBinary(n),
                "root_slots": spaces.Box(0, workers, shape=(1,), dtype=np.int64),
                "baseline": spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float64),
                "rounds": spaces.Box(0, _INT_MAX, shape=(1,), dtype=np.int64),
                "attempts": spaces.Box(0, _INT_MAX, shape=(1,), dtype=np.int64),
            }
        )
        self._obs = self._empty_obs()

    # -- observation encoding ---------------------------------------------------------
    def _empty_obs(self) -> dict[str, np.ndarray]:
        n = self.max_nodes
        return {
            "revealed": np.zeros(n, dtype=np.int8),
            "parent": np.full(n, -1, dtype=np.int64),
            "depth": np.zeros(n, dtype=np.int64),
            "score": np.zeros(n, dtype=np.float64),
            "scored": np.zeros(n, dtype=np.int8),
            "frontier": np.zeros(n, dtype=np.int8),
            "root_slots": np.zeros(1, dtype=np.int64),
            "baseline": np.array([self.world.baseline_score], dtype=np.float64),
            "rounds": np.zeros(1, dtype=np.int64),
            "attempts": np.zeros(1, dtype=np.int64),
        }

    def _encode_nodes(self, ids: Sequence[int]) -> None:
        obs, nodes = self._obs, self.session._nodes
        for obs_id in ids:
            node = nodes[obs_id]
            obs["revealed"][obs_id] = 1
            obs["parent"][obs_id] = -1 if node.parent is None else node.parent
            obs["depth"][obs_id] = node.depth
            if node.score is not None:
                obs["score"][obs_id] = node.score
                obs["scored"][obs_id] = 1

    def _observation(self, view: PrefixView) -> dict[str, np.ndarray]:
        obs = self._obs
        frontier = obs["frontier"]
        frontier[:] = 0
        frontier[list(view.frontier)] = 1
        obs["root_slots"][0] = view.root_slots
        obs["rounds"][0] = view.rounds
        obs["attempts"][0] = view.attempts
        return {key: value.copy() for key, value in obs.items()}

    def _info(self, view: PrefixView, new_ids: list[int], dropped: list[tuple[object, str]] | None) -> dict[str, Any]:
        frontier = {obs_id: 1 for obs_id in view.frontier}
        if view.root_slots:
            frontier[ROOT] = view.root_slots
        info: dict[str, Any] = {
            "view": view,
            "frontier": frontier,
            "replay_score": self.session.value,
            "attempts": view.attempts,
            "rounds": view.rounds,
            "new_ids": new_ids,
        }
        if dropped is not None:
            info["dropped"] = dropped
        return info

    # -- gymnasium API ----------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)  # the replay is deterministic; seeding only for API conformance
        self.session.reset()
        self._obs = self._empty_obs()
        self._encode_nodes([ROOT])
        view = self.session.view()
        return self._observation(view), self._info(view, [ROOT], None)

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        batch = self._batch_from_action(action)
        outcome = self.session.step(batch)
        self._encode_nodes(outcome.new_ids)
        view = self.session.view()
        info = self._info(view, outcome.new_ids, None if self.session.strict else outcome.dropped)
        truncated = outcome.truncated
        if not self.session.done and len(view.nodes) + self.session.workers > self.max_nodes:
            self.session.truncate()
            truncated = True
            info["capacity_full"] = True
        return self._observation(view), float(outcome.reward), outcome.terminated, truncated, info

    def _batch_from_action(self, action: Any) -> list[Any]:
        if isinstance(action, np.ndarray):
            action = action.reshape(-1).tolist()
        elif isinstance(action, (str, bytes)) or not isinstance(action, Sequence):
            raise TypeError(f"action must be a sequence of node ids, got {type(action).__name__}")
        return [a for a in action if not (isinstance(a, (int, np.integer)) and a == self.max_nodes)]

    def action_masks(self) -> np.ndarray:
        """Per-slot legality masks, concatenated (sb3-contrib's MultiDiscrete mask layout).

        Every slot may hold the padding value; slots beyond ``root_slots`` cannot hold the root.
        Duplicate non-root selections across slots cannot be masked per slot: use
        ``strict=False`` so they are dropped.
        """
        replay = self.session.replay
        workers, width = self.session.workers, self.max_nodes + 1
        masks = np.zeros((workers, width), dtype=bool)
        masks[:, self.max_nodes] = True
        others = [i for i in replay.frontier() if i != ROOT]
        masks[:, others] = True
        masks[: replay.root_slots, ROOT] = True
        return masks.reshape(-1)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return render_tree(self.session.view())


def register_envs() -> None:
    """Register ``DreamGym/Replay-v0`` and one ``DreamGym/<world>-v<N>`` per shipped world (N: its dataset's version)."""
    if "DreamGym/Replay-v0" not in gym.registry:
        gym.register(id="DreamGym/Replay-v0", entry_point="dream_gym.env:ReplayEnv")
    for env_id, name in shipped_env_ids().items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="dream_gym.env:ReplayEnv", kwargs={"world": name})
