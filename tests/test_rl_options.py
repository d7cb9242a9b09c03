"""The options arch: a meta-controller whose actions run one built-in's proposal a round."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from worldgen import frontier_st, make_world, random_pool, workers_st, world_records

from dream_gym.policies import make_policy
from dream_gym.policy import run_episode
from dream_gym.replay.mechanics import Replay
from dream_gym.replay.objectives import Progress
from dream_gym.rl import EnsemblePolicy, PricedAttainment, model_policy
from dream_gym.rl.option_set import (
    N_OPTION_ACTIONS,
    N_OPTION_FEATURES,
    OPTION_FEATURE_NAMES,
    OPTION_POLICIES,
    OPTION_STOP,
)
from dream_gym.rl.options_env import OptionsReplayEnv
from dream_gym.rl.sb3 import OptionsSB3Policy
from dream_gym.world.tree import World


def random_worlds(seed: int, count: int) -> list[World]:
    return random_pool(seed, count, "o")


def test_options_env_passes_the_env_checker() -> None:
    env = OptionsReplayEnv(random_worlds(1, 3), workers=3, beta=[0.2, 0.8], value_fn=PricedAttainment())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    assert [str(w.message) for w in caught if "render" not in str(w.message)] == []
    assert env.observation_space.shape == (N_OPTION_FEATURES,) == (len(OPTION_FEATURE_NAMES),)
    assert env.action_space.n == N_OPTION_ACTIONS == 1 + len(OPTION_POLICIES)


@pytest.mark.parametrize("name", OPTION_POLICIES)
def test_always_taking_one_option_replays_that_built_in_exactly(name: str) -> None:
    """Asked once per round on the real history, an option chosen every round is its built-in: the
    same batches as run_episode of the built-in alone (the shadow calls change nothing)."""
    index = 1 + OPTION_POLICIES.index(name)
    for i, world in enumerate(random_worlds(2, 6)):
        env = OptionsReplayEnv([world], workers=world.workers, beta=0.3 + 0.1 * i)
        env.reset(seed=i)
        seed = env.options.policies[0].context.seed  # type: ignore[attr-defined]
        batches, done = [], False
        while not done:
            _, _, terminated, truncated, info = env.step(index)
            batches += [info["batch"]] if info["batch"] else []
            done = terminated or truncated
        alone = run_episode(make_policy(name), world, seed=seed, workers=world.workers, beta=0.3 + 0.1 * i)
        assert batches == [b for b in alone.batches if b], (name, world.id)


def test_options_rewards_sum_to_the_objective_and_stop_ends_the_episode() -> None:
    worlds, objective = random_worlds(3, 4), PricedAttainment()
    env = OptionsReplayEnv(worlds, workers=3, beta=[0.0, 0.5, 1.0], value_fn=objective)
    rng = np.random.default_rng(0)
    for seed in range(10):
        env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
            total, done = total + reward, terminated or truncated
        session = env.session
        assert session is not None
        assert total == pytest.approx(objective(Progress(session.best_q, session.attempts, session.rounds,
                                                         session.beta, session.beta1, session.beta2,
                                                         session.world.size - 1)), abs=1e-12)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(OPTION_STOP)
    assert terminated and info["batch"] == [] and reward == 0.0


@settings(max_examples=30, deadline=None)
@given(base=world_records(min_nodes=2, max_nodes=30), workers=workers_st, frontier=frontier_st,
       masked=st.booleans(), rng=st.randoms(use_true_random=False))
def test_option_masks_never_allow_an_illegal_batch(base, workers, frontier, masked, rng) -> None:
    """Masked or any action: every batch the env applies passes an independent Replay's check, and a
    masked option (an empty proposal) stops the episode."""
    world = make_world(base, workers=workers, frontier=frontier)
    env = OptionsReplayEnv([world], workers=workers)
    env.reset(seed=0)
    check = Replay(world, workers, frontier)
    done = False
    while not done:
        mask = env.action_masks()
        assert mask[OPTION_STOP] and mask.shape == (N_OPTION_ACTIONS,)
        action = int(rng.choice(list(np.flatnonzero(mask) if masked else range(N_OPTION_ACTIONS))))
        _, _, terminated, truncated, info = env.step(action)
        if info["batch"]:
            check.apply(info["batch"])  # raises IllegalBatchError on an illegal batch
        else:  # stop, or a masked option: the empty batch ends the episode
            assert terminated and (action == OPTION_STOP or not mask[action])
        done = terminated or truncated
    assert check.attempts == env.session.attempts  # type: ignore[union-attr]


# -- trained options models -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def options_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sb3_contrib import MaskablePPO

    env = OptionsReplayEnv(random_worlds(4, 4), workers=3, beta=[0.0, 1.0], value_fn=PricedAttainment())
    model = MaskablePPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu",
                        policy_kwargs={"net_arch": [16]})
    model.learn(total_timesteps=256)
    path = tmp_path_factory.mktemp("options") / "tiny-options.zip"
    model.save(path)
    return path


def test_options_policy_runs_the_batches_the_env_would(options_model: Path) -> None:
    from sb3_contrib import MaskablePPO

    model = MaskablePPO.load(options_model, device="cpu")
    policy = model_policy(model)
    assert isinstance(policy, OptionsSB3Policy)
    for i, world in enumerate(random_worlds(5, 6)):
        env = OptionsReplayEnv([world], workers=3, beta=0.6)
        obs, _ = env.reset(seed=i)
        seed = env.options.policies[0].context.seed  # type: ignore[attr-defined]
        batches, done = [], False
        while not done:
            action, _ = model.predict(obs, deterministic=True, action_masks=env.action_masks())
            obs, _, terminated, truncated, info = env.step(int(action))
            batches += [info["batch"]] if info["batch"] else []
            done = terminated or truncated
        result = run_episode(policy, world, seed=seed, workers=3, beta=0.6)
        assert result.error is None and [b for b in result.batches if b] == batches


@pytest.mark.slow
def test_load_and_evaluate_an_options_model_deterministically(options_model: Path) -> None:
    from dream_gym.evaluation.evaluate import evaluate
    from dream_gym.policy_files import load_policy

    policy = load_policy(str(options_model))
    assert isinstance(policy, OptionsSB3Policy) and policy.name == "tiny-options"
    worlds = random_worlds(6, 3)
    first = evaluate([str(options_model)], worlds, "0,0.5,1", jobs=1, progress=False)
    second = evaluate([str(options_model)], worlds, "0,0.5,1", jobs=1, progress=False)
    assert [r.to_dict() for r in first] == [r.to_dict() for r in second]
    assert all(r.error is None for r in first)


def test_an_options_model_is_refused_where_it_does_not_fit(options_model: Path) -> None:
    from dream_gym.rl import SB3Policy

    with pytest.raises(ValueError, match="do not match the macro env"):
        SB3Policy(str(options_model))
    with pytest.raises(ValueError, match="options models are not ensembled"):
        EnsemblePolicy([str(options_model), str(options_model)])
