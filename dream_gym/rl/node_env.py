"""``NodeReplayEnv``: replay over a pool of worlds where the policy builds each batch one node at a time.

The node-level counterpart of :class:`~dream_gym.rl.MacroReplayEnv`: instead of a macro action,
each step scores the candidates (the root, which opens a new branch, and every open node) and
picks one of them, or "commit". A batch is applied as one replay round when the policy commits,
when it holds W selections, or when no candidate is left, so the reward (the change of
``value_fn``) comes only at commits and an episode's rewards still sum to its value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np
from gymnasium import spaces

from dream_gym.replay.objectives import ValueFn, replay_value
from dream_gym.replay.settings import ReplaySettings
from dream_gym.rl.discrete import discrete_action
from dream_gym.rl.features import N_FEATURES, view_features
from dream_gym.rl.node_features import N_NODE_FEATURES, RoundPlan
from dream_gym.rl.pool_episodes import PoolEpisodes, WorldRef
from dream_gym.rl.pool_settings import PoolKwargs, pool_signature

BATCH_FEATURE_NAMES: tuple[str, ...] = (
    "batch_size",  # selections already in the batch / W
    "batch_roots",  # of them, new branches (root selections) / W
    "candidates",  # c / (c + W), c = candidates still selectable
)
N_GLOBAL_FEATURES = N_FEATURES + len(BATCH_FEATURE_NAMES)
DEFAULT_CAPACITY = 16


def node_observation(
    plan: RoundPlan, pending: Sequence[int], capacity: int | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The observation of one sub-step, and the candidate index behind each of its rows.

    ``{"globals": (N_GLOBAL_FEATURES,), "nodes": (rows, N_NODE_FEATURES), "mask": (rows + 1,)}``:
    one row per candidate still selectable (zero rows pad up to ``capacity``; None: no padding),
    the mask 1 for real rows, and its last entry (commit) always 1.
    """
    rows, available = plan.features(pending)
    if capacity is not None and len(available) > capacity:
        raise ValueError(f"{len(available)} candidates exceed the capacity {capacity}")  # RoundPlan caps them
    size = len(available) if capacity is None else capacity
    nodes = np.zeros((size, N_NODE_FEATURES), dtype=np.float32)
    nodes[: len(available)] = rows
    mask = np.zeros(size + 1, dtype=np.float32)
    mask[: len(available)] = 1.0
    mask[size] = 1.0
    w = max(1, plan.view.workers)
    roots = sum(1 for i in pending if plan.candidates[i] == 0)
    batch = np.array([len(pending) / w, roots / w, len(available) / (len(available) + w)], dtype=np.float32)
    if plan.view_features is None:  # once per round: the view does not change inside a batch
        plan.view_features = view_features(plan.view)
    return {"globals": np.concatenate([plan.view_features, batch]), "mask": mask, "nodes": nodes}, available


