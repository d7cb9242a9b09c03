"""The policy interface and run_episode: env path == fast path, recorded errors, built-in policies."""

from __future__ import annotations

import random
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from worldgen import make_world, node, random_records, write_folder

import dream_gym  # noqa: F401  (registers the envs)
from dream_gym.policies import POLICIES, FixedPolicy, GreedyPolicy, RandomPolicy, make_policy
from dream_gym.policy import (
    EpisodeResult,
    FunctionPolicy,
    RunContext,
    as_policy,
    batch_from,
    policy_name,
    run_episode,
)
from dream_gym.replay.mechanics import IllegalBatchError
from dream_gym.replay.session import ReplaySession
from dream_gym.world.tree import World, load_world

BETAS = (0.0, 0.3, 0.7, 1.0)


@pytest.fixture(scope="module")
def world_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    records = random_records(random.Random(21), 120, extras=True)
    return write_folder(tmp_path_factory.mktemp("policy") / "w", records, workers=3)


@pytest.fixture(scope="module")
def bushy_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    records = random_records(random.Random(22), 80, shape="bushy")
    return write_folder(tmp_path_factory.mktemp("bushy") / "w", records, workers=2, frontier="any")


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("which", ["world_folder", "bushy_folder"])
def test_env_path_equals_fast_path(name: str, which: str, request: pytest.FixtureRequest) -> None:
    folder = request.getfixturevalue(which)
    world = load_world(folder)
    for beta in BETAS:
        for seed in (0, 7):
            env = gym.make("DreamGym/Replay-v0", world=folder, beta=beta, max_nodes=256)
            through_env = run_episode(make_policy(name), env, seed=seed)
            env.close()
            fast_world = run_episode(make_policy(name), world, seed=seed, beta=beta)
            fast_session = run_episode(make_policy(name), ReplaySession(world, beta=beta), seed=seed)
            assert through_env == fast_world == fast_session, (name, beta, seed)
            assert through_env.error is None
            assert through_env.attempts > 0 or name not in ("random", "greedy", "fixed")
            assert through_env.beta == beta and through_env.policy == name


def test_results_differ_across_betas_and_are_reproducible(world_folder: Path) -> None:
    world = load_world(world_folder)
    results = {beta: run_episode(make_policy("fixed"), world, beta=beta) for beta in BETAS}
    assert len({r.attempts for r in results.values()}) > 1  # beta matters to the fixed schedule
    assert run_episode(make_policy("fixed"), world, beta=0.3) == results[0.3]
    r1 = run_episode(make_policy("random"), world, seed=1)
    r2 = run_episode(make_policy("random"), world, seed=2)
    assert r1 == run_episode(make_policy("random"), world, seed=1)
    assert r1.batches != r2.batches


def test_episode_result_fields(world_folder: Path) -> None:
    world = load_world(world_folder)
    result = run_episode(make_policy("greedy"), world, beta=0.5)
    assert result.world == world.id
    assert result.attempts == sum(len(b) for b in result.batches)
    assert result.rounds == len(result.batches)
    assert result.work == pytest.approx(result.attempts / (world.size - 1))
    assert result.attainment == pytest.approx(min(max(result.best_q, 0.0), 1.0))
    assert result.terminated or result.truncated
    data = result.to_dict()
    assert EpisodeResult(**data) == result


def _raises(view):
    raise RuntimeError("policy crashed")


def _illegal(view):
    return [12345]


def _returns_none(view):
    return None


def _returns_string(view):
    return "0"


def _late_crash(view):
    if view.rounds >= 2:
        raise ValueError("late")
    return [0]


