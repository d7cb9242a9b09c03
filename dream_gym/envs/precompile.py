"""Compile the replay engine's kernels now: ``python -m dream_gym.envs.precompile``.

A kernel compiles on its first use (a few seconds) and numba caches it beside the package for
later processes. On a fresh install, the processes that start side by side (test workers, job
processes, a grid's episodes) would each compile it before the first of them has written the
cache. ``make`` runs this once after installing; running it again loads the cache and returns.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dream_gym.envs.env import ReplayEnv
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.replay.vector import VectorReplay, WorldPool
from dream_gym.world.tree import World, build_world
from dream_gym.world.writer import new_meta


def tiny_world() -> World:
    """A root with two children, one of them continued: every kernel's path is taken."""
    records: list[dict[str, Any]] = [
        {"id": "root", "parent": None, "score": 1.0},
        {"id": "a", "parent": "root", "score": 1.5, "round": 1, "worker": 0},
        {"id": "b", "parent": "root", "score": None, "round": 1, "worker": 1, "error": "failed"},
        {"id": "c", "parent": "a", "score": 2.0, "round": 2, "worker": 0},
    ]
    return build_world(new_meta("precompile", "precompile", workers=2), records)


def precompile() -> float:
    """Step the env, the vector env and the RL envs' ranked replay on a tiny world; the seconds it took."""
    started = time.perf_counter()
    world = tiny_world()
    env = ReplayEnv(world)
    _, info = env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(list(info["frontier"])[:2])
        done = terminated or truncated
    vector = ReplayVectorEnv(num_envs=2, world=world)
    vector.reset(seed=0)
    for _ in range(3):
        vector.step(np.zeros((2, world.workers), dtype=np.int64))
    vector.close()
    ranked = VectorReplay(WorldPool([world]), 2, world.workers)  # the RL envs' replay: an open list
    ranked.reset(np.ones(2, dtype=np.bool_), np.zeros(2, dtype=np.int64))
    for _ in range(2):
        batch, _ = ranked.legal_part(ranked.ranked_open(world.workers), np.ones(2, dtype=np.bool_))
        ranked.apply(batch)
    return time.perf_counter() - started


if __name__ == "__main__":
    print(f"dream_gym: the replay kernels are compiled and cached ({precompile():.1f} s)")
