"""The env's observation encoding and ownership: rows written step by step equal an encoding from
scratch of the same state; by default no later step changes an observation a caller holds (no two
held ones share memory; they are read-only, and the env writes a buffer again only once nobody
holds it); info["view"] is the session's view; node fields cached per world are shared by
sessions without changing what any of them sees."""

from __future__ import annotations

import random

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from worldgen import frontier_st, make_world, random_batch_sequence, random_records, workers_st, world_records

import dream_gym  # noqa: F401  (registers the envs)
from dream_gym.envs.env import GLOBAL_COLUMNS, NODE_COLUMNS, PADDING_ROW, ReplayEnv
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.view import PrefixView


def encoded_from_scratch(view: PrefixView, capacity: int) -> dict[str, np.ndarray]:
    """The observation of a view, computed from nothing but the view (slow, obviously right)."""
    nodes = np.tile(PADDING_ROW, (capacity, 1))
    score = np.zeros(capacity)
    legal = set(view.frontier)
    for node in view.nodes:
        scored = node.score is not None
        nodes[node.id] = (1, -1 if node.parent is None else node.parent, node.depth, int(scored), int(node.id in legal))
        score[node.id] = node.score if scored else 0.0
    globals_ = np.array([view.root_slots, view.baseline_score, view.rounds, view.attempts], dtype=np.float64)
    assert len(globals_) == len(GLOBAL_COLUMNS) and nodes.shape[1] == len(NODE_COLUMNS)
    return {"nodes": nodes, "score": score, "globals": globals_}


