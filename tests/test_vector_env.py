"""The native vector replay env: gym.make_vec with vector_entry_point, every episode the one a
single ReplayEnv gives for the same actions (random actions, mixed-size worlds; its observations,
rewards, flags, infos and action masks, after autoresets too), autoreset modes, capacity and strictness."""

from __future__ import annotations

import random
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st
from worldgen import make_world, node, random_records, world_records

import dream_gym  # noqa: F401  (registers the envs)
from dream_gym.envs.env import DEFAULT_MAX_NODES, ReplayEnv
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.replay.mechanics import IllegalBatchError
from dream_gym.world.tree import World


def mixed_worlds(seed: int, count: int = 4, workers: int = 3) -> list[World]:
    rng = random.Random(seed)
    return [make_world(random_records(rng, rng.randint(2, 70)), world_id=f"m{seed}-{i}", workers=workers,
                       frontier=rng.choice(("leaves", "any"))) for i in range(count)]


def random_actions(env: ReplayVectorEnv, rng: np.random.Generator) -> np.ndarray:
    """Mostly legal selections (so that episodes get long), some padding and illegal ids."""
    actions = env.action_space.sample()
    masks = env.action_masks().reshape(env.num_envs, env.workers, -1)
    for e in range(env.num_envs):
        for j in range(env.workers):
            if rng.random() < 0.8:
                actions[e, j] = rng.choice(np.flatnonzero(masks[e, j]))
    return actions


def run_against_singles(env: ReplayVectorEnv, worlds: list[World], steps: int, seed: int, **single) -> int:
    """Step the vector env and one ReplayEnv per sub-env with the same actions; compare all."""
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)  # reset(seed=) leaves the action space unseeded: the run must not vary
    singles = [ReplayEnv(worlds[i % len(worlds)], max_nodes=env.max_nodes, **single) for i in range(env.num_envs)]
    obs, info = env.reset(seed=seed)
    for i, single_env in enumerate(singles):
        first, _ = single_env.reset()
        for key in first:
            np.testing.assert_array_equal(obs[key][i], first[key], err_msg=key)
    pending = np.zeros(env.num_envs, dtype=bool)
    episodes = 0
    for step in range(steps):
        actions = random_actions(env, rng)
        obs, rewards, terminated, truncated, info = env.step(actions)
        for i, single_env in enumerate(singles):
            if pending[i]:  # next-step autoreset: this step started a new episode
                expected, s_info = single_env.reset()
                assert rewards[i] == 0.0 and not terminated[i] and not truncated[i]
            else:
                expected, reward, term, trunc, s_info = single_env.step(actions[i])
                assert rewards[i] == reward, (step, i)
                assert (terminated[i], truncated[i]) == (term, trunc), (step, i)
                assert info["dropped"][i] == len(s_info["dropped"])
                assert info["illegal_stop"][i] == s_info.get("illegal_stop", False)
                episodes += term or trunc
            for key in expected:
                np.testing.assert_array_equal(obs[key][i], expected[key], err_msg=f"{key} step {step} env {i}")
            assert env.value[i] == single_env.session.value == single_env.value  # V so far (in no info)
            assert (info["attempts"][i], info["rounds"][i]) == (s_info["attempts"], s_info["rounds"])
            np.testing.assert_array_equal(env.action_masks()[i], single_env.action_masks(), err_msg=f"mask {step} {i}")
        pending = terminated | truncated
    return episodes


