"""Scores: q, V (v1), rewards as changes of V, the Pareto objective (v2) on hand-computed examples."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from worldgen import make_world, node, random_records

from dream_gym.policy import run_episode
from dream_gym.replay.score import (
    DEFAULT_BETA1,
    DEFAULT_BETA2,
    DEFAULT_BETA_GRID,
    DEFAULT_LAMBDA,
    Normalizer,
    parallel_penalty,
    pareto_auc,
    pareto_front,
    replay_score,
    v2_objective,
)
from dream_gym.replay.session import ReplaySession
from dream_gym.world.registry import resolve_world, shipped_world_names, shipped_worlds_dir
from dream_gym.world.tree import WORLD_FILE, World

# baseline 1.0, best recorded 5.0 (a11): q(s) = (s - 1) / 4
TREE = [
    node("root", None, 1.0),
    node("a", "root", 2.0),  # q 0.25
    node("b", "root", None),
    node("a1", "a", 3.0),  # q 0.5
    node("a11", "a1", 5.0),  # q 1
    node("c", "root", 0.0),  # q -0.25
]


def test_normalizer() -> None:
    norm = Normalizer(baseline=1.0, best=5.0)
    assert norm.q(1.0) == 0.0 and norm.q(5.0) == 1.0 and norm.q(3.0) == 0.5 and norm.q(-3.0) == -1.0
    assert norm.q(None) is None and norm.q(float("nan")) is None
    assert Normalizer(2.0, 2.0).q(7.0) == 0.0  # no recorded improvement: every q is 0
    assert Normalizer(2.0, 1.0).q(7.0) == 0.0


def test_replay_score_formula() -> None:
    assert replay_score(0.5, 0, 0, 0.1, 0.2) == 0.5
    assert replay_score(0.5, 4, 2, 0.1, 0.2) == pytest.approx(0.5 - 0.4 + 0.4)
    assert replay_score(0.0, 6, 1, 0.003, 0.02) == pytest.approx(-0.018 + 0.12)


def test_v_and_rewards_by_hand() -> None:
    b1, b2 = 0.01, 0.1
    session = ReplaySession(make_world(TREE, workers=2), beta1=b1, beta2=b2)
    assert session.value == 0.0
    r1 = session.step([0, 0]).reward  # a (q .25), b (unscored): N=2, k=1
    assert r1 == pytest.approx(0.25 - 2 * b1 + b2 * 2)
    r2 = session.step([1]).reward  # a1 (q .5): N=3, k=2
    assert r2 == pytest.approx((0.5 - 3 * b1 + b2 * 1.5) - (0.25 - 2 * b1 + b2 * 2))
    r3 = session.step([0]).reward  # c (q -.25) does not lower max q: N=4, k=3
    assert r3 == pytest.approx((0.5 - 4 * b1 + b2 * 4 / 3) - (0.5 - 3 * b1 + b2 * 1.5))
    r4 = session.step([]).reward  # stopping changes nothing
    assert r4 == 0.0
    assert session.value == pytest.approx(0.5 - 4 * b1 + b2 * 4 / 3)
    assert r1 + r2 + r3 + r4 == pytest.approx(session.value)
    assert session.best_q == 0.5 and session.best_score == 3.0


def test_unscored_nodes_count_as_attempts_only() -> None:
    recs = [node("root", None, 1.0), node("x", "root", None), node("y", "root", None)]
    world = make_world([*recs, node("z", "root", 3.0)], workers=2)
    session = ReplaySession(world, beta1=0.05, beta2=0.0)
    session.step([0, 0])
    assert session.attempts == 2 and session.best_q == 0.0
    assert session.value == pytest.approx(-0.1)


def test_stop_at_once_scores_q_of_root() -> None:
    session = ReplaySession(make_world(TREE))
    assert session.step([]).reward == 0.0 and session.value == 0.0
    # a baseline different from the root's score makes the root's q the starting quality
    world = make_world(TREE, baseline_score=0.0)  # q = s / 5
    session = ReplaySession(world)
    assert session.step([]).reward == pytest.approx(0.2)


def test_unscored_root_starts_at_zero_quality() -> None:
    recs = [node("root", None, None), node("a", "root", 4.0)]
    world = make_world(recs, baseline_score=2.0, workers=1)
    session = ReplaySession(world, beta1=0.0, beta2=0.0)
    assert session.best_q == 0.0
    session.step([0])
    assert session.value == pytest.approx(1.0) and session.best_score == 4.0


def test_minimize_world_quality() -> None:
    recs = [node("root", None, 10.0), node("a", "root", 7.0), node("b", "a", 4.0)]
    world = make_world(recs, direction="minimize", workers=1)
    session = ReplaySession(world, beta1=0.0, beta2=0.0)
    session.step([0])
    assert session.value == pytest.approx(0.5)  # (-7 + 10) / (-4 + 10)
    session.step([1])
    assert session.value == pytest.approx(1.0)
    assert session.view().nodes[2].score == -4.0


def test_rewards_sum_to_v_on_random_play() -> None:
    rng = random.Random(11)
    for trial in range(20):
        world = make_world(random_records(rng, 40), workers=rng.randint(1, 4))
        session = ReplaySession(world, beta1=0.02, beta2=0.05, max_rounds=rng.choice([None, 5]))
        total = 0.0
        while not session.done:
            view = session.view()
            slots = [0] * view.root_slots + [i for i in view.frontier if i]
            batch = rng.sample(slots, min(len(slots), rng.randint(0, view.workers)))
            total += session.step(batch).reward
        qs = [session.normalizer.q(n.score) for n in session.view().nodes]
        best_q = max([q for q in qs if q is not None], default=0.0)
        expected = replay_score(best_q, session.attempts, session.rounds, 0.02, 0.05)
        assert total == pytest.approx(expected, abs=1e-12), trial
        assert session.value == pytest.approx(expected, abs=1e-12)


# -- v2 ---------------------------------------------------------------------------------------
def test_pareto_auc_hand_computed() -> None:
    assert pareto_auc([(0.2, 0.5), (0.6, 0.9)]) == pytest.approx(0.8 * 0.5 + 0.4 * 0.4)
    assert pareto_auc([(0.6, 0.9), (0.2, 0.5)]) == pytest.approx(0.56)  # order does not matter
    assert pareto_auc([(0.2, 0.5), (0.6, 0.9), (0.7, 0.4), (0.6, 0.3)]) == pytest.approx(0.56)  # dominated
    assert pareto_auc([(0.0, 1.0)]) == 1.0
    assert pareto_auc([(0.5, 0.5)]) == pytest.approx(0.25)
    assert pareto_auc([(1.0, 1.0)]) == 0.0
    assert pareto_auc([]) == 0.0
    assert pareto_auc([(-0.3, 1.7)]) == 1.0  # clipped into the box
    assert pareto_auc([(0.5, -2.0)]) == 0.0
    assert pareto_auc([(0.1, 0.2), (0.1, 0.6), (0.4, 0.6)]) == pytest.approx(0.9 * 0.6)


def test_pareto_front() -> None:
    assert pareto_front([(0.6, 0.9), (0.2, 0.5), (0.7, 0.4), (0.2, 0.1), (0.9, 0.9)]) == [(0.2, 0.5), (0.6, 0.9)]


def test_parallel_penalty_and_v2() -> None:
    assert parallel_penalty(5, 5) == 1.0 and parallel_penalty(2, 8) == 0.25 and parallel_penalty(0, 0) == 0.0
    result = v2_objective([(0.2, 0.5, 2, 4), (0.6, 0.9, 3, 3)], lam=0.2)
    assert result.auc == pytest.approx(0.56)
    assert result.penalty == pytest.approx((0.5 + 1.0) / 2)
    assert result.value == pytest.approx(0.56 - 0.2 * 0.75)
    assert result.front == ((0.2, 0.5), (0.6, 0.9))
    assert v2_objective([(0.2, 0.5, 1, 4)]).value == pytest.approx(0.4 - DEFAULT_LAMBDA * 0.25)
    with pytest.raises(ValueError):
        v2_objective([])


def test_documented_defaults() -> None:
    assert (DEFAULT_BETA1, DEFAULT_BETA2, DEFAULT_LAMBDA) == (0.003, 0.02, 0.1)
    assert DEFAULT_BETA_GRID == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def test_episode_work_and_attainment() -> None:
    world = make_world(TREE, workers=2)
    result = run_episode(lambda view: [0, 0] if view.rounds == 0 else [], world)
    assert result.attempts == 2 and result.rounds == 1
    assert result.work == pytest.approx(2 / 5)
    assert result.attainment == pytest.approx(0.25) and result.best_q == pytest.approx(0.25)
    assert result.replay_score == pytest.approx(0.25 - 2 * DEFAULT_BETA1 + DEFAULT_BETA2 * 2)


def _chain_world(seed: int):
    """A 'root + chains' world like the shipped ones: W=4, ~200 nodes, gains early in chains."""
    rng = random.Random(seed)
    recs = [node("root", None, 1.0)]
    for b in range(12):
        score, parent = 1.0, "root"
        for d in range(rng.randint(10, 20)):
            score += rng.uniform(-0.2, 1.0) / (1 + d)
            rid = f"b{b}d{d}"
            recs.append(node(rid, parent, round(score, 4) if rng.random() > 0.15 else None))
            parent = rid
    return make_world(recs, workers=4)


def _finished_shipped_worlds() -> list[World]:
    """Shipped worlds whose world.json carries the checksum (finished, not being grown right now)."""
    worlds = []
    for name in shipped_world_names():
        meta = json.loads((shipped_worlds_dir() / name / WORLD_FILE).read_text(encoding="utf-8"))
        if meta.get("sha256"):
            worlds.append(resolve_world(name))
    return worlds


def _reveal_everything(world: World) -> float:
    session = ReplaySession(world)
    while not session.done:
        view = session.view()
        session.step(([0] * view.root_slots + [i for i in view.frontier if i])[: view.workers])
    assert session.replay.exhausted
    return session.value


def _straight_to_the_best(world: World) -> float:
    """A policy that walks to the best recorded node (revealing what the rules force), then stops."""
    scores = np.where(np.isnan(world.score), -np.inf, world.score)
    path = [int(np.argmax(scores))]
    while world.parent[path[-1]] >= 0:
        path.append(int(world.parent[path[-1]]))
    path.reverse()
    session = ReplaySession(world)
    order = session.replay.order
    for parent, child in zip(path, path[1:], strict=False):
        while child not in order:
            view = session.view()
            if parent == 0:
                need = world.children_of(0).tolist().index(child) + 1 - len(view.children(0))
                session.step([0] * min(need, view.root_slots))
            else:
                session.step([order.index(parent)])  # strict: raises if the path is not walkable
    session.step([])
    assert session.best_q == 1.0
    return session.value


def test_defaults_make_neither_extreme_optimal() -> None:
    """With the default betas, some policy beats both 'stop at once' and 'reveal everything'."""
    worlds = [_chain_world(s) for s in range(3)] + _finished_shipped_worlds()
    for world in worlds:
        stop = run_episode(lambda view: [], world).replay_score
        everything = _reveal_everything(world)
        assert _straight_to_the_best(world) > max(stop, everything), world.id
        assert everything < 1.0  # revealing everything costs quality


def test_v2_refuses_a_penalty_weight_that_is_negative_or_not_finite() -> None:
    episodes = [(0.5, 0.8, 2, 4)]
    assert v2_objective(episodes, lam=0.0).value == v2_objective(episodes, lam=0.0).auc
    for lam in (-1.0, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="lam .v2's parallel-penalty weight. must be a finite number >= 0"):
            v2_objective(episodes, lam=lam)
