"""The vector replay engine (dream_gym.replay.vector) against the reference rules (Replay and
ReplaySession): the same reveals, frontier, root slots, ranking, best node and legality, on random
batches over pools of mixed-size worlds; and V on arrays equals score.replay_score."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from worldgen import make_world, node, random_records, world_records

from dream_gym.replay.objectives import Progress, replay_value
from dream_gym.replay.score import replay_score
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.vector import NONE, VectorReplay, WorldPool
from dream_gym.rl.macro import ranked_open
from dream_gym.world.tree import World


def pool_of(draws: list[list[dict]], rng: random.Random) -> list[World]:
    return [make_world(records, world_id=f"w{i}", frontier=rng.choice(("leaves", "any")),
                       baseline_score=rng.choice([None, 0.0, 1.5, -2.0]) if records[0]["score"] is not None else 0.0)
            for i, records in enumerate(draws)]


def assert_same_state(replay: VectorReplay, e: int, session: ReplaySession, k: int) -> None:
    ref = session.replay
    n = len(ref.order)
    assert replay.observed[e] == n and replay.rounds[e] == ref.rounds
    offset = replay.pool.offsets[replay.world[e]]
    assert (replay.order[e, :n] - offset).tolist() == ref.order
    assert replay.root_slots[e] == ref.root_slots
    assert sorted(replay.open_ids[e, : replay.open_count[e]].tolist()) == ref.open_ids()
    view = session.view()
    assert [i for i in replay.ranked_open(k)[e].tolist() if i != NONE] == ranked_open(view)[:k]
    assert replay.best_q[e] == session.best_q
    assert replay.best_id[e] == view.best().id and replay.best_depth[e] == view.best().depth
    assert replay.parent_obs[e, 1:n].tolist() == [v.parent for v in view.nodes[1:]]


@settings(max_examples=40, deadline=None)
@given(draws=st.lists(world_records(min_nodes=1, max_nodes=40), min_size=1, max_size=5),
       workers=st.integers(1, 4), rng=st.randoms(use_true_random=False))
@pytest.mark.slow
def test_random_batches_match_the_reference_rules(draws, workers, rng) -> None:
    worlds = pool_of(draws, rng)
    n = 6
    replay = VectorReplay(WorldPool(worlds), n, workers, capacity=2)  # capacity grows as needed
    chosen = [rng.randrange(len(worlds)) for _ in range(n)]
    replay.reset(np.ones(n, dtype=bool), np.array(chosen))
    sessions = [ReplaySession(worlds[w], workers=workers, frontier=None) for w in chosen]
    for _ in range(25):
        batch = np.full((n, workers), NONE)
        for e, session in enumerate(sessions):
            if session.done:  # start this episode again on another world
                chosen[e] = rng.randrange(len(worlds))
                sessions[e] = ReplaySession(worlds[chosen[e]], workers=workers)
                mask = np.zeros(n, dtype=bool)
                mask[e] = True
                replay.reset(mask, np.array([chosen[e]]))
                continue
            ref = session.replay
            slots = [0] * ref.root_slots + ref.open_ids()
            if slots:
                picked = rng.sample(slots, rng.randint(1, min(workers, len(slots))))
                batch[e, : len(picked)] = picked
        replay.apply(batch)
        for e, session in enumerate(sessions):
            if batch[e, 0] != NONE:
                session.step([int(i) for i in batch[e] if i != NONE])
            elif not session.done:
                session.step([])
            if not session.done or batch[e, 0] != NONE:
                assert_same_state(replay, e, session, workers)
            assert bool(replay.exhausted()[e]) == session.replay.exhausted


@settings(max_examples=40, deadline=None)
@given(records=world_records(min_nodes=2, max_nodes=30), workers=st.integers(1, 4),
       rng=st.randoms(use_true_random=False))
def test_legal_part_keeps_and_drops_what_replay_does(records, workers, rng) -> None:
    world = make_world(records, frontier=rng.choice(("leaves", "any")))
    replay = VectorReplay(WorldPool([world]), 1, workers)
    session = ReplaySession(world, workers=workers, strict=False)
    for _ in range(12):
        n_obs = len(session.replay.order)
        raw = [rng.choice([NONE, rng.randint(-3, n_obs + 2), 0]) for _ in range(workers)]
        kept, dropped = replay.legal_part(np.array([raw]), np.ones(1, dtype=bool))
        judged = [s for s in raw if s != NONE]
        expect_kept, expect_dropped = session.replay.legal_part(judged)
        assert [int(s) for s in kept[0] if s != NONE] == expect_kept
        assert [raw[j] for j in range(workers) if dropped[0, j]] == [s for s, _ in expect_dropped]
        if not expect_kept:
            break
        replay.apply(kept)
        session.step(expect_kept)
        if session.done:
            break


def test_inactive_rows_keep_and_drop_nothing() -> None:
    world = make_world([node("root", None, 0.0), node("a", "root", 1.0)], workers=2)
    replay = VectorReplay(WorldPool([world]), 2, 2)
    kept, dropped = replay.legal_part(np.array([[0, 7], [0, 7]]), np.array([True, False]))
    assert kept.tolist() == [[0, NONE], [NONE, NONE]] and dropped.tolist() == [[False, True], [False, False]]


def test_replay_value_is_score_replay_score_on_arrays() -> None:
    rng = np.random.default_rng(0)
    best_q = rng.normal(0, 1, 500)
    attempts = rng.integers(0, 400, 500)
    rounds = rng.integers(0, 100, 500)
    values = replay_value(Progress(best_q, attempts, rounds, np.zeros(500), 0.003, 0.02))
    expected = [replay_score(float(q), int(a), int(k), 0.003, 0.02) for q, a, k in zip(best_q, attempts, rounds, strict=True)]
    assert values.tolist() == expected  # bit for bit


def test_per_episode_arrays_grow_with_the_episode_not_the_world() -> None:
    records = [node("root", None, 0.0)] + [node(f"n{i}", "root", float(i)) for i in range(1, 20_000)]
    small = random_records(random.Random(1), 30)
    replay = VectorReplay(WorldPool([make_world(records, workers=4), make_world(small, workers=4)]), 3, 4)
    replay.reset(np.ones(3, dtype=bool), np.array([0, 1, 0]))
    assert replay.capacity <= 64
    for _ in range(40):
        batch = np.zeros((3, 4), dtype=np.int64)
        batch[:, :] = np.where(np.arange(4) < replay.root_slots[:, None], 0, NONE)
        replay.apply(batch)
    assert replay.observed[0] == 161 and 161 <= replay.capacity < 20_000


def test_reset_rejects_a_world_outside_the_pool() -> None:
    replay = VectorReplay(WorldPool([make_world(random_records(random.Random(2), 5))]), 2, 2)
    with pytest.raises(ValueError, match="out of range"):
        replay.reset(np.ones(2, dtype=bool), np.array([0, 3]))
    with pytest.raises(ValueError, match="at least one world"):
        WorldPool([])
