"""The observation's layout (its columns), its space and its capacity, shared by the env and the vector env."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from dream_gym.replay.settings import is_whole

# Columns of the observation's "nodes" matrix (one row per observed id) and "globals" vector.
NODE_COLUMNS: tuple[str, ...] = ("revealed", "parent", "depth", "scored", "frontier")
GLOBAL_COLUMNS: tuple[str, ...] = ("root_slots", "baseline", "rounds", "attempts")
REVEALED, PARENT, DEPTH, SCORED, FRONTIER = range(len(NODE_COLUMNS))
ROOT_SLOTS, BASELINE, ROUNDS, ATTEMPTS = range(len(GLOBAL_COLUMNS))
PADDING_ROW = np.array([0, -1, 0, 0, 0], dtype=np.int32)  # a row no revealed node uses

# The observation capacity when ``max_nodes`` is not given: a constant, so that the shape of an
# observation never tells a policy how big the world is. 1,024 holds every shipped world (the
# largest has 1,001 nodes) and every imported real run (at most 201).
DEFAULT_MAX_NODES = 1024


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


def view_observation(view: Any, max_nodes: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The observation and action mask a :class:`~dream_gym.envs.env.ReplayEnv` of capacity
    ``max_nodes`` gives at the decision ``view`` describes (a
    :class:`~dream_gym.replay.view.PrefixView`): everything in them is what the view reveals, so a
    model trained on the env acts on views (tests/test_rl_replay_models.py checks it equals the
    env's at every step). The mask is (W, max_nodes + 1): frontier ids, the root in the first
    ``root_slots`` slots, padding everywhere."""
    nodes = np.broadcast_to(PADDING_ROW, (max_nodes, len(NODE_COLUMNS))).copy()
    scores = np.zeros(max_nodes)
    frontier = set(view.frontier)
    for node in view.nodes:
        nodes[node.id] = (1, -1 if node.parent is None else node.parent, node.depth, node.score is not None,
                          node.id in frontier)
        scores[node.id] = 0.0 if node.score is None else node.score
    glob = np.array([view.root_slots, view.baseline_score, view.rounds, view.attempts], dtype=np.float64)
    mask = np.zeros((view.workers, max_nodes + 1), dtype=bool)
    mask[:, [i for i in frontier if i != 0]] = True
    mask[: view.root_slots, 0] = True
    mask[:, max_nodes] = True
    return {"nodes": nodes, "score": scores, "globals": glob}, mask


def capacity_for(max_nodes: int | None, world_size: int, workers: int, what: str = "the world") -> int:
    """The observation capacity: ``max_nodes``, or :data:`DEFAULT_MAX_NODES` when it is None.

    A world bigger than the default capacity is an error here, at make time, rather than episodes
    cut short without the caller asking for it.
    """
    if max_nodes is not None and not is_whole(max_nodes):
        raise ValueError(f"max_nodes must be a whole number (or None), got {max_nodes!r}")  # 10.5 was 10
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