@pool_signature
class NodeReplayEnv(PoolEpisodes):
    """Replay over a pool of worlds, one selection (or commit) a step.

    ## Description
    Each ``reset`` draws a world and a beta as :class:`~dream_gym.rl.MacroReplayEnv` does. Each
    decision round the candidates are the root (while it may open a branch; it may be picked
    up to ``root_slots`` times) and the open non-root nodes, best first, at most
    ``max_candidates`` in all (:class:`~dream_gym.rl.node_features.RoundPlan`).

    ## Action Space
    ``Discrete(max_candidates + 1)``: ``i < max_candidates`` selects the i-th row of the
    observation; ``max_candidates`` commits. Every action is valid: a padding row commits too. A
    value that is no element of the space (a negative index, a float, a text) is a ValueError.
    Committing an empty batch stops the episode.

    ## Observation Space
    ``Dict(globals=Box(N_GLOBAL_FEATURES), mask=Box(max_candidates + 1), nodes=Box(max_candidates,
    N_NODE_FEATURES))``: :func:`node_observation`, from the prefix view only.

    ## Rewards
    0 at a selection; at a commit, the change of ``value_fn`` (default V) since the last commit
    (0 before the first), so an episode's rewards sum to its value.

    ## Episode End
    Terminated when an empty batch is committed or nothing is left to reveal; truncated at
    ``max_rounds``.

    ## Info
    ``world`` (id), ``beta``, ``value`` (value_fn so far), ``replay_score`` (V so far) and
    ``batch`` (the ids applied by this step; [] for a selection). ``env.view`` is the view.

    ## Arguments
    ``worlds``, ``workers``, ``beta``, ``beta1``, ``beta2``, ``max_rounds``, ``value_fn`` and
    ``settings`` as for MacroReplayEnv; ``max_candidates`` (rows of the observation, default 16);
    ``draws``: (W, beta1, beta2) settings, one drawn per episode (default: the one given by
    ``workers``, ``beta1``, ``beta2``).

    ## Version History
    * v0 (unreleased): 2026-12 ``settings`` argument; initial version.
    """

    def __init__(
        self,
        worlds: Sequence[WorldRef],
        *,
        value_fn: ValueFn = replay_value,
        max_candidates: int = DEFAULT_CAPACITY,
        draws: Sequence[tuple[int, float, float]] = (),
        settings: ReplaySettings | None = None,
        **replay: Unpack[PoolKwargs],
    ):
        if max_candidates < 1:
            raise ValueError(f"max_candidates must be >= 1, got {max_candidates}")
        self._init_pool(worlds, settings, replay, draws)
        self.value_fn = value_fn
        self.capacity = int(max_candidates)
        self.action_space = spaces.Discrete(self.capacity + 1)
        self.observation_space = spaces.Dict({
            "globals": spaces.Box(-1.0, 1.0, shape=(N_GLOBAL_FEATURES,), dtype=np.float32),
            "mask": spaces.Box(0.0, 1.0, shape=(self.capacity + 1,), dtype=np.float32),
            "nodes": spaces.Box(-1.0, 1.0, shape=(self.capacity, N_NODE_FEATURES), dtype=np.float32),
        })
        self._available = np.zeros(0, dtype=np.int64)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        self._start_episode(seed, options)
        self._new_round()
        return self._observe(), self._info([])

    def _new_round(self) -> None:
        assert self.session is not None
        self.view = self.session.view()
        self.plan = RoundPlan(self.view, self.capacity)
        self.pending: list[int] = []

    def _observe(self) -> dict[str, np.ndarray]:
        obs, self._available = node_observation(self.plan, self.pending, self.capacity)
        return obs

    def _info(self, batch: list[int]) -> dict[str, Any]:
        assert self.session is not None
        return {"world": self.session.world.id, "beta": self.session.beta, "value": self._value,
                "replay_score": self.session.value, "batch": batch}

    def action_masks(self) -> np.ndarray:
        """Rows that hold a candidate, and commit (always allowed), for MaskablePPO."""
        if self.session is None:
            raise RuntimeError("call reset() before action_masks()")
        mask = np.zeros(self.capacity + 1, dtype=bool)
        mask[: len(self._available)] = True
        mask[self.capacity] = True
        return mask

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        session = self.session
        if session is None:
            raise RuntimeError("call reset() before step()")
        if session.done:
            raise RuntimeError("the episode is over; call reset() first")
        row = discrete_action(self.action_space, action)
        if 0 <= row < len(self._available):  # a selection
            self.pending.append(int(self._available[row]))
            obs = self._observe()
            if len(self.pending) < self.view.workers and len(self._available):
                return obs, 0.0, False, False, self._info([])
        # commit: asked for (or a padding row), the batch is full, or no candidate is left
        batch = [self.plan.candidates[i] for i in self.pending]
        session.step(batch)
        reward = self._reward()
        if not session.done:
            self._new_round()
        else:
            self.pending = []
        return self._observe(), reward, session.terminated, session.truncated, self._info(batch)


__all__ = ["BATCH_FEATURE_NAMES", "DEFAULT_CAPACITY", "N_GLOBAL_FEATURES", "NodeReplayEnv", "node_observation"]
