"""The Gymnasium adapter: registration, env_checker, spaces, info, masks, padding, capacity, render."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from worldgen import make_world, node, random_records, write_folder

import dream_gym  # noqa: F401  (registers the envs)
from dream_gym.env import ReplayEnv
from dream_gym.replay import IllegalBatchError
from dream_gym.session import ReplaySession

TREE = [
    node("root", None, 1.0),
    node("a", "root", 2.0),
    node("b", "root", None, error="SyntaxError: nope"),
    node("a1", "a", 3.0),
    node("c", "root", 1.5),
    node("c1", "c", 0.5),
    node("a11", "a1", 5.0),
]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_folder(tmp_path / "toy", TREE, workers=2)


def test_make_with_folder_and_with_world(folder: Path) -> None:
    for world in (folder, str(folder), dream_gym.load_world(folder)):
        env = gym.make("DreamGym/Replay-v0", world=world)
        assert isinstance(env.unwrapped, ReplayEnv)
        obs, info = env.reset(seed=3)
        assert obs["revealed"][0] == 1 and obs["revealed"][1:].sum() == 0
        assert env.action_space == gym.spaces.MultiDiscrete([513, 513])
        env.close()


def test_unknown_world_reference_is_a_lookup_error(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="unknown world"):
        gym.make("DreamGym/Replay-v0", world="no-such-world-anywhere")


def test_env_checker_passes(folder: Path) -> None:
    env = gym.make("DreamGym/Replay-v0", world=folder, strict=False, max_nodes=16, render_mode="ansi")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=False)
    # raw scores are unbounded by design (q is never observed): only the infinity bounds may warn
    unexpected = [str(w.message) for w in caught if "infinity" not in str(w.message)]
    assert unexpected == []


def test_info_keys_and_frontier_multiplicity(folder: Path) -> None:
    env = gym.make("DreamGym/Replay-v0", world=folder, beta1=0.01, beta2=0.1)
    _, info = env.reset()
    assert {"view", "frontier", "replay_score", "attempts", "rounds"} <= set(info)
    assert info["frontier"] == {0: 2} and info["attempts"] == 0 and info["rounds"] == 0
    assert info["replay_score"] == 0.0
    obs, reward, term, trunc, info = env.step([0, 0])
    assert info["new_ids"] == [1, 2]
    assert info["frontier"] == {0: 1, 1: 1}  # the root may open one more branch
    assert (info["attempts"], info["rounds"]) == (2, 1)
    assert info["replay_score"] == pytest.approx(reward)
    assert info["view"].frontier == (0, 1)
    assert obs["root_slots"][0] == 1 and obs["frontier"].tolist()[:3] == [1, 1, 0]
    _, _, _, _, info = env.step([0, 1])
    assert 0 not in info["frontier"] and info["frontier"] == {3: 1, 4: 1}


def test_observation_contents_are_raw(folder: Path) -> None:
    env = ReplayEnv(folder, max_nodes=10)
    env.reset()
    obs, *_ = env.step([0, 0])
    obs, *_ = env.step([1, 0])
    assert obs["revealed"].tolist() == [1] * 5 + [0] * 5
    assert obs["parent"].tolist()[:6] == [-1, 0, 0, 1, 0, -1]
    assert obs["depth"].tolist()[:5] == [0, 1, 1, 2, 1]
    assert obs["score"].tolist()[:5] == [1.0, 2.0, 0.0, 3.0, 1.5]
    assert obs["scored"].tolist()[:5] == [1, 1, 0, 1, 1]
    assert obs["baseline"].tolist() == [1.0]
    assert (obs["rounds"][0], obs["attempts"][0], obs["root_slots"][0]) == (2, 4, 0)
    assert env.observation_space.contains(obs)


def test_minimize_world_observations_are_oriented(tmp_path: Path) -> None:
    recs = [node("root", None, 10.0), node("a", "root", 7.0)]
    env = ReplayEnv(write_folder(tmp_path / "m", recs, workers=1, direction="minimize"), max_nodes=4)
    obs, _ = env.reset()
    assert obs["baseline"][0] == -10.0
    obs, *_ = env.step([0])
    assert obs["score"][:2].tolist() == [-10.0, -7.0]


def test_observations_never_carry_q(tmp_path: Path) -> None:
    """Raising the best recorded score (an unrevealed node) changes rewards, not what is seen."""
    rng = random.Random(5)
    base = random_records(rng, 30, extras=True)
    leaf_parent = base[-1]["id"]
    huge = [*base, node("future", leaf_parent, 1e9)]
    runs = []
    for i, recs in enumerate((base, huge)):
        env = gym.make("DreamGym/Replay-v0", world=write_folder(tmp_path / f"w{i}", recs, workers=2), max_nodes=64)
        obs, info = env.reset()
        trace = [(obs, info["view"].to_dict(), info["frontier"])]
        rewards = []
        for batch in ([0, 0], [0, 1], [2], [0]):
            legal = [b for b in batch if b in info["frontier"]]
            if legal.count(0) > info["frontier"].get(0, 0):
                legal = legal[: info["frontier"].get(0, 0)]
            obs, reward, term, trunc, info = env.step(legal)
            trace.append((obs, info["view"].to_dict(), info["frontier"]))
            rewards.append(reward)
            if term or trunc:
                break
        runs.append((trace, rewards))
        env.close()
    (trace_a, rewards_a), (trace_b, rewards_b) = runs
    assert len(trace_a) == len(trace_b)
    revealed = trace_a[-1][1]["nodes"]
    assert all(n["score"] != 1e9 for n in revealed)  # the future node stayed hidden
    for (obs_a, view_a, front_a), (obs_b, view_b, front_b) in zip(trace_a, trace_b, strict=True):
        assert obs_a.keys() == obs_b.keys()
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key], err_msg=key)
        assert view_a == view_b and front_a == front_b
    assert rewards_a != rewards_b  # q moved: only the reward may show it


def test_padding_means_no_selection(folder: Path) -> None:
    env = ReplayEnv(folder, max_nodes=8)
    env.reset()
    pad = env.max_nodes
    obs, _, term, _, info = env.step(np.array([0, pad]))
    assert info["new_ids"] == [1] and not term
    obs, _, term, trunc, info = env.step(np.array([pad, pad]))
    assert term and not trunc and info["new_ids"] == [] and obs["attempts"][0] == 1


def test_programmatic_actions(folder: Path) -> None:
    env = ReplayEnv(folder)
    env.reset()
    assert env.step([0, 0])[4]["new_ids"] == [1, 2]
    assert env.step((1,))[4]["new_ids"] == [3]
    with pytest.raises(TypeError):
        env.step(5)
    with pytest.raises(TypeError):
        env.step("01")


def test_strict_env_raises_non_strict_drops(folder: Path) -> None:
    env = ReplayEnv(folder)
    env.reset()
    with pytest.raises(IllegalBatchError, match="id 1"):
        env.step([1])
    lenient = ReplayEnv(folder, strict=False)
    lenient.reset()
    _, _, term, _, info = lenient.step([0, 7])
    assert info["new_ids"] == [1] and [s for s, _ in info["dropped"]] == [7] and not term
    _, _, term, _, info = lenient.step([5])
    assert term and info["dropped"]


def test_action_masks_shape_and_semantics(folder: Path) -> None:
    env = ReplayEnv(folder, workers=3, max_nodes=12)
    env.reset()
    width = env.max_nodes + 1
    masks = env.action_masks()
    assert masks.shape == (3 * width,) and masks.dtype == bool
    grid = masks.reshape(3, width)
    assert grid[:, env.max_nodes].all()  # padding always allowed
    assert grid[:, 0].tolist() == [True, True, True]  # 3 root children, W=3
    assert grid[:, 1 : env.max_nodes].sum() == 0
    env.step([0, 0])  # root has 1 branch left; a (1) is open, b (2) has no child
    grid = env.action_masks().reshape(3, width)
    assert grid[:, 0].tolist() == [True, False, False]
    assert grid[:, 1].all() and not grid[:, 2].any() and not grid[:, 3 : env.max_nodes].any()


def test_masked_random_actions_are_always_legal(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    world = make_world(random_records(random.Random(8), 60), workers=3, frontier="any")
    env = ReplayEnv(world, max_nodes=80)
    for _ in range(5):
        env.reset()
        done = False
        while not done:
            grid = env.action_masks().reshape(env.session.workers, -1)
            action, used = [], set()
            for slot in grid:
                choices = [i for i in np.flatnonzero(slot) if i == 0 or i == env.max_nodes or i not in used]
                pick = int(rng.choice(choices))
                used.add(pick)
                action.append(pick)
            _, _, term, trunc, _ = env.step(np.array(action))  # strict: must not raise
            done = term or trunc


def test_capacity_truncation(tmp_path: Path) -> None:
    recs = [node("root", None, 0.0)] + [node(f"n{i}", "root", float(i)) for i in range(1, 20)]
    env = ReplayEnv(make_world(recs, workers=2), max_nodes=6)
    env.reset()
    _, _, term, trunc, info = env.step([0, 0])  # 3 nodes, 3 + W <= 6: room left
    assert not trunc and "capacity_full" not in info
    _, _, term, trunc, info = env.step([0, 0])  # 5 nodes, 5 + W > 6: truncated
    assert trunc and not term and info["capacity_full"] is True
    assert env.session.done and env.session.truncated
    with pytest.raises(ValueError, match="max_nodes"):
        ReplayEnv(make_world(recs, workers=2), max_nodes=2)


def test_max_rounds_truncates_through_gym(folder: Path) -> None:
    env = gym.make("DreamGym/Replay-v0", world=folder, max_rounds=1)
    env.reset()
    _, _, term, trunc, _ = env.step([0])
    assert trunc and not term


def test_reset_is_deterministic_and_seed_changes_nothing(folder: Path) -> None:
    env = ReplayEnv(folder)
    traces = []
    for seed in (0, 1, None):
        obs, _ = env.reset(seed=seed)
        steps = [obs] + [env.step(b)[0] for b in ([0, 0], [1])]
        traces.append(steps)
    for other in traces[1:]:
        for a, b in zip(traces[0], other, strict=True):
            for key in a:
                np.testing.assert_array_equal(a[key], b[key])


def test_observations_are_copies(folder: Path) -> None:
    env = ReplayEnv(folder)
    obs, _ = env.reset()
    obs["score"][:] = 99.0
    obs["frontier"][:] = 1
    obs2, *_ = env.step([0])
    assert obs2["score"][0] == 1.0 and obs2["frontier"][2] == 0


def test_rewards_match_session(folder: Path) -> None:
    env = ReplayEnv(folder)
    session = ReplaySession(env.world)
    env.reset()
    for batch in ([0, 0], [1, 0], [3], []):
        reward = env.step(batch)[1]
        assert reward == session.step(batch).reward


def test_render_ansi_draws_the_tree(folder: Path) -> None:
    env = gym.make("DreamGym/Replay-v0", world=folder, render_mode="ansi")
    env.reset()
    env.step([0, 0])
    env.step([1, 0])
    text = env.render()
    assert text.splitlines() == [
        "round 2  attempts 4  W=2  baseline 1  frontier [3, 4]",
        " 0: 1",
        "├─  1: 2",
        "│  └─ *3: 3",
        "├─  2: invalid  [SyntaxError: nope]",
        "└─ *4: 1.5",
    ]
    assert ReplayEnv(folder).render() is None
    with pytest.raises(ValueError):
        ReplayEnv(folder, render_mode="human")


def test_render_handles_a_deep_chain() -> None:
    recs = [node("root", None, 0.0)] + [node(f"n{i}", "root" if i == 1 else f"n{i - 1}", float(i)) for i in range(1, 1500)]
    session = ReplaySession(make_world(recs, workers=1))
    while not session.done:
        view = session.view()
        session.step([view.frontier[-1]] if view.frontier else [])
    from dream_gym.view import render_tree

    assert len(render_tree(session.view()).splitlines()) == 1 + 1500
