"""The RL pool envs take their replay settings once: as keywords (``workers=4, beta=...``) or as
``settings=ReplaySettings(...)``, the two giving the same episodes; a setting given both ways
differently, one the pool envs do not take, or an unknown keyword is refused with one error
naming it. The gym ids build the env's settings from their plain kwargs."""

from __future__ import annotations

import inspect
import re

import gymnasium as gym
import numpy as np
import pytest

import dream_gym  # noqa: F401 - registers the ids
from dream_gym.cli import main as cli_main
from dream_gym.evaluation.world_specs import resolve_worlds
from dream_gym.replay.settings import STANDARD_WORKERS, ReplaySettings
from dream_gym.rl import MacroReplayEnv, MacroVectorEnv, NodeReplayEnv, OptionsReplayEnv
from dream_gym.training.trainer import TrainConfig

POOL = "sd-greedy-w8-s0,sd-fixed-s0"  # shipped worlds, the first recorded at W = 8
SINGLE_ENVS = [MacroReplayEnv, NodeReplayEnv, OptionsReplayEnv]
ALL_ENVS = [*SINGLE_ENVS, MacroVectorEnv]


@pytest.fixture(scope="module")
def worlds():
    return resolve_worlds(POOL)


def _random_action(env, rng) -> int:
    allowed = np.flatnonzero(env.action_masks())
    return int(rng.choice(allowed))


def _episodes(env, count: int = 4) -> list[tuple[str, float, list[float], list[list[int]]]]:
    """(world, beta, rewards, batches) of ``count`` seeded episodes with seeded random allowed actions."""
    rng = np.random.default_rng(1)
    out = []
    for episode in range(count):
        _, info = env.reset(seed=episode)
        rewards, batches, done = [], [], False
        while not done:
            _, reward, terminated, truncated, info = env.step(_random_action(env, rng))
            rewards.append(round(reward, 12))
            batches.append(list(info["batch"]))
            done = terminated or truncated
        out.append((info["world"], info["beta"], rewards, batches))
    return out


def _vector_episodes(env, steps: int = 12) -> list[list[float]]:
    rng = np.random.default_rng(1)
    env.reset(seed=0)
    rows = []
    for _ in range(steps):
        masks = env.action_masks()
        actions = [int(rng.choice(np.flatnonzero(row))) for row in masks]
        _, reward, _, _, _ = env.step(np.array(actions))
        rows.append(np.round(reward, 12).tolist())
    return rows


def _play(env_class, worlds, **kwargs):
    if env_class is MacroVectorEnv:
        env = MacroVectorEnv(worlds, 3, **kwargs)
        return env, _vector_episodes(env)
    env = env_class(worlds, **kwargs)
    return env, _episodes(env)


@pytest.mark.parametrize("env_class", ALL_ENVS)
def test_settings_as_one_value_give_the_episodes_of_the_same_keywords(env_class, worlds) -> None:
    keywords = {"workers": 2, "beta": [0.2, 0.8], "beta1": 0.01, "beta2": 0.05, "max_rounds": 5}
    by_keywords, episodes = _play(env_class, worlds, **keywords)
    settings = ReplaySettings(workers=2, beta1=0.01, beta2=0.05, max_rounds=5)
    by_value, same = _play(env_class, worlds, settings=settings, beta=[0.2, 0.8])
    assert by_value.settings == by_keywords.settings == settings.replace(beta=0.2)
    assert (by_value.workers, by_value.beta1, by_value.beta2, by_value.max_rounds) == (2, 0.01, 0.05, 5)
    assert same == episodes
    # control: another setting plays other episodes, so the comparison above can fail
    _, other = _play(env_class, worlds, settings=settings.replace(workers=3), beta=[0.2, 0.8])
    assert other != episodes


@pytest.mark.parametrize("env_class", ALL_ENVS)
def test_a_setting_given_twice_differently_is_refused_naming_it(env_class, worlds) -> None:
    args = (3,) if env_class is MacroVectorEnv else ()
    with pytest.raises(ValueError, match=r"workers twice, differently: settings.workers=8 and workers=4"):
        env_class(worlds, *args, settings=ReplaySettings(workers=8), workers=4)
    with pytest.raises(ValueError, match=r"beta twice, differently: settings.beta=0.3 and beta=\[0.1, 0.9\]"):
        env_class(worlds, *args, settings=ReplaySettings(beta=0.3), beta=[0.1, 0.9])
    # the same value both ways, or a field left at its default in settings, is no conflict
    assert env_class(worlds, *args, settings=ReplaySettings(workers=8), workers=8).workers == 8
    env = env_class(worlds, *args, settings=ReplaySettings(beta1=0.01), beta=[0.1, 0.9], max_rounds=7)
    assert (env.beta1, env.max_rounds, tuple(env.betas)) == (0.01, 7, (0.1, 0.9))


