"""W and V's prices drawn per training episode (``dream-gym train --draw-workers/--draw-prices``):
every env of every architecture replays each episode at the setting it drew, rewards it by that
setting's V, and an env given one setting draws nothing more (its episodes are those it gave
before settings could be drawn)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dream_gym.cli import main as cli_main
from dream_gym.evaluation.world_specs import resolve_worlds
from dream_gym.rl.node_env import NodeReplayEnv
from dream_gym.rl.options_env import OptionsReplayEnv
from dream_gym.rl.sb3 import sb3_vec_env
from dream_gym.training.trainer import TrainConfig

POOL = "sd-fixed-s0,lasso-greedy-s0,cp26-fixed-s0"  # shipped worlds
DRAWS = [(2, 0.003, 0.02), (10, 0.002, 0.0), (4, 0.001, 0.05)]


def test_the_settings_drawn_are_every_w_with_every_price_pair() -> None:
    config = TrainConfig(worlds=POOL, draw_workers="2,10", draw_prices="0.003:0.02,0.002:0")
    assert config.episode_settings == [(2, 0.003, 0.02), (2, 0.002, 0.0), (10, 0.003, 0.02), (10, 0.002, 0.0)]
    assert TrainConfig(worlds=POOL, workers=6).episode_settings == [(6, 0.003, 0.02)]  # nothing drawn
    for bad, message in (({"draw_workers": "2,0"}, "draw_workers must be a comma list of W from 1 to 4096; '0'"),
                         ({"draw_workers": "2,5000"}, "W from 1 to 4096; '5000' is not one"),
                         ({"draw_workers": "4,4"}, "draw_workers lists an entry twice"),
                         ({"draw_prices": "0.003"}, "draw_prices must be a comma list of beta1:beta2"),
                         ({"draw_prices": "0.003:-1"}, "'0.003:-1' is not one"),
                         ({"draw_prices": "0.003:nan"}, "'0.003:nan' is not one")):
        with pytest.raises(ValueError, match=message):
            TrainConfig(worlds=POOL, **bad)


def _random_action(env, rng) -> int:
    """A random allowed choice (9 times in 10), else commit (node) or stop (options)."""
    masks = env.action_masks()
    if isinstance(env, NodeReplayEnv):  # rows, then commit last
        rows = np.flatnonzero(masks[:-1])
        return int(rng.choice(rows)) if len(rows) and rng.random() < 0.9 else len(masks) - 1
    options = np.flatnonzero(masks[1:]) + 1  # stop first, then the options
    return int(rng.choice(options)) if len(options) and rng.random() < 0.9 else 0


@pytest.mark.parametrize("env_class", [NodeReplayEnv, OptionsReplayEnv])
def test_each_episode_replays_and_is_rewarded_at_the_setting_it_drew(env_class) -> None:
    env = env_class(resolve_worlds(POOL), beta=[0.0, 0.5, 1.0], draws=DRAWS)
    seen: Counter[tuple[int, float, float]] = Counter()
    rng = np.random.default_rng(0)
    for episode in range(24):
        env.reset(seed=episode)
        session = env.session
        setting = (session.settings.workers, session.beta1, session.beta2)
        seen[setting] += 1
        assert env.view.workers == setting[0]  # what the policy sees
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, info = env.step(_random_action(env, rng))
            assert len(info["batch"]) <= setting[0]  # never more than the drawn W a round
            total += reward
            done = terminated or truncated
        # the rewards sum to V of the episode at its own prices (the envs' default objective is V)
        expected = session.best_q - setting[1] * session.attempts + setting[2] * session.attempts / max(1, session.rounds)
        assert total == pytest.approx(expected) and session.value == pytest.approx(expected)
    assert set(seen) == set(DRAWS)  # every setting drawn


def _stream(env, episodes: int = 16) -> list[tuple[str, float]]:
    """(world, beta) of successive episodes from one seeded stream."""
    env.reset(seed=3)
    out = []
    for _ in range(episodes):
        env.reset()
        out.append((env.session.world.id, env.session.beta))
    return out


def test_one_setting_draws_nothing_more_so_earlier_runs_are_unchanged() -> None:
    worlds = resolve_worlds(POOL)
    plain = _stream(NodeReplayEnv(worlds, workers=4, beta=[0.0, 0.5, 1.0]))
    assert _stream(NodeReplayEnv(worlds, beta=[0.0, 0.5, 1.0], draws=[(4, 0.003, 0.02)])) == plain
    # control: drawing a setting takes numbers from the same stream, so several settings change the episodes
    several = NodeReplayEnv(worlds, beta=[0.0, 0.5, 1.0], draws=[(4, 0.003, 0.02), (8, 0.003, 0.02)])
    assert _stream(several) != plain


def test_the_macro_vector_env_splits_its_envs_among_the_settings() -> None:
    worlds = resolve_worlds(POOL)
    env = sb3_vec_env(worlds, 8, draws=DRAWS, beta=[0.0, 0.5, 1.0])
    assert [part.num_envs for part in env.parts] == [3, 3, 2]
    assert [(p.env.workers, p.env.beta1, p.env.beta2) for p in env.parts] == DRAWS
    env.seed(7)
    assert [part._seeds[0] for part in env.parts] == [7, 10, 13]  # sub-env i seeded 7 + i
    obs = env.reset()
    assert obs.shape[0] == 8 and len(env.reset_infos) == 8
    masks = np.stack(env.env_method("action_masks"))
    assert masks.shape[0] == 8 and len(env.env_method("action_masks", indices=[2, 3])) == 2
    returns = []
    for _ in range(60):
        env.step_async(np.full(8, 8))  # "top 1W" every round, until the episodes end
        _, _, dones, infos = env.step_wait()
        returns += [(i, info["episode"]["r"]) for i, info in enumerate(infos) if "episode" in info]
    assert {i for i, _ in returns} == set(range(8))
    one = sb3_vec_env(worlds, 8, draws=DRAWS[:1], beta=[0.0, 0.5, 1.0])  # one setting: a plain vector env
    assert not hasattr(one, "parts") and one.env.workers == 2
    with pytest.raises(ValueError, match="3 settings need at least as many envs"):
        sb3_vec_env(worlds, 2, draws=DRAWS)


def _train_args(out: Path, arch: str = "macro") -> list[str]:
    return ["train", "--arch", arch, "--worlds", POOL, "--timesteps", "256",
            "--n-envs", "4", "--n-steps", "64", "--batch-size", "64", "--n-epochs", "1", "--eval-every", "0",
            "--heldout", "", "--betas", "0,1", "--out", str(out)]


@pytest.mark.parametrize(("option", "value", "named"), [("--draw-workers", "2,x", "'x' is not one"),
                                                         ("--draw-prices", "0.002", "'0.002' is not one")])
def test_a_bad_draw_list_is_refused_once_before_anything_is_written(tmp_path: Path, option, value, named) -> None:
    out = tmp_path / "run"
    refused = subprocess.run([sys.executable, "-m", "dream_gym", *_train_args(out), option, value], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and refused.stderr.count("error:") == 1 and named in refused.stderr
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["macro", "node", "options"])
def test_train_draws_the_settings_and_records_them(tmp_path: Path, arch: str) -> None:
    """The CLI's ``main`` in this process (the refusals above run the command itself): a training
    process would spend most of its time importing torch and SB3."""
    out = tmp_path / "run"
    assert cli_main(_train_args(out, arch) + ["--draw-workers", "2,10", "--draw-prices", "0.002:0"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert (config["draw_workers"], config["draw_prices"]) == ("2,10", "0.002:0")
    assert (out / "model.zip").is_file()
