"""The Python API's answers to wrong input, as a notebook user meets them: each names the argument
and what it takes, instead of a TypeError from pathlib or a ValueError from ``int()``."""

from __future__ import annotations

import gymnasium as gym
import pytest

import dream_gym
import dream_gym.datasets as ds
from dream_gym.evaluation.evaluate import evaluate, leaderboard
from dream_gym.policies import GreedyPolicy
from dream_gym.world.files import WorldFormatError


def test_a_policy_class_given_for_an_instance_is_named_so() -> None:
    with pytest.raises(TypeError, match=r"got the class GreedyPolicy, not a policy: pass an instance, GreedyPolicy\(\)"):
        dream_gym.run_episode(GreedyPolicy, "sd-fixed-s0")
    with pytest.raises(TypeError, match=r"'greedy' is not a policy: .* build it with dream_gym.policy_files.load_policy"):
        dream_gym.run_episode("greedy", "sd-fixed-s0")


def test_world_references_that_are_none_are_named(tmp_path) -> None:
    with pytest.raises(TypeError, match="a world reference is a World, a folder, .* got NoneType"):
        gym.make("DreamGym/Replay-v1", world=None)
    with pytest.raises(TypeError, match="load_world takes a world folder's path, got World"):
        dream_gym.load_world(dream_gym.resolve_world("sd-fixed-s0"))
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(WorldFormatError, match=r"is not a world folder \(a file\)"):
        dream_gym.load_world(tmp_path / "a-file")
    with pytest.raises(WorldFormatError, match=r"is not a world folder \(no such directory\)"):
        dream_gym.load_world(tmp_path / "none")
    with pytest.raises(ValueError, match="load: the reference is empty"):
        ds.load("")  # it read the current folder as a world


def test_numbers_out_of_range_or_not_numbers_name_their_argument() -> None:
    with pytest.raises(ValueError, match="workers must be an integer from 1 to 4096 or None, got 100000"):
        gym.make("DreamGym/Replay-v1", world="sd-fixed-s0", workers=10**5)  # a 100 MB action mask a step
    with pytest.raises(ValueError, match=r"betas must be numbers in \[0, 1\], comma-separated, got '0.1,abc'"):
        evaluate(["greedy"], ["sd-fixed-s0"], "0.1,abc", progress=False)
    with pytest.raises(ValueError, match="prefixes must be attempt counts >= 1 .* got 'abc'"):
        gym.make("DreamGym/Macro-v0", worlds="sd-fixed-s0", prefixes="abc")
    with pytest.raises(TypeError, match="worlds must be a world spec .* got int"):
        gym.make("DreamGym/Macro-v0", worlds=123)


def test_a_dataset_and_a_leaderboard_print_as_a_reader_wants_them() -> None:
    shown = repr(ds.load("dream-gym/recorded-v1"))
    assert shown.startswith("Dataset('dream-gym/recorded-v1', 32 worlds, path=") and len(shown) < 300  # was 17,613
    board = leaderboard(evaluate(["greedy"], ["sd-fixed-s0"], [0.5], progress=False))
    assert str(board) == board.to_text() and "greedy" in str(board)


def test_v2_objective_names_the_tuple_it_takes() -> None:
    from dream_gym.replay.score import v2_objective

    with pytest.raises(ValueError, match=r"one \(work, attainment, rounds, attempts\) per beta, got \(0.1, 0.5\)"):
        v2_objective([(0.1, 0.5)])  # "not enough values to unpack (expected 4, got 2)"
    with pytest.raises(ValueError, match="work and attainment must be finite numbers"):
        v2_objective([(float("nan"), 0.5, 3, 10)])  # an auc of NaN
