"""The oracle limit: brute force on small worlds, replayed schedules, real imported runs, speed-free."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import numpy as np
import pytest
from brute_force import brute_force_limit
from external_runs import import_all
from hypothesis import given, settings
from hypothesis import strategies as st
from worldgen import frontier_st, make_world, node, random_records, workers_st, world_records

from dream_gym.policies import POLICIES, make_policy
from dream_gym.policy import run_episode
from dream_gym.replay.oracle import OracleLimit, oracle_limit
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.replay.session import ReplaySession
from dream_gym.world.registry import resolve_world, shipped_world_names
from dream_gym.world.tree import World

betas1 = st.sampled_from((0.0, 0.003, 0.05, 0.2))
betas2 = st.sampled_from((0.0, 0.02, 0.1, 0.5))
round_limits = st.sampled_from((None, 1, 2, 3))


def replayed_value(world: World, limit: OracleLimit) -> float:
    """Play the oracle's batches through a strict ReplaySession and return its final V."""
    session = ReplaySession(world, workers=limit.workers, beta1=limit.beta1, beta2=limit.beta2,
                            frontier=limit.frontier, max_rounds=limit.max_rounds)
    for batch in limit.batches:
        assert not session.done
        session.step(list(batch))
    if not session.done:
        session.step([])
    assert [session.replay.world_index(i) for i in range(len(session.nodes))] == list(limit.nodes)
    assert (session.attempts, session.rounds) == (limit.attempts, limit.rounds)
    return session.value


# -- by hand -----------------------------------------------------------------------------
# baseline 0, best 10: q = s / 10. Root children in creation order: a, b, c.
HAND = [
    node("root", None, 0.0),
    node("a", "root", 1.0),
    node("b", "root", 2.0),
    node("a1", "a", 3.0),
    node("b1", "b", 4.0),
    node("b2", "b", 10.0),  # second child of b: unreachable under "leaves"
    node("c", "root", 5.0),
    node("b11", "b1", 9.0),
]


def test_closure_cost_by_hand_beta2_zero() -> None:
    world = make_world(HAND, workers=2)
    # leaves: b11 needs a, b (root opens in order), b1, b11: N = 4, R = 1 + 2 = 3
    limit = oracle_limit(world, 2, beta1=0.01, beta2=0.0, frontier="leaves")
    assert limit.exact and limit.value == pytest.approx(0.9 - 0.04)
    assert world.ids[limit.target] == "b11" and limit.attempts == 4 and limit.rounds == 3
    # any: b2 (q 1) needs a, b, b1, b2: N = 4 as well, and q 1 beats 0.9
    limit = oracle_limit(world, 2, beta1=0.01, beta2=0.0, frontier="any")
    assert limit.value == pytest.approx(1.0 - 0.04) and world.ids[limit.target] == "b2"
    # a high cost per attempt: c (q .5, N = 3) loses to b (q .2, N = 2); stopping (0) loses too
    limit = oracle_limit(world, 2, beta1=0.09, beta2=0.0, frontier="leaves")
    assert limit.value == pytest.approx(max(0.2 - 0.18, 0.5 - 0.27, 0.9 - 0.36, 0.1 - 0.09))
    # nothing is worth its cost: the limit is to stop at once
    limit = oracle_limit(world, 2, beta1=1.0, beta2=0.0)
    assert limit.value == 0.0 and limit.batches == () and limit.nodes == (0,)


def test_round_limit_by_hand() -> None:
    world = make_world(HAND, workers=2)
    one = oracle_limit(world, 2, beta1=0.01, beta2=0.0, max_rounds=1)  # a or b in round 1
    assert one.exact and one.value == pytest.approx(0.2 - 0.02) and one.rounds == 1
    two = oracle_limit(world, 2, beta1=0.01, beta2=0.0, max_rounds=2)  # b1 or c in round 2
    assert two.value == pytest.approx(0.5 - 0.03)
    wide = oracle_limit(world, 3, beta1=0.01, beta2=0.0, max_rounds=1)  # W = 3 opens c at once
    assert wide.value == pytest.approx(0.5 - 0.03)