def assert_same_observation(obs: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert obs.keys() == expected.keys()
    for key in obs:
        np.testing.assert_array_equal(obs[key], expected[key], err_msg=key)


@settings(max_examples=60, deadline=None)
@given(records=world_records(min_nodes=1, max_nodes=30), workers=workers_st, frontier=frontier_st,
       rng=st.randoms(use_true_random=False))
@pytest.mark.slow
def test_incremental_rows_equal_an_encoding_from_scratch(records, workers, frontier, rng) -> None:
    world = make_world(records, workers=workers, frontier=frontier)
    env = ReplayEnv(world, workers=workers, frontier=frontier)
    for _episode in range(2):  # the second episode starts from the rows the first one wrote
        obs, info = env.reset()
        assert_same_observation(obs, encoded_from_scratch(info["view"], env.max_nodes))
        for batch in random_batch_sequence(world, workers, frontier, rng, max_rounds=10):
            obs, _, terminated, truncated, info = env.step(batch)
            assert_same_observation(obs, encoded_from_scratch(info["view"], env.max_nodes))
            if terminated or truncated:
                break


def test_default_observations_own_their_memory_through_gym_make() -> None:
    world = make_world(random_records(random.Random(4), 60, shape="bushy"), workers=3)
    env = gym.make("DreamGym/Replay-v0", world=world)
    obs, info = env.reset()
    kept = [obs]
    snapshots = [{key: value.copy() for key, value in obs.items()}]
    rng = random.Random(0)
    while True:
        frontier = info["view"].frontier
        obs, _, terminated, truncated, info = env.step([rng.choice(frontier)])
        kept.append(obs)
        snapshots.append({key: value.copy() for key, value in obs.items()})
        if terminated or truncated:
            break
    assert len(kept) > 10
    for i, observation in enumerate(kept):
        assert_same_observation(observation, snapshots[i])  # no later step changed it
        for key, array in observation.items():
            assert not array.flags.writeable, key
            # the env hands out a buffer again only once nobody holds it: never two held at once
            assert not any(np.shares_memory(array, earlier[key]) for earlier in kept[:i]), key


def test_a_caller_cannot_change_an_observation_the_env_writes_again() -> None:
    """Observations are read-only views of a read-only buffer: a caller who wants to change one
    copies it, so a buffer the env writes again (once dropped) holds exactly the env's rows."""
    world = make_world(random_records(random.Random(5), 30), workers=2)
    env, reference = ReplayEnv(world), ReplayEnv(world)
    obs, _ = env.reset()
    reference.reset()
    for batch in ([0], [0, 1], [2], [3], [4]):
        for array in obs.values():
            with pytest.raises(ValueError):
                array[...] = 7
            with pytest.raises(ValueError):
                array.setflags(write=True)
            with pytest.raises(ValueError):
                np.frombuffer(array.base if array.base is not None else array, dtype=array.dtype)[0] = 7
        del array
        mine = {key: value.copy() for key, value in obs.items()}  # a caller normalising its own copy
        for array in mine.values():
            array[...] = 7
        obs, *_ = env.step(batch)  # the dropped observation's buffer is written again
        expected, *_ = reference.step(batch)
        assert_same_observation(obs, expected)
        if not env._done:
            continue
        break
    assert len(env._sets) == 2  # two buffer sets took turns


def test_info_view_is_the_sessions_view_at_every_step() -> None:
    world = make_world(random_records(random.Random(6), 80, shape="mixed"), workers=4)
    env = gym.make("DreamGym/Replay-v0", world=world)
    session = env.unwrapped.session
    _, info = env.reset()
    rng = random.Random(1)
    views = [info["view"]]
    while True:
        assert info["view"] == session.view() and info["view"].to_dict() == session.view().to_dict()
        expected_frontier = {i: (info["view"].root_slots if i == ROOT else 1) for i in info["view"].frontier}
        assert info["frontier"] == expected_frontier and list(info["frontier"]) == list(info["view"].frontier)
        with pytest.raises(TypeError, match="read-only"):  # the env brings it up to date once dropped
            info["frontier"].clear()
        mine = dict(info["frontier"])  # a copy the caller may change
        mine.clear()
        assert info["frontier"] == expected_frontier
        frontier = info["view"].frontier
        batch = rng.sample([i for i in frontier if i != ROOT], min(2, len(frontier) - 1)) or [ROOT]
        _, _, terminated, truncated, info = env.step(batch)
        views.append(info["view"])
        if terminated or truncated:
            break
    # earlier views are unchanged by later steps: each still shows its own prefix
    assert [len(v.nodes) for v in views] == sorted(len(v.nodes) for v in views)
    assert all(v.attempts == len(v.nodes) - 1 for v in views)


def test_sessions_on_one_world_share_the_node_field_cache_and_see_the_same() -> None:
    records = random_records(random.Random(7), 40)
    world, twin = make_world(records, workers=2), make_world(records, workers=2)
    first, second, other = ReplaySession(world), ReplaySession(world), ReplaySession(twin)
    assert first._fields is second._fields and first._fields is not other._fields
    rng = random.Random(3)
    batches = random_batch_sequence(world, 2, world.frontier_rule, rng, max_rounds=15)
    for batch in batches:
        first.step(batch)
    for batch in batches:  # the second session reads the fields the first one cached
        second.step(batch)
        other.step(batch)
    assert first.view() == second.view() == other.view()
    assert first.view().to_dict() == other.view().to_dict()
    assert first.node(len(first.nodes) - 1) is not second.node(len(second.nodes) - 1)  # views are per session


@pytest.mark.parametrize("share_obs", [False, True])
def test_observation_writes_do_not_depend_on_share_obs(share_obs: bool) -> None:
    world = make_world(random_records(random.Random(8), 50, shape="bushy"), workers=3)
    env, reference = ReplayEnv(world, share_obs=share_obs), ReplayEnv(world)
    obs, info = env.reset()
    reference.reset()
    rng = random.Random(2)
    for _ in range(20):
        batch = rng.sample(list(info["view"].frontier), min(3, len(info["view"].frontier)))
        obs, _, terminated, truncated, info = env.step(batch)
        assert_same_observation({k: v.copy() for k, v in obs.items()}, reference.step(batch)[0])
        if terminated or truncated:
            break



def _mappings() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


def test_observations_a_caller_keeps_do_not_each_cost_a_memory_mapping() -> None:
    """Each kept observation holds its buffer set, one block of memory; shared mappings are never
    merged, so a caller keeping ~65,000 observations (or infos: the action mask is in the set)
    reached the kernel's limit of mappings a process may hold, and the env failed with "Cannot
    allocate memory". Private anonymous mappings merge (the vector env's were already private)."""
    from worldgen import node

    env = ReplayEnv(make_world([node("r", None, 0.0)] + [node(f"b{k}", "r", 0.1 * k) for k in range(6)]),
                    workers=2, max_nodes=32)
    kept = []
    env.reset(seed=0)
    before = _mappings()
    while len(kept) < 2000:
        obs, _, terminated, truncated, info = env.step([0, 0])
        kept.append((obs, info))
        if terminated or truncated:
            env.reset()
    assert _mappings() - before < 200  # 2,000 more with shared mappings
