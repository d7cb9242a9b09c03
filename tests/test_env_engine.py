"""ReplayEnv's engine: the layout the env's hot path reads, the observation buffer sets it writes
again only once nobody holds them (whatever the caller keeps: the dict, an array, a numpy view,
a memoryview, the action mask), read-only observations, lazily built views, and a session that
follows the env's episode whenever it is read."""

from __future__ import annotations

import copy
import pickle
import random
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from worldgen import make_world, random_records

import dream_gym  # noqa: F401  (registers the envs)
from dream_gym.envs import env as env_module
from dream_gym.envs.env import ReplayEnv
from dream_gym.replay import engine as episode_engine
from dream_gym.replay import layout
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.view import PrefixView


def world_of(seed: int = 0, n: int = 120, workers: int = 3, **meta: Any):
    return make_world(random_records(random.Random(seed), n, shape="chain"), workers=workers, **meta)


def first_w(info: dict[str, Any], workers: int) -> list[int]:
    return [node for node, times in info["frontier"].items() for _ in range(times)][:workers]


def test_the_env_and_the_engine_read_one_layout() -> None:
    """The env's hot path and the compiled engine name the same slots of the same layout module."""
    shared = [name for name in dir(layout) if name.isupper() and hasattr(env_module, name)]
    assert len(shared) >= 20  # the header slots, statuses, ends and output header the env reads
    for name in shared:
        assert getattr(env_module, name) is getattr(layout, name)
        if hasattr(episode_engine, name):
            assert getattr(episode_engine, name) is getattr(layout, name)
    slots = [getattr(layout, name) for name in dir(layout) if name.startswith("H_")]
    assert len(slots) == len(set(slots)) and max(slots) < layout.HEADER_SIZE  # no slot used twice


def play(env: ReplayEnv, steps: int, keep: Any = None) -> list[tuple[Any, Any]]:
    """Step with W-wide batches; ``keep(obs, info)`` returns what the caller holds on to."""
    obs, info = env.reset()
    held: list[tuple[Any, Any]] = []
    for _ in range(steps):
        obs, _, terminated, truncated, info = env.step(first_w(info, env.workers))
        if keep is not None:
            item = keep(obs, info)
            held.append((np.array(item, copy=True) if not isinstance(item, dict) else
                         {k: v.copy() for k, v in item.items()}, item))
        if terminated or truncated:
            obs, info = env.reset()
    return held


def test_two_buffer_sets_take_turns_when_the_caller_keeps_nothing() -> None:
    env = ReplayEnv(world_of())
    play(env, 200)
    assert len(env._sets) == 2


KEEPERS = {
    "the observation dict": lambda obs, info: obs,
    "an array": lambda obs, info: obs["score"],
    "a column view": lambda obs, info: obs["nodes"][:, 4],
    "a reshaped view": lambda obs, info: obs["nodes"].reshape(-1),
    "a memoryview": lambda obs, info: memoryview(obs["globals"]),
    "np.asarray": lambda obs, info: np.asarray(obs["nodes"]),
    "the action mask": lambda obs, info: info["action_mask"],
    "a mask row": lambda obs, info: info["action_mask"][0],
    "the info": lambda obs, info: info,
}


@pytest.mark.parametrize("what", list(KEEPERS))
def test_whatever_the_caller_keeps_never_changes(what: str) -> None:
    env = ReplayEnv(world_of(1))
    keep = KEEPERS[what]

    def kept(obs: Any, info: Any) -> Any:
        item = keep(obs, info)
        if isinstance(item, memoryview):
            return np.asarray(item)  # compared as an array, still holding the memoryview's array
        if item is info:
            return info["action_mask"]
        return item

    held = play(env, 150, kept)
    assert len(held) == 150
    for snapshot, item in held:
        if isinstance(snapshot, dict):
            for key in snapshot:
                np.testing.assert_array_equal(snapshot[key], item[key])
        else:
            np.testing.assert_array_equal(snapshot, item)
    assert len(env._sets) == episode_engine.MAX_SETS  # the caller holds every set: new ones each step


def test_observations_cannot_be_made_writeable() -> None:
    env = ReplayEnv(world_of(2))
    obs, info = env.reset()
    obs, *_, info = env.step([0])
    for array in (*obs.values(), info["action_mask"], obs["nodes"][1:], info["action_mask"].T):
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array.setflags(write=True)
        with pytest.raises(ValueError):
            array[(0,) * array.ndim] = 1