def test_parallel_bonus_prefers_full_rounds() -> None:
    world = make_world(HAND, workers=2)
    # beta1 = 0: V = best q + beta2 * N / k <= q + 2 * beta2; b11 with 2 reveals a round
    limit = oracle_limit(world, 2, beta1=0.0, beta2=0.1, frontier="leaves")
    assert limit.value == pytest.approx(brute_force_limit(world, 2, "leaves", 0.0, 0.1))
    assert limit.exact and limit.attempts / limit.rounds == 2
    assert replayed_value(world, limit) == limit.value


# -- against brute force ---------------------------------------------------------------------
@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(world_records(min_nodes=1, max_nodes=10), workers_st, frontier_st, betas1, betas2, round_limits)
def test_oracle_matches_brute_force(records, workers, frontier, beta1, beta2, max_rounds) -> None:
    world = make_world(records, workers=workers, frontier=frontier)
    limit = oracle_limit(world, workers, beta1, beta2, frontier, max_rounds)
    truth = brute_force_limit(world, workers, frontier, beta1, beta2, max_rounds)
    assert replayed_value(world, limit) == limit.lower
    assert limit.lower <= truth + 1e-9 <= limit.value + 2e-9
    if beta2 == 0:
        assert limit.exact
    if limit.exact:
        assert limit.value == pytest.approx(truth, abs=1e-9) and limit.gap == 0
    if max_rounds is not None:
        assert limit.rounds <= max_rounds


def test_oracle_is_exact_on_random_small_worlds() -> None:
    """Over many random worlds the constructed schedule reaches the brute-force optimum and the
    bound proves it (measured on 30,000 worlds of up to 13 nodes: no exception)."""
    for seed in range(400):
        rng = random.Random(seed)
        world = make_world(random_records(rng, rng.randint(2, 11), shape=rng.choice(("chain", "bushy"))),
                           workers=rng.randint(1, 3), frontier=rng.choice(("leaves", "any")))
        beta1, beta2 = rng.choice((0.0, 0.003, 0.05)), rng.choice((0.02, 0.1, 0.5))
        limit = oracle_limit(world, world.workers, beta1, beta2)
        truth = brute_force_limit(world, world.workers, world.frontier_rule, beta1, beta2)
        assert limit.exact and limit.value == pytest.approx(truth, abs=1e-9), seed


def test_per_round_capacity_tightens_the_bound() -> None:
    """Three nodes first revealable in round 4 with W = 2: the bound counts only two of them then
    (min over t of #{R <= t} + (k - t) W), so the limit is proven exact."""
    records = [node("root", None, -3.0), node("n1", "root", -2.6), node("n2", "n1", None),
               node("n3", "n2", None), node("n4", "n1", None), node("n5", "n1", 0.0),
               node("n6", "n3", 9.0), node("n7", "n2", 1.9), node("n8", "n3", None), node("n9", "n5", None)]
    world = make_world(records, workers=2, frontier="any")
    limit = oracle_limit(world, 2, beta1=0.0, beta2=0.1)
    assert limit.exact and limit.value == pytest.approx(1.0 + 0.1 * 8 / 5)
    assert limit.value == pytest.approx(brute_force_limit(world, 2, "any", 0.0, 0.1))


# -- shipped and real worlds -----------------------------------------------------------------
def independent_limit_beta2_zero(world: World, workers: int, frontier: str, beta1: float) -> float:
    """beta2 = 0 by walking each node's path: the fewest reveals are its closure (slow, plain)."""
    best_recorded, base = world.best_score, world.baseline_score
    span = best_recorded - base
    q0 = 0.0 if math.isnan(world.score[0]) else ((world.score[0] - base) / span if span > 0 else 0.0)
    best = q0
    for x in range(1, world.size):
        if math.isnan(world.score[x]):
            continue
        cost, v, reachable = 0, x, True
        while v != 0:
            p = int(world.parent[v])
            rank = list(world.children_of(p)).index(v)
            if frontier == "leaves" and p != 0 and rank > 0:
                reachable = False
            cost += rank + 1 if (p == 0 or frontier == "any") else 1
            v = p
        q = (world.score[x] - base) / span if span > 0 else 0.0
        if reachable:
            best = max(best, q - beta1 * cost)
    return best


def policy_values(world: World, workers: int, frontier: str, **options: float) -> list[float]:
    values = []
    for name in sorted(POLICIES):
        for beta in (0.0, 0.5, 1.0):
            result = run_episode(make_policy(name), world, workers=workers, frontier=frontier, beta=beta, **options)
            values.append(result.replay_score)
    return values


