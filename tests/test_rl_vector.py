"""The vector macro env (dream_gym.rl.MacroVectorEnv) and its SB3 adapter: every episode the one a
MacroReplayEnv gives for the same world, beta and actions (features bit for bit, masks, rewards,
flags), the reward and feature seams, autoreset, and MaskablePPO training on the adapter."""

from __future__ import annotations

import random

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st
from worldgen import make_world, random_records, world_records

from dream_gym.rl import (
    FEATURE_NAMES,
    MACRO_ACTIONS,
    MACRO_FEATURES,
    FeatureSet,
    MacroReplayEnv,
    MacroVectorEnv,
    Progress,
    batch_features,
    sb3_vec_env,
    view_features,
)
from dream_gym.world.tree import World


def pool(seed: int, count: int = 6, max_nodes: int = 120) -> list[World]:
    rng = random.Random(seed)
    return [make_world(random_records(rng, rng.randint(2, max_nodes), root_score=rng.choice([0.0, 2.0, -3.0, 250.0])),
                       world_id=f"p{seed}-{i}", workers=rng.randint(1, 5), frontier=rng.choice(("leaves", "any")))
            for i in range(count)]


def run_against_singles(venv: MacroVectorEnv, worlds: list[World], steps: int, seed: int,
                        p_masked: float = 0.1, **single: object) -> int:
    """Step the vector env and one MacroReplayEnv per sub-env (reset to the same world and beta)."""
    rng = np.random.default_rng(seed)
    singles = [MacroReplayEnv(worlds, workers=venv.workers, beta=list(venv.betas), beta1=venv.beta1,
                              beta2=venv.beta2, max_rounds=venv.max_rounds, **single) for _ in range(venv.num_envs)]

    def restart(i: int, info: dict) -> np.ndarray:
        obs, _ = singles[i].reset(options={"world": int(info["world"][i]), "beta": float(info["beta"][i])})
        return obs

    obs, info = venv.reset(seed=seed)
    for i in range(venv.num_envs):
        np.testing.assert_array_equal(obs[i], restart(i, info))
    pending = np.zeros(venv.num_envs, dtype=bool)
    episodes = 0
    for step in range(steps):
        masks = venv.action_masks()
        actions = np.array([int(rng.choice(np.flatnonzero(m))) if rng.random() > p_masked
                            else int(rng.integers(len(MACRO_ACTIONS))) for m in masks])
        for i, s in enumerate(singles):
            if not pending[i]:
                np.testing.assert_array_equal(masks[i], s.action_masks())
        obs, rewards, terminated, truncated, info = venv.step(actions)
        for i, s in enumerate(singles):
            if pending[i]:
                expected = restart(i, info)
                assert rewards[i] == 0.0 and not terminated[i] and not truncated[i]
            else:
                expected, reward, term, trunc, _ = s.step(actions[i])
                assert rewards[i] == reward, (step, i)
                assert (terminated[i], truncated[i]) == (term, trunc), (step, i)
                episodes += term or trunc
            np.testing.assert_array_equal(obs[i], expected, err_msg=f"step {step} env {i}")
        pending = terminated | truncated
    return episodes


@pytest.mark.slow
def test_every_episode_is_the_single_envs_on_random_actions() -> None:
    worlds = pool(1, count=8)
    venv = MacroVectorEnv(worlds, 9, workers=3, beta=[0.1, 0.5, 0.9], max_rounds=20)
    assert run_against_singles(venv, worlds, steps=300, seed=1) > 50


@settings(max_examples=15, deadline=None)
@given(draws=st.lists(world_records(min_nodes=1, max_nodes=40), min_size=1, max_size=5),
       workers=st.integers(1, 5), seed=st.integers(0, 10_000), max_rounds=st.sampled_from([None, 3, 9]))
@pytest.mark.slow
def test_vector_and_single_macro_envs_agree_on_any_pool(draws, workers, seed, max_rounds) -> None:
    worlds = [make_world(records, world_id=f"h{i}", frontier=random.Random(seed + i).choice(("leaves", "any")))
              for i, records in enumerate(draws)]
    venv = MacroVectorEnv(worlds, 4, workers=workers, beta=[0.0, 1.0], max_rounds=max_rounds)
    run_against_singles(venv, worlds, steps=25, seed=seed, p_masked=0.3)


def test_batch_features_equal_view_features_bit_for_bit() -> None:
    worlds = pool(2, count=10, max_nodes=300)
    venv = MacroVectorEnv(worlds, 16, workers=4, beta=[0.3, 0.7], max_rounds=40)
    run_against_singles(venv, worlds, steps=120, seed=2)  # compares every observation exactly
    assert batch_features is MACRO_FEATURES.from_batch and view_features is MACRO_FEATURES.from_view


def test_world_and_beta_draws_follow_the_seed_and_options() -> None:
    venv = MacroVectorEnv(pool(3), 8, beta=[0.1, 0.5, 0.9])
    _, a = venv.reset(seed=4)
    _, b = venv.reset(seed=4)
    _, c = venv.reset(seed=5)
    assert a["world"].tolist() == b["world"].tolist() and a["beta"].tolist() == b["beta"].tolist()
    assert (a["world"].tolist(), a["beta"].tolist()) != (c["world"].tolist(), c["beta"].tolist())
    _, d = venv.reset(options={"world": 2, "beta": np.linspace(0, 1, 8)})
    assert d["world"].tolist() == [2] * 8 and d["beta"].tolist() == np.linspace(0, 1, 8).tolist()