def test_gymnasium_check_env_passes_and_warns_of_no_shared_data() -> None:
    """A reused buffer would make Gymnasium's checkers warn "... share an object ..."."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make("DreamGym/Replay-v1", world=world_of(3)).unwrapped, skip_render_check=True)
        wrapped = gym.make("DreamGym/Replay-v1", world=world_of(3))  # the passive checker: reset, then steps
        obs, info = wrapped.reset()
        for _ in range(5):
            obs, *_, info = wrapped.step(first_w(info, 3))
    assert not [w for w in caught if "share" in str(w.message)]


def test_views_are_built_only_when_read() -> None:
    env = ReplayEnv(world_of(4, n=300))
    obs, info = env.reset()
    for _ in range(30):
        obs, _, terminated, _, info = env.step(first_w(info, 3))
    revealed = env._revealed
    assert len(revealed) > 30 and not revealed._views  # no node view built yet
    view = info["view"]
    assert "_lazy" in vars(view)
    assert len(view.nodes) == len(revealed) and len(revealed._views) == len(revealed)
    assert view == env.session.view()  # the session, following, sees the same


def test_a_pickled_view_holds_its_own_nodes_only() -> None:
    env = ReplayEnv(world_of(5, n=300))
    obs, info = env.reset()
    first = None
    for step in range(20):
        obs, _, _, _, info = env.step(first_w(info, 3))
        if step == 2:
            first = info["view"]
    assert first is not None
    again = pickle.loads(pickle.dumps(first))
    assert again == first and len(again.nodes) == first.attempts + 1 < len(env._revealed)
    assert "_lazy" not in vars(again) and "_nodes_of" not in vars(again)
    assert isinstance(again, PrefixView)


def test_a_held_session_follows_the_env() -> None:
    world = world_of(6)
    env = ReplayEnv(world)
    session = env.session
    reference = ReplaySession(world, workers=3)
    obs, info = env.reset()
    total = 0.0
    for _ in range(12):
        batch = first_w(info, 3)
        obs, reward, terminated, truncated, info = env.step(batch)
        reference.step(batch)
        total += reward
        assert session.value == reference.value and session.batches == reference.batches
        assert session.view() == info["view"] == reference.view()
        if terminated or truncated:
            break
    assert session.value == pytest.approx(total, abs=1e-12)
    env.reset()
    assert session.attempts == 0 and session.batches == [] and not session.done
    env.step([])  # the empty batch stops
    assert session.done and session.terminated
    # read-only: stepped by hand, it would leave the env's episode unseen (its V, N and k are the env's)
    env.reset()
    env.step([0])
    for write in (lambda: session.step([1]), lambda: session.reset(), lambda: session.truncate()):
        with pytest.raises(RuntimeError, match="follows the env's episode and is read-only"):
            write()
    assert session.attempts == 1 and session.view().attempts == 1
    mine = copy.deepcopy(session)  # a session of its own
    mine.step(list(mine.view().frontier)[:1])
    assert mine.attempts == 2 and session.attempts == 1


def test_stepping_before_reset_or_after_the_end_is_refused() -> None:
    env = ReplayEnv(world_of(7))
    with pytest.raises(RuntimeError, match="reset"):
        env.step([0])
    env.reset()
    env.step([])
    with pytest.raises(RuntimeError, match="reset"):
        env.step([0])


def test_a_capacity_far_above_the_world_costs_rows_not_copies() -> None:
    """With max_nodes far above the world, each step still writes only the rows it changed: the
    buffers a caller dropped are reused (two sets), and the padding rows are never rewritten."""
    world = world_of(8, n=200)
    env = ReplayEnv(world, max_nodes=50_000)
    play(env, 300)
    assert len(env._sets) == 2
    obs, info = env.reset()
    nodes = obs["nodes"]
    assert (nodes[world.size:, 1] == -1).all() and not nodes[world.size:, 0].any()


def test_the_compiled_step_counts_no_references() -> None:
    """Reference counting of the arrays the engine's inlined row writers take was a third of a
    step: the engine is compiled without it (a fresh compile with its own options, not the cache)."""
    from compiled import counts_references

    episode_engine.episode_kernel()  # the one signature
    assert not counts_references(episode_engine._episode_kernel)