ERRORS = {
    "exception": (_raises, "RuntimeError: policy crashed", 0),
    "illegal": (_illegal, "IllegalBatchError", 0),
    "none": (_returns_none, "TypeError: policy returned None", 0),
    "string": (_returns_string, "TypeError", 0),
    "late": (_late_crash, "ValueError: late", 2),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_on_error_record(case: str, world_folder: Path) -> None:
    fn, message, rounds = ERRORS[case]
    world = load_world(world_folder)
    env = gym.make("DreamGym/Replay-v0", world=world_folder)
    for target in (env, world):
        result = run_episode(fn, target, on_error="record")
        assert result.error is not None and result.error.startswith(message.split(":")[0])
        assert message in result.error
        assert result.rounds == rounds and result.attempts == rounds
        assert not result.terminated
    env.close()
    with pytest.raises((RuntimeError, IllegalBatchError, TypeError, ValueError)):
        run_episode(fn, world)  # on_error="raise" is the default


def test_illegal_batch_error_names_the_id(world_folder: Path) -> None:
    result = run_episode(_illegal, load_world(world_folder), on_error="record")
    assert "12345" in result.error


def test_run_episode_argument_checks(world_folder: Path) -> None:
    world = load_world(world_folder)
    with pytest.raises(ValueError, match="on_error"):
        run_episode(lambda v: [], world, on_error="ignore")
    with pytest.raises(TypeError, match="run_episode needs"):
        run_episode(lambda v: [], 42)
    with pytest.raises(LookupError, match="unknown world 'no-such-world'"):
        run_episode(lambda v: [], "no-such-world")
    by_path = run_episode(lambda v: [0] if v.rounds < 2 else [], str(world_folder))
    assert by_path == run_episode(lambda v: [0] if v.rounds < 2 else [], load_world(world_folder))
    with pytest.raises(TypeError, match="not a policy"):
        as_policy(42)
    # settings given with an env or a session were ignored without a word (its own were played)
    with pytest.raises(TypeError, match="workers apply to a World or a world reference; a ReplaySession has its own"):
        run_episode(lambda v: [], ReplaySession(world), workers=2)
    with pytest.raises(TypeError, match="beta apply to a World"):
        run_episode(lambda v: [], gym.make("DreamGym/Replay-v1", world=world), beta=0.1)


def test_run_episode_ends_where_a_wrapper_truncates_the_episode() -> None:
    # it stepped on past TimeLimit's truncation, to the end of the replay
    limited = run_episode(make_policy("fixed"), gym.make("DreamGym/cp26-fixed-w4-s0-v1", max_episode_steps=2))
    whole = run_episode(make_policy("fixed"), gym.make("DreamGym/cp26-fixed-w4-s0-v1"))
    assert (limited.rounds, limited.truncated) == (2, True) and whole.rounds > 2 and not whole.truncated
    by_hand = gym.make("DreamGym/cp26-fixed-w4-s0-v1", max_episode_steps=2)
    _, info = by_hand.reset(seed=0)
    policy = make_policy("fixed")
    policy.reset(RunContext.from_view(info["view"], seed=0))
    total, truncated = 0.0, False
    for _ in range(2):
        _, reward, _, truncated, info = by_hand.step(policy.act(info["view"]))
        total += float(reward)
    assert truncated and limited.replay_score == pytest.approx(total)  # V of the rounds played


def test_function_policy_gets_context(world_folder: Path) -> None:
    contexts: list[RunContext] = []

    def with_context(view, context):
        contexts.append(context)
        return []

    result = run_episode(with_context, load_world(world_folder), seed=5, beta=0.4, max_rounds=3)
    assert result.rounds == 0 and result.terminated
    ctx = contexts[0]
    assert (ctx.workers, ctx.beta, ctx.seed, ctx.max_rounds, ctx.frontier_rule) == (3, 0.4, 5, 3, "leaves")
    assert ctx.task_name == "toy-task" and ctx.task_description == "a toy task"
    assert FunctionPolicy(with_context).name == "with_context" and policy_name(FunctionPolicy(_raises)) == "_raises"


def test_batch_from_normalises() -> None:
    assert batch_from([0, 1]) == [0, 1] and batch_from((2,)) == [2] and batch_from(range(2)) == [0, 1]
    assert batch_from(np.array([3, 4])) == [3, 4]
    for bad in (None, "01", 5, {0: 1}, (i for i in range(2))):
        with pytest.raises(TypeError):
            batch_from(bad)


def test_make_policy() -> None:
    assert isinstance(make_policy("random"), RandomPolicy)
    assert isinstance(make_policy("greedy", patience=2), GreedyPolicy)
    assert isinstance(make_policy("fixed", branches=2, depth=3), FixedPolicy)
    with pytest.raises(LookupError, match="known: coverage, fixed, greedy, .*random"):
        make_policy("genius")


def _strict_worlds() -> list[World]:
    rng = random.Random(30)
    worlds = []
    for _ in range(12):
        recs = random_records(rng, rng.randint(1, 60), shape=rng.choice(["chain", "bushy", "mixed"]))
        worlds.append(make_world(recs, workers=rng.randint(1, 4), frontier=rng.choice(["leaves", "any"])))
    return worlds


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_builtin_policies_are_always_legal(name: str) -> None:
    for world in _strict_worlds():
        for beta in (0.0, 0.5, 1.0):
            result = run_episode(make_policy(name), world, beta=beta, seed=3)  # strict: raises if illegal
            assert result.error is None
            assert all(len(b) <= world.workers for b in result.batches)


def test_fixed_policy_schedule() -> None:
    """B branches x D depth on root + chains, W at a time."""
    recs = [node("root", None, 0.0)]
    for b in range(4):
        parent = "root"
        for d in range(5):
            recs.append(node(f"b{b}d{d}", parent, float(d)))
            parent = f"b{b}d{d}"
    world = make_world(recs, workers=2)
    result = run_episode(FixedPolicy(branches=3, depth=2), world)
    assert result.attempts == 6  # 3 branches, each to depth 2
    assert result.batches[0] == [0, 0]
    assert all(len(b) <= 2 for b in result.batches)


def test_greedy_stops_after_patience() -> None:
    recs = [node("root", None, 0.0), node("a", "root", 1.0)] + [
        node(f"c{i}", "a" if i == 0 else f"c{i - 1}", 0.5) for i in range(10)
    ]
    world = make_world(recs, workers=1)
    result = run_episode(GreedyPolicy(min_branches=1, patience=2), world)
    assert result.terminated and result.attempts == 3  # a, then two stale rounds
    assert result.best_score == 1.0


def test_policy_cannot_mutate_state_through_the_view(world_folder: Path) -> None:
    world = load_world(world_folder)
    reference = run_episode(make_policy("greedy"), world, beta=0.5)

    class Vandal(GreedyPolicy):
        def act(self, view):
            for n in view.nodes:
                if n.metrics is not None:
                    try:
                        n.metrics["runtime"] = 0
                    except TypeError:
                        pass
            data = view.to_dict()
            data["nodes"][0]["score"] = 1e9
            return super().act(view)

    result = run_episode(Vandal(), world, beta=0.5)
    assert result.replay_score == reference.replay_score and result.batches == reference.batches


def test_a_session_takes_a_world_reference_and_refuses_settings_that_are_no_settings() -> None:
    # ReplaySession("name") was "'str' object has no attribute 'workers'"; a dict as settings an AttributeError
    by_name = run_episode(make_policy("greedy"), ReplaySession("cp26-fixed-w4-s0", workers=2))
    by_world = run_episode(make_policy("greedy"), ReplaySession(load_world_named("cp26-fixed-w4-s0"), workers=2))
    assert by_name == by_world
    with pytest.raises(TypeError, match="settings must be a ReplaySettings, got dict; give the fields as keywords"):
        ReplaySession(load_world_named("cp26-fixed-w4-s0"), {"workers": 2})
    with pytest.raises(TypeError, match="ReplaySession needs a World or a world reference, got int"):
        ReplaySession(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="strict must be True or False, got 'no'"):  # the env refuses it too
        ReplaySession("cp26-fixed-w4-s0", strict="no")  # type: ignore[arg-type]
    assert ReplaySession("cp26-fixed-w4-s0", strict=np.bool_(False)).strict is False


def load_world_named(name: str) -> World:
    from dream_gym.world.registry import resolve_world

    return resolve_world(name)