def test_make_vec_with_the_vector_entry_point() -> None:
    worlds = mixed_worlds(1)
    env = gym.make_vec("DreamGym/Replay-v1", num_envs=5, vectorization_mode="vector_entry_point", world=worlds)
    assert isinstance(env.unwrapped, ReplayVectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert env.unwrapped.max_nodes == DEFAULT_MAX_NODES  # never the pool's largest world
    assert env.single_action_space == gym.spaces.MultiDiscrete([env.unwrapped.max_nodes + 1] * 3)
    obs, info = env.reset(seed=0)
    assert obs["nodes"].shape == (5, env.unwrapped.max_nodes, 5) and env.observation_space.contains(obs)


def test_every_episode_is_the_single_envs_on_random_actions() -> None:
    worlds = mixed_worlds(2, count=5)
    env = ReplayVectorEnv(7, world=worlds, max_rounds=12)
    assert run_against_singles(env, worlds, steps=150, seed=2, max_rounds=12) > 20


@settings(max_examples=15, deadline=None)
@given(draws=st.lists(world_records(min_nodes=1, max_nodes=35), min_size=1, max_size=4),
       workers=st.integers(1, 4), seed=st.integers(0, 1000), frontier=st.sampled_from([None, "leaves", "any"]))
@pytest.mark.slow
def test_vector_and_single_envs_agree_on_any_pool(draws, workers, seed, frontier) -> None:
    worlds = [make_world(records, world_id=f"h{i}", workers=workers) for i, records in enumerate(draws)]
    env = ReplayVectorEnv(5, world=worlds, frontier=frontier)
    run_against_singles(env, worlds, steps=30, seed=seed, frontier=frontier)


def test_an_explicit_smaller_capacity_truncates_flags_and_warns_once() -> None:
    big = make_world([node("root", None, 0.0)] + [node(f"n{i}", "root", float(i)) for i in range(1, 30)], workers=2)
    worlds = [big, make_world([node("root", None, 0.0), node("a", "root", 1.0)], workers=2)]
    env = ReplayVectorEnv(2, world=worlds, max_nodes=8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_against_singles(env, worlds, steps=40, seed=3) > 2
    assert len([w for w in caught if "episodes were truncated" in str(w.message)]) == 1  # the single env warns too


def test_same_step_autoreset_returns_the_last_observation_in_info() -> None:
    worlds = mixed_worlds(4)
    env = ReplayVectorEnv(4, world=worlds, autoreset_mode="SameStep")
    single = ReplayEnv(worlds[0], max_nodes=env.max_nodes)
    env.reset()
    single.reset()
    stop = np.full((4, 3), env.max_nodes)  # all padding: every episode stops
    env.step(np.zeros((4, 3), dtype=np.int64))
    last, *_, s_info = single.step([0, 0, 0])
    obs, rewards, terminated, truncated, info = env.step(stop)
    assert terminated.all() and info["_final_obs"].all() and info["_final_info"].all()
    # Gymnasium's layout: an object array over the sub-envs, each entry that env's observation
    assert info["final_obs"].shape == (4,) and info["final_obs"].dtype == object
    for key in last:
        np.testing.assert_array_equal(info["final_obs"][0][key], last[key])
    final_info = info["final_info"]  # the last step's info of the ended episodes
    assert final_info["attempts"][0] == s_info["attempts"] > 0 and final_info["_attempts"].all()
    assert {"dropped", "illegal_stop", "capacity_full", "rounds", "_rounds"} <= set(final_info)
    assert (info["attempts"] == 0).all()  # the next episodes'
    fresh, _ = single.reset()
    for key in fresh:
        np.testing.assert_array_equal(obs[key][0], fresh[key])  # already the next episode


def test_same_step_final_entries_are_laid_out_as_gymnasiums_sync_vector_env_lays_them_out() -> None:
    world = mixed_worlds(4)[1]
    same_step = AutoresetMode.SAME_STEP
    native = gym.make_vec("DreamGym/Replay-v1", 4, "vector_entry_point", world=world, autoreset_mode=same_step)
    sync = gym.make_vec("DreamGym/Replay-v1", 4, "sync", vector_kwargs={"autoreset_mode": same_step}, world=world)
    for env in (native, sync):
        env.reset(seed=0)
        env.step(np.zeros((4, 3), dtype=np.int64))
    stop_two = np.array([[native.unwrapped.max_nodes] * 3 if i % 2 else [0, 0, 0] for i in range(4)])
    (*_, ours), (*_, theirs) = native.step(stop_two), sync.step(stop_two)
    np.testing.assert_array_equal(ours["_final_obs"], theirs["_final_obs"])
    np.testing.assert_array_equal(ours["_final_info"], theirs["_final_info"])
    assert ours["final_obs"].dtype == theirs["final_obs"].dtype == object and ours["final_obs"].shape == (4,)
    for i in range(4):
        if theirs["final_obs"][i] is None:
            assert ours["final_obs"][i] is None
        else:
            for key, array in theirs["final_obs"][i].items():
                np.testing.assert_array_equal(ours["final_obs"][i][key], array)
    for key in ("attempts", "rounds"):
        np.testing.assert_array_equal(ours["final_info"][key], theirs["final_info"][key])
        np.testing.assert_array_equal(ours["final_info"][f"_{key}"], theirs["final_info"][f"_{key}"])


def test_disabled_autoreset_needs_a_reset_mask() -> None:
    env = ReplayVectorEnv(3, world=mixed_worlds(5), autoreset_mode=AutoresetMode.DISABLED)
    env.reset()
    stop = np.full((3, 3), env.max_nodes)
    go = np.zeros((3, 3), dtype=np.int64)
    stop[1:] = go[1:]
    _, _, terminated, _, _ = env.step(stop)
    assert terminated.tolist() == [True, False, False]
    with pytest.raises(RuntimeError, match="reset_mask"):
        env.step(go)
    obs, _ = env.reset(options={"reset_mask": np.array([True, False, False])})
    assert obs["globals"][0, 3] == 0 and obs["globals"][1, 3] > 0  # attempts: only sub-env 0 restarted
    env.step(go)


def test_strided_actions_and_reset_masks_step_as_contiguous_ones() -> None:
    """The engine is called compiled for C-contiguous int64 actions and bool masks, without
    numba's type dispatch: a caller's strided views (a column slice, a Fortran-ordered array, a
    mask taken every other element) must step exactly as their contiguous copies."""
    worlds = mixed_worlds(7)
    strided, contiguous = ReplayVectorEnv(4, world=worlds), ReplayVectorEnv(4, world=worlds)
    rng = np.random.default_rng(7)
    for env in (strided, contiguous):
        env.reset(seed=0)
    for step in range(30):
        actions = random_actions(contiguous, rng)
        wide = np.zeros((4, 2 * contiguous.workers), dtype=np.int32)
        wide[:, ::2] = actions
        views = (wide[:, ::2], np.asfortranarray(actions))[step % 2]  # int32 and strided, or Fortran order
        got, expected = strided.step(views), contiguous.step(actions)
        for a, b in zip(got, expected, strict=True):
            if isinstance(a, dict):
                for key in ("nodes", "score", "globals", "dropped", "attempts", "rounds"):
                    if key in a:
                        np.testing.assert_array_equal(a[key], b[key], err_msg=f"{key} step {step}")
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"step {step}")
        if step % 10 == 9:  # restart sub-envs 0 and 2 through a strided mask
            every_other = np.array([True, False, False, False, True, False, False, False])[::2]
            for env, mask in ((strided, every_other), (contiguous, every_other.copy())):
                obs, _ = env.reset(options={"reset_mask": mask})
            np.testing.assert_array_equal(strided.value, contiguous.value)


def test_strict_vector_env_raises() -> None:
    env = ReplayVectorEnv(2, world=mixed_worlds(6), strict=True)
    env.reset()
    with pytest.raises(IllegalBatchError, match="sub-env 0, slot 0"):
        env.step(np.array([[5, 0, 0], [0, 0, 0]]))


def test_actions_of_another_shape_are_refused_not_reshaped() -> None:
    """(W, N) actions hold N x W ids too: reshaped, each episode would get a column of the others'."""
    env = ReplayVectorEnv(2, world=mixed_worlds(6))  # W = 3
    env.reset(seed=0)
    for shape in ((3, 2), (6,), (1, 2, 3), (2, 4)):
        with pytest.raises(ValueError, match=re.escape(f"shape (num_envs, W) = (2, 3), got {shape}")):
            env.step(np.zeros(shape, dtype=np.int64))
    env.step([[0, 0, 0], [0, 0, 0]])  # a nested list of the right shape is an action


def odd_actions(pad: int) -> list[tuple[str, object]]:
    """Actions whose values are no node id, or ids in another type: each one a row of W = 3."""
    return [("floats", np.array([[0.0, 1.0, pad]])), ("bools", np.array([[True, False, True]])),
            ("-1", np.array([[1, -1, pad]])), ("uint64 past int64", np.array([[1, 2**64 - 1, pad]], dtype=np.uint64)),
            ("past int64, a list", [[1, 2**70, pad]]), ("below int64, a list", [[-(2**63) - 5, 2, pad]]),
            ("int32", np.array([[1, 2, pad]], dtype=np.int32)), ("uint16", np.array([[2, 1, pad]], dtype=np.uint16))]


@pytest.mark.parametrize("case", range(8))
def test_values_that_are_no_id_are_judged_as_the_single_env_judges_them(case: int) -> None:
    """A float, a bool, -1 or an integer past int64 is no id in either env: dropped, never cast to
    an id or to "no selection"; the episodes, drops and stops stay the same."""
    world = make_world([node("root", None, 0.0), node("a", "root", 1.0), node("b", "root", 2.0),
                        node("c", "a", 3.0), node("d", "b", 4.0)], workers=3)
    vector = ReplayVectorEnv(1, world=world)
    single = ReplayEnv(world, max_nodes=vector.max_nodes)
    vector.reset(seed=0)
    single.reset(seed=0)
    name, odd = odd_actions(vector.max_nodes)[case]
    for action in ([[0, 0, vector.max_nodes]], odd):
        _, reward, term, trunc, s_info = single.step(action[0])
        _, rewards, terminated, truncated, info = vector.step(action)
        assert (rewards[0], terminated[0], truncated[0]) == (reward, term, trunc), name
        assert info["dropped"][0] == len(s_info["dropped"]) and info["illegal_stop"][0] == s_info.get("illegal_stop", False), name
    assert info["dropped"][0] >= 1 or name in ("int32", "uint16"), name
    assert vector.value[0] == single.value, name


def test_a_ragged_action_is_refused_naming_the_shape() -> None:
    env = ReplayVectorEnv(2, world=mixed_worlds(6))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=re.escape("shape (num_envs, W) = (2, 3)")):
        env.step([[0, 0, 0], [0, 0]])