@pytest.mark.parametrize("name", shipped_world_names()[::4])
def test_shipped_worlds_no_policy_beats_the_limit(name: str) -> None:
    world = resolve_world(name)
    limit = oracle_limit(world, world.workers)
    assert replayed_value(world, limit) == limit.lower
    assert max(policy_values(world, world.workers, world.frontier_rule)) <= limit.value + 1e-9
    zero = oracle_limit(world, world.workers, beta2=0.0)
    assert zero.value == pytest.approx(
        independent_limit_beta2_zero(world, world.workers, world.frontier_rule, DEFAULT_BETA1), abs=1e-12
    )


@pytest.mark.slow
@pytest.mark.usefixtures("external_runs")
def test_real_imported_runs(tmp_path) -> None:
    worlds = import_all(tmp_path)
    assert worlds, "no real run imported"
    for world in worlds:
        for frontier in ("leaves", "any"):
            for workers in (1, 4):
                limit = oracle_limit(world, workers, frontier=frontier)
                assert replayed_value(world, limit) == limit.lower
                if workers == 4:
                    assert max(policy_values(world, workers, frontier)) <= limit.value + 1e-9
                zero = oracle_limit(world, workers, beta2=0.0, frontier=frontier)
                assert zero.exact and zero.value == pytest.approx(
                    independent_limit_beta2_zero(world, workers, frontier, DEFAULT_BETA1), abs=1e-12
                )
                stop = [oracle_limit(world, workers, frontier=frontier, max_rounds=r).value for r in (1, 2, 3)]
                assert stop == sorted(stop) and stop[-1] <= limit.value + 1e-12


def test_round_limited_limits_grow_with_the_limit() -> None:
    world = make_world(random_records(random.Random(7), 300), workers=4)
    values = [oracle_limit(world, 4, max_rounds=r).value for r in (1, 2, 3, 5, 8, 1000)]
    assert values == sorted(values)
    assert values[-1] == pytest.approx(oracle_limit(world, 4).value)


# -- errors and honesty ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "workers must be a whole number >= 1, got 0"),
        ({"workers": 3.9}, "workers must be a whole number >= 1, got 3.9"),  # it gave W = 3's limit
        ({"workers": True}, "workers must be a whole number >= 1, got True"),
        ({"frontier": "all"}, "frontier must be one of"),
        ({"beta1": -0.1}, "beta1 and beta2 must be finite and >= 0"),
        ({"beta2": math.inf}, "beta1 and beta2 must be finite and >= 0"),
        ({"max_rounds": 0}, "max_rounds must be >= 1"),
    ],
)
def test_bad_arguments_are_named(kwargs, message) -> None:
    world = make_world(HAND, workers=2)
    args = {"workers": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        oracle_limit(world, **args)


def test_a_world_reference_is_taken_as_the_world() -> None:
    # a name was "'str' object has no attribute 'frontier_rule'"
    assert oracle_limit("cp26-fixed-w4-s0", 3) == oracle_limit(resolve_world("cp26-fixed-w4-s0"), 3)


def test_single_node_world_and_world_without_gain() -> None:
    lone = make_world([node("root", None, 1.0)], workers=2)
    limit = oracle_limit(lone, 2)
    assert limit.exact and limit.value == 0.0 and limit.batches == ()
    flat = make_world([node("root", None, 1.0), node("a", "root", 1.0), node("b", "root", None)], workers=2)
    limit = oracle_limit(flat, 2, beta1=0.003, beta2=0.02)  # q 0 everywhere: only the bonus counts
    assert limit.value == pytest.approx(2 * (0.02 - 0.003)) and replayed_value(flat, limit) == limit.value
    assert math.isnan(oracle_limit(lone, 2).share(0.0))


def test_policies_cannot_reach_the_oracle() -> None:
    """The replay, view and env layers never import the oracle: a policy cannot see the limit."""
    code = ("import sys, dream_gym.envs.env, dream_gym.replay.session, dream_gym.replay.view, dream_gym.policy, "
            "dream_gym.policies; print('dream_gym.replay.oracle' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_defaults_are_the_score_defaults() -> None:
    world = make_world(random_records(random.Random(3), 60), workers=4)
    assert oracle_limit(world, 4) == oracle_limit(world, 4, DEFAULT_BETA1, DEFAULT_BETA2, "leaves", None)
    assert np.isfinite(oracle_limit(world, 4).value)