def test_rewards_sum_to_a_custom_value_function() -> None:
    def patient_value(p: Progress) -> np.ndarray:  # e.g. a beta-conditioned objective
        return p.best_q - (1.0 - p.beta) * 0.01 * p.attempts

    worlds = pool(4)
    venv = MacroVectorEnv(worlds, 4, beta=[0.2, 0.8], value_fn=patient_value)
    single = MacroReplayEnv(worlds, beta=[0.2, 0.8], value_fn=patient_value)
    obs, info = venv.reset(seed=0)
    single.reset(options={"world": int(info["world"][0]), "beta": float(info["beta"][0])})
    totals, total_single, done = np.zeros(4), 0.0, False
    while not done:
        action = int(np.flatnonzero(single.action_masks())[-1])
        _, reward, term, trunc, _ = single.step(action)
        total_single += reward
        actions = np.full(4, action)
        _, rewards, terminated, truncated, _ = venv.step(actions)
        totals += rewards
        assert rewards[0] == reward
        done = term or trunc
    s = single.session
    assert s is not None
    assert total_single == pytest.approx(patient_value(Progress(s.best_q, s.attempts, s.rounds, s.beta, 0, 0)))


def test_a_feature_set_is_an_argument() -> None:
    def two_from_view(view):
        return np.array([view.attempts / 100, view.rounds / 100], dtype=np.float32)

    def two_from_batch(replay, params, top_open, out, rows=None):
        rows = replay.rows if rows is None else rows
        out[rows, 0] = replay.attempts[rows] / 100
        out[rows, 1] = replay.rounds[rows] / 100
        return out

    features = FeatureSet(("attempts", "rounds"), two_from_view, two_from_batch)
    worlds = pool(5)
    venv = MacroVectorEnv(worlds, 3, features=features)
    assert venv.single_observation_space.shape == (2,)
    run_against_singles(venv, worlds, steps=30, seed=5, features=features)
    assert len(FEATURE_NAMES) == MACRO_FEATURES.size


def test_same_step_autoreset_puts_the_last_observation_in_info() -> None:
    venv = MacroVectorEnv(pool(6), 4, autoreset_mode=AutoresetMode.SAME_STEP)
    venv.reset(seed=0)
    obs, rewards, terminated, truncated, info = venv.step(np.zeros(4, dtype=np.int64))  # stop everywhere
    assert terminated.all() and info["_final_obs"].all() and info["final_obs"].shape == (4,)  # Gymnasium's layout
    assert all(row.shape == (len(FEATURE_NAMES),) for row in info["final_obs"])
    # the ended episodes' last info: their V (one step: its reward); the fresh ones start at 0
    np.testing.assert_allclose(info["final_info"]["replay_score"], rewards)
    assert info["final_info"]["_replay_score"].all() and (info["replay_score"] == 0).all()
    assert (obs[:, 1] == 0).all()  # attempts feature: fresh episodes


# -- the SB3 adapter ----------------------------------------------------------------------------------
def test_sb3_adapter_follows_sb3_conventions() -> None:
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    venv = sb3_vec_env(pool(7), 5, workers=3, beta=[0.2, 0.8], max_rounds=4)
    venv.seed(3)
    obs = venv.reset()
    assert obs.shape == (5, len(FEATURE_NAMES))
    assert is_masking_supported(venv)
    masks = get_action_masks(venv)
    assert masks.shape == (5, len(MACRO_ACTIONS)) and masks[:, 0].all()
    seen_end = False
    for _ in range(30):
        actions = np.array([np.flatnonzero(m)[-1] for m in get_action_masks(venv)])
        obs, rewards, dones, infos = venv.step(actions)
        assert rewards.dtype == np.float32 and len(infos) == 5
        for i in np.flatnonzero(dones):
            seen_end = True
            info = infos[i]
            assert info["terminal_observation"].shape == (len(FEATURE_NAMES),)
            assert isinstance(info["TimeLimit.truncated"], bool) and info["episode"]["l"] >= 1
    assert seen_end
    assert venv.get_attr("workers") == [3] * 5 and venv.env_is_wrapped(object) == [False] * 5


def test_maskable_ppo_trains_on_the_adapter_directly(tmp_path) -> None:
    from sb3_contrib import MaskablePPO

    from dream_gym.policy import run_episode
    from dream_gym.rl import SB3Policy

    worlds = pool(8, count=4)
    venv = sb3_vec_env(worlds, 64, workers=3, beta=[0.2, 0.8])
    model = MaskablePPO("MlpPolicy", venv, n_steps=16, batch_size=256, n_epochs=1, seed=0, device="cpu",
                        policy_kwargs={"net_arch": [16]})
    model.learn(total_timesteps=2048)
    assert model.num_timesteps >= 2048 and len(model.ep_info_buffer) > 0
    model.save(tmp_path / "m.zip")
    result = run_episode(SB3Policy(tmp_path / "m.zip"), worlds[0], workers=3)
    assert result.error is None