@pytest.mark.parametrize("env_class", ALL_ENVS)
def test_settings_the_pool_envs_do_not_take_are_refused(env_class, worlds) -> None:
    args = (3,) if env_class is MacroVectorEnv else ()
    for given, named in ((ReplaySettings(frontier="any"), "frontier='any'"), (ReplaySettings(requests=True),
                         "requests=True"), (ReplaySettings(max_attempts=50), "max_attempts=50")):
        with pytest.raises(ValueError, match=f"{env_class.__name__} replays at each world's frontier rule.*{named}"):
            env_class(worlds, *args, settings=given)
    # an unknown keyword (or a replay setting the pool envs do not take) is a TypeError, as for any function
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'frontier' \(its replay settings: workers"):
        env_class(worlds, *args, frontier="any")
    with pytest.raises(TypeError, match="unexpected keyword argument 'worker'"):
        env_class(worlds, *args, worker=2)
    assert env_class(worlds, *args, workers=2).workers == 2  # control: the right name is taken


@pytest.mark.parametrize("env_class", SINGLE_ENVS)
def test_settings_without_w_replay_at_the_standard_w(env_class, worlds) -> None:
    # the pool's worlds may be recorded at other W: W unset means the documented default, not theirs
    env = env_class(worlds, settings=ReplaySettings())
    assert env.workers == STANDARD_WORKERS == env.settings.workers
    assert env_class(worlds).settings == env.settings
    env.reset(seed=0, options={"world": 0})
    assert env.view.workers == STANDARD_WORKERS != worlds[0].workers  # control: the world's own W differs


@pytest.mark.parametrize("env_id", ["DreamGym/Macro-v0", "DreamGym/Node-v0", "DreamGym/Options-v0"])
def test_the_gym_ids_pass_their_kwargs_as_the_envs_settings(env_id: str) -> None:
    env = gym.make(env_id, worlds=POOL, workers=2, betas=[0.25], beta1=0.01, beta2=0.0, max_rounds=3)
    assert env.unwrapped.settings == ReplaySettings(2, 0.25, 0.01, 0.0, 3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'beta'"):  # the ids take betas
        gym.make(env_id, worlds=POOL, beta=0.5)
    assert gym.make(env_id, worlds=POOL, render_mode=None).render_mode is None
    # a mode they do not render is named, and the env that does (it was a TypeError of the creator)
    with pytest.raises(TypeError, match=r"render_mode 'ansi': the training envs render nothing .*DreamGym/Replay-v1"):
        gym.make(env_id, worlds=POOL, render_mode="ansi")


@pytest.mark.parametrize("env_class", ALL_ENVS)
def test_the_signature_shows_the_replay_keywords_the_env_replays_with(env_class, worlds) -> None:
    parameters = inspect.signature(env_class).parameters
    shown = {name: parameters[name].default for name in ("workers", "beta", "beta1", "beta2", "max_rounds")}
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in shown)
    assert "replay" not in parameters  # the **replay of __init__ is shown as the keywords it takes
    args = (3,) if env_class is MacroVectorEnv else ()
    assert env_class(worlds, *args).settings == ReplaySettings(**shown)  # the defaults shown are the ones used
    assert shown["workers"] == STANDARD_WORKERS != ReplaySettings().workers  # not the single-world default


@pytest.mark.parametrize("env_class", SINGLE_ENVS)
def test_reset_options_it_does_not_take_are_refused(env_class, worlds) -> None:
    # {"bogus": 1} was ignored and {"world": 1.7} read as world 1
    env = env_class(worlds)
    for options, said in (({"bogus": 1}, r"takes the options 'world' \(an index of the pool\) and 'beta', got 'bogus'"),
                          ({"world": 1.7}, r"options\['world'\] is the index of a world of the pool, got 1.7"),
                          ({"beta": 2}, r"options\['beta'\] must be in \[0, 1\], got 2")):
        with pytest.raises(ValueError, match=said):
            env.reset(seed=0, options=options)
    env.reset(seed=0, options={"world": np.int64(1), "beta": 0.5})
    assert env.session.world.id == worlds[1].id and env.session.beta == 0.5


def test_the_vector_env_refuses_reset_options_it_does_not_take(worlds) -> None:
    env = MacroVectorEnv(worlds, 2)
    for options in ({"bogus": 1}, {"world": 1.7}, {"beta": [0.5, 2.0]}):
        with pytest.raises(ValueError):
            env.reset(seed=0, options=options)
    env.reset(seed=0, options={"world": 1, "beta": 0.5})


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--timesteps", "-5", "argument --timesteps: must be >= 1, got -5"),
    ("--n-envs", "-1", "argument --n-envs: must be >= 0, got -1"),
    ("--learning-rate", "inf", "argument --learning-rate: must be a finite number > 0, got inf"),
    ("--gamma", "2", r"argument --gamma: must be in \(0, 1\], got 2.0"),
    ("--gamma", "nan", r"argument --gamma: must be in \(0, 1\], got nan"),
    ("--ent-coef", "-0.1", "argument --ent-coef: must be >= 0, got -0.1"),
    ("--batch-size", "x", "argument --batch-size: not a whole number: 'x'"),
    ("--seed", "-1", "argument --seed: a whole number from 0 to"),
])
def test_train_names_the_option_of_a_bad_value_and_writes_nothing(option, value, message, tmp_path, capsys) -> None:
    """The training config's checks named its Python fields (``n_envs must be >= 0``), and
    ``--learning-rate inf`` started training: it wrote the run folder and ended in a tensor of NaNs."""
    with pytest.raises(SystemExit) as exit_:
        cli_main(["train", option, value, "--out", str(tmp_path / "run")])
    assert exit_.value.code == 2
    assert re.search(f"dream-gym train: error: {message}", capsys.readouterr().err)
    assert not (tmp_path / "run").exists()


def test_the_config_refuses_what_the_cli_refuses_by_its_field_names() -> None:
    for bad, message in (({"learning_rate": float("inf")}, "learning_rate must be a finite number > 0"),
                         ({"gae_lambda": 1.5}, r"gae_lambda must be in \[0, 1\], got 1.5"),
                         ({"price_low": 3.0}, "price_low must be at most price_high, got 3.0 and 2.0"),
                         ({"torch_threads": 0}, "torch_threads must be >= 1, got 0")):
        with pytest.raises(ValueError, match=message):
            TrainConfig(**bad)
