"""Models trained with your own SB3 code on DreamGym/Replay-v1 play as dream_gym policies: the
observation and masks a view gives are the env's at every step, and a model's policy builds the
batches the model makes on the env (MaskablePPO with the env's masks, PPO without)."""

from __future__ import annotations

import random
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from worldgen import make_world, random_records

import dream_gym  # noqa: F401  (registers the envs)
from dream_gym.envs.spaces import view_observation
from dream_gym.policy import RunContext, run_episode
from dream_gym.replay.session import ReplaySession
from dream_gym.rl.archs import model_policy
from dream_gym.rl.replay_policy import ReplaySB3Policy


def random_worlds(seed: int, count: int, workers: int = 3) -> list:
    rng = random.Random(seed)
    return [make_world(random_records(rng, rng.randint(3, 35)), world_id=f"r{seed}-{i}", workers=workers,
                       frontier=rng.choice(("leaves", "any")), direction=rng.choice(("maximize", "minimize")))
            for i in range(count)]


def test_the_observation_and_masks_of_a_view_are_the_envs_at_every_step() -> None:
    rng = random.Random(3)
    steps = 0
    for world in random_worlds(1, 12):
        env = gym.make("DreamGym/Replay-v1", world=world, max_nodes=40).unwrapped
        obs, info = env.reset()
        while True:
            mine, mask = view_observation(info["view"], env.max_nodes)
            for key, array in obs.items():
                np.testing.assert_array_equal(mine[key], array, err_msg=key)
            np.testing.assert_array_equal(mask, info["action_mask"].astype(bool))
            steps += 1
            frontier = list(info["view"].frontier)
            rng.shuffle(frontier)
            obs, _, terminated, truncated, info = env.step(frontier[: env.workers])
            if terminated or truncated:
                break
    assert steps > 40


@pytest.mark.parametrize("maskable", [True, False], ids=["MaskablePPO", "PPO"])
def test_a_replay_env_model_plays_the_batches_it_makes_on_the_env(tmp_path: Path, maskable: bool) -> None:
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    algorithm = MaskablePPO if maskable else PPO
    train_world = random_worlds(5, 1)[0]
    trained = algorithm("MultiInputPolicy", gym.make("DreamGym/Replay-v1", world=train_world, max_nodes=40),
                        n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    trained.learn(64)
    trained.save(tmp_path / "mine.zip")
    policy = model_policy(str(tmp_path / "mine.zip"))  # as data: SB3's own classes are known
    assert isinstance(policy, ReplaySB3Policy) and (policy.max_nodes, policy.workers) == (40, 3)
    model = algorithm.load(tmp_path / "mine.zip", device="cpu")
    for i, world in enumerate(random_worlds(6, 6)):
        env = gym.make("DreamGym/Replay-v1", world=world, max_nodes=40)
        obs, _ = env.reset()
        done = False
        while not done:
            masks = {"action_masks": env.unwrapped.action_masks()} if maskable else {}
            action, _ = model.predict(obs, deterministic=True, **masks)
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
        result = run_episode(policy, world, workers=3)
        assert result.error is None and result.batches == env.unwrapped.session.batches, i


def test_a_replay_env_model_refuses_another_w_and_a_bigger_episode(tmp_path: Path) -> None:
    from sb3_contrib import MaskablePPO

    world = random_worlds(7, 1)[0]
    model = MaskablePPO("MultiInputPolicy", gym.make("DreamGym/Replay-v1", world=world, max_nodes=40),
                        n_steps=64, seed=0, device="cpu")
    policy = model_policy(model)
    result = run_episode(policy, world, workers=2, on_error="record")
    assert "trained on the replay env at W = 3; it cannot play at W = 2 (run it with -W 3)" in str(result.error)
    small = model_policy(MaskablePPO("MultiInputPolicy", gym.make("DreamGym/Replay-v1", world=world, max_nodes=5),
                                     n_steps=64, seed=0, device="cpu"))
    session = ReplaySession(make_world(random_records(random.Random(1), 60), workers=3), workers=3)
    while len(session.view().nodes) <= 5:
        session.step(list(session.view().frontier)[:3])
    view = session.view()
    small.reset(RunContext.from_view(view))
    with pytest.raises(ValueError, match="sees at most 5 nodes .its env's max_nodes.; this episode has revealed"):
        small.act(view)


def test_grow_with_a_model_of_another_w_is_refused_before_its_world_is_made(tmp_path: Path) -> None:
    # the refusal came after the root was recorded: the world's W then refused the retry at the model's W
    from sb3_contrib import MaskablePPO

    from dream_gym.online.loop import GrowConfig, grow

    world = random_worlds(8, 1)[0]
    policy = model_policy(MaskablePPO("MultiInputPolicy", gym.make("DreamGym/Replay-v1", world=world, max_nodes=40),
                                      n_steps=64, seed=0, device="cpu"))
    out = tmp_path / "world"
    with pytest.raises(ValueError, match=r"cannot play at W = 2 \(run it with -W 3\)"):
        grow(GrowConfig(task="sum-difference", out=out, workers=2, rounds=1, backend="serial"), policy)
    assert not out.exists() or not any(out.iterdir())
    result = grow(GrowConfig(task="sum-difference", out=out, workers=3, rounds=1, backend="serial"), policy)
    assert result.nodes >= 2 and result.rounds == 1  # the retry at the model's W, in the same folder


def test_a_model_whose_space_is_printed_shortened_is_refused_saying_so(tmp_path: Path) -> None:
    # a Box whose bounds SB3 printed with "..." was refused as "(a Box) is not a Box, ..."
    from stable_baselines3 import PPO

    from dream_gym.rl.model_zips import UntrustedModelError

    world = random_worlds(9, 1)[0]
    env = gym.wrappers.FlattenObservation(gym.make("DreamGym/Replay-v1", world=world, max_nodes=200))
    assert env.observation_space.shape[0] > 1000  # numpy prints at most 1,000 values whole
    PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0, device="cpu").save(tmp_path / "flat.zip")
    # no trust would make it run here: it is said so, without sending the user to --trust-model
    with pytest.raises(UntrustedModelError, match=r"its observation is a Box of shape \[\d+\], larger than that of "
                                                  r"any model dream-gym runs .*FlattenObservation.* not in eval$"):
        model_policy(str(tmp_path / "flat.zip"))