def test_mixed_recorded_w_needs_an_explicit_w() -> None:
    worlds = [make_world(random_records(random.Random(1), 5), workers=2),
              make_world(random_records(random.Random(2), 5), workers=3)]
    with pytest.raises(ValueError, match="pass workers="):
        ReplayVectorEnv(2, world=worlds)
    assert ReplayVectorEnv(2, world=worlds, workers=2).workers == 2


def test_the_compiled_step_counts_no_references() -> None:
    """Reference counting in the step's inlined helpers was most of the cost of a step: the
    engine is compiled without it (a fresh compile with the kernel's own options, not the cache)."""
    from compiled import counts_references

    from dream_gym.replay.vector_engine import step_kernel

    env = ReplayVectorEnv(3, world=mixed_worlds(3))
    env.reset(seed=0)
    env.step(env.action_space.sample())
    assert not counts_references(step_kernel)


def test_reset_options_but_the_mask_are_refused_as_the_single_env_refuses_them() -> None:
    # they were ignored: beta stayed 0.5 and W the recorded one, as if taken
    vec = gym.make_vec("DreamGym/cp26-fixed-w4-s0-v1", num_envs=2, vectorization_mode="vector_entry_point")
    with pytest.raises(ValueError, match="takes no options but reset_mask, got 'beta', 'workers'"):
        vec.reset(options={"beta": 0.9, "workers": 1})
    vec.reset(options={"reset_mask": np.array([True, False])})  # the documented one still works


def test_a_count_that_is_no_whole_number_is_refused() -> None:
    # 2.5 envs were 2, a max_nodes of 10.5 was 10 and "100" a TypeError from a comparison
    with pytest.raises(ValueError, match="num_envs must be a whole number >= 1, got 2.5"):
        ReplayVectorEnv(2.5, "cp26-fixed-w4-s0")  # type: ignore[arg-type]
    for max_nodes in (10.5, "100", True):
        with pytest.raises(ValueError, match="max_nodes must be a whole number"):
            gym.make("DreamGym/Replay-v1", world="cp26-fixed-w4-s0", max_nodes=max_nodes)
