"""Every implementation of a reveal rule agrees with the others, for every rule of REVEAL_RULES.

Replay (the reference), VectorReplay and the single env's engine (compiled kernels with their own
loops), the online loop's view and legality check (the real tree, whose future is not recorded
yet) and the oracle's cost model (reachability, fewest attempts, fewest rounds) are pinned to each
other on seeded random worlds: the same frontier, the same kept selections of random batches, the same reveals; online
legality restricted to nodes with an unrevealed recorded child is replay legality; the nodes any
schedule reveals, and the fewest attempts and rounds that reveal them (found by exhaustive
search over Replay on tiny worlds), are the oracle's.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from worldgen import make_world, random_records

from dream_gym.envs.env import ReplayEnv
from dream_gym.online.loop import check_online_batch, tree_view
from dream_gym.replay.mechanics import ROOT, IllegalBatchError, Replay
from dream_gym.replay.oracle import reach_costs
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.vector import NONE, VectorReplay, WorldPool
from dream_gym.world.reveal_rules import REVEAL_RULES
from dream_gym.world.tree import World

RULES = sorted(REVEAL_RULES)
SEEDS = range(12)


def random_world(rng: random.Random, rule: str, low: int, high: int, shape: str | None = None) -> World:
    shape = shape or rng.choice(("chain", "bushy", "mixed"))
    records = random_records(rng, rng.randint(low, high), shape=shape)
    return make_world(records, frontier=rule, workers=rng.randint(1, 4))


def candidate_batches(replay: Replay, rng: random.Random, count: int) -> list[list[int]]:
    """Random batches of at most W selections: legal ones, and ones with ids off the frontier,
    out of range, repeated, or the root more often than it may open branches."""
    n_obs = len(replay.order)
    legal = [ROOT] * replay.root_slots + replay.open_ids()
    batches = []
    for _ in range(count):
        size = rng.randint(1, replay.workers)
        if legal and rng.random() < 0.5:
            batch = rng.sample(legal, min(size, len(legal)))
        else:
            batch = [rng.choice([ROOT, rng.randrange(n_obs + 2), *legal[:1]]) for _ in range(size)]
        batches.append(batch)
    return batches


def revealed_records(replay: Replay) -> list[dict]:
    """The revealed tree as the records of a real run, line = observed id (reveal order)."""
    world = replay.world
    position = {index: obs_id for obs_id, index in enumerate(replay.order)}
    records = []
    for obs_id, index in enumerate(replay.order):
        parent = int(world.parent[index])
        score = world.score_list[index]
        records.append({"id": f"o{obs_id}", "parent": None if parent < 0 else f"o{position[parent]}",
                        "score": score, **({} if score is not None else {"error": "failed"})})
    return records


def has_unrevealed_child(replay: Replay, obs_id: int) -> bool:
    index = replay.world_index(obs_id)
    return replay._revealed_children.get(index, 0) < len(replay.world.children_of(index))


def replay_accepts(replay: Replay, batch: list[int]) -> bool:
    try:
        replay.check(batch)
    except IllegalBatchError:
        return False
    return True


def online_accepts(view, batch: list[int]) -> bool:
    try:
        check_online_batch(view, batch)
    except IllegalBatchError:
        return False
    return True


def assert_same_frontier(replay: Replay, vector: VectorReplay) -> None:
    n = len(replay.order)
    offset = vector.pool.offsets[vector.world[0]]
    assert (vector.order[0, :n] - offset).tolist() == replay.order
    assert int(vector.root_slots[0]) == replay.root_slots
    assert sorted(vector.open_ids[0, : vector.open_count[0]].tolist()) == replay.open_ids()
    assert bool(vector.exhausted()[0]) == replay.exhausted


def assert_online_agrees(replay: Replay, batches: list[list[int]]) -> None:
    """Online, every node's future is open; replay is online legality where the record goes on."""
    view = tree_view(revealed_records(replay), dict(replay.world.meta), workers=replay.workers, beta=0.5,
                     frontier=replay.frontier_rule, rounds=replay.rounds, max_rounds=None)
    online_open = [i for i in view.frontier if i != ROOT]
    assert [i for i in online_open if has_unrevealed_child(replay, i)] == replay.open_ids()
    assert view.root_slots == replay.workers
    for batch in batches:
        recorded = all(s == ROOT or (0 <= s < len(replay.order) and has_unrevealed_child(replay, s)) for s in batch)
        within_root = batch.count(ROOT) <= replay.root_slots
        assert replay_accepts(replay, batch) == (online_accepts(view, batch) and recorded and within_root), batch


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rule", RULES)
def test_replay_vector_replay_env_online_and_oracle_agree_on_random_episodes(rule: str, seed: int) -> None:
    rng = random.Random(f"{rule}-{seed}")
    world = random_world(rng, rule, 2, 60)
    workers = world.workers
    replay = Replay(world, workers, rule)
    vector = VectorReplay(WorldPool([world]), 1, workers, frontier=rule, capacity=2)
    env = ReplayEnv(world, workers=workers, frontier=rule)
    _, info = env.reset(seed=0)
    costs = reach_costs(world, workers, rule)
    assert costs.feasible[ROOT] and costs.attempts[ROOT] == 0 and costs.rounds[ROOT] == 0
    while True:
        assert_same_frontier(replay, vector)
        assert info["frontier"] == replay.frontier_counts()
        batches = candidate_batches(replay, rng, 6)
        assert_online_agrees(replay, batches)
        for batch in batches:
            row = np.full((1, workers), NONE)
            row[0, : len(batch)] = batch
            kept, _ = vector.legal_part(row, np.ones(1, dtype=bool))
            assert [int(s) for s in kept[0] if s != NONE] == replay.legal_part(batch)[0], batch
        playable = [b for b in batches if replay.legal_part(b)[0]]
        if not playable:
            break
        raw = rng.choice(playable)  # the env drops what the rules refuse, as Replay.legal_part does
        batch, dropped = replay.legal_part(raw)
        _, _, terminated, _, info = env.step(list(raw))
        assert [s for s, _ in info["dropped"]] == [s for s, _ in dropped]
        assert info["new_ids"] == list(range(len(replay.order), len(replay.order) + len(batch)))
        row = np.full((1, workers), NONE)
        row[0, : len(batch)] = batch
        vector.apply(row)
        for new_id in replay.apply(batch):  # no schedule beats the oracle's cost model
            node = replay.world_index(new_id)
            assert costs.feasible[node]
            assert replay.attempts >= costs.attempts[node] and replay.rounds >= costs.rounds[node]
        assert terminated == replay.exhausted
        if terminated:
            break


def all_batches(replay: Replay) -> list[list[int]]:
    """Every legal non-empty batch (as a multiset: the root 0..root_slots times, distinct others)."""
    others = replay.open_ids()
    batches = []
    for roots in range(replay.root_slots + 1):
        for size in range(max(0, 1 - roots), min(replay.workers - roots, len(others)) + 1):
            batches += [[ROOT] * roots + list(chosen) for chosen in itertools.combinations(others, size)]
    return batches


def exhaustive_reach(world: World, workers: int, rule: str) -> tuple[dict[int, int], dict[int, int]]:
    """Per node any schedule reveals: the fewest attempts and the fewest rounds, by breadth-first
    search over every legal batch sequence played on Replay."""
    fewest_attempts: dict[int, int] = {ROOT: 0}
    fewest_rounds: dict[int, int] = {ROOT: 0}
    layer: dict[frozenset[int], list[list[int]]] = {frozenset([ROOT]): []}
    seen = set(layer)
    while layer:
        next_layer: dict[frozenset[int], list[list[int]]] = {}
        for schedule in layer.values():
            replay = Replay(world, workers, rule)
            for batch in schedule:
                replay.apply(batch)
            for batch in all_batches(replay):
                child = Replay(world, workers, rule)
                for earlier in schedule:
                    child.apply(earlier)
                child.apply(batch)
                state = frozenset(child.order)
                for node in child.order:
                    fewest_attempts[node] = min(fewest_attempts.get(node, child.attempts), child.attempts)
                    fewest_rounds[node] = min(fewest_rounds.get(node, child.rounds), child.rounds)
                if state not in seen:
                    seen.add(state)
                    next_layer[state] = [*schedule, batch]
        layer = next_layer
    return fewest_attempts, fewest_rounds


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rule", RULES)
def test_oracle_reachability_is_what_exhaustive_replay_reaches(rule: str, seed: int) -> None:
    rng = random.Random(f"tiny-{rule}-{seed}")
    world = random_world(rng, rule, 4, 9, shape="bushy")  # bushy: non-root nodes with several children
    for workers in (1, 2, 3):
        attempts, rounds = exhaustive_reach(world, workers, rule)
        costs = reach_costs(world, workers, rule)
        assert sorted(attempts) == np.flatnonzero(costs.feasible).tolist()
        for node in attempts:
            assert (attempts[node], rounds[node]) == (costs.attempts[node], costs.rounds[node]), node


@pytest.mark.parametrize("rule", RULES)
def test_a_rule_selects_a_node_at_most_once_per_recorded_child(rule: str) -> None:
    """The interface's own invariants: selections(n) <= n, and the array form matches."""
    reveal_rule = REVEAL_RULES[rule]
    counts = np.arange(0, 50)
    assert all(0 <= reveal_rule.selections(int(n)) <= n for n in counts)
    assert reveal_rule.selection_limits(counts).tolist() == [reveal_rule.selections(int(n)) for n in counts]


# -- request mode ---------------------------------------------------------------------------------
def request_batches(replay: Replay, rng: random.Random, count: int) -> list[list[int]]:
    """Random request-mode batches: mostly from the (online) frontier, the root up to W times,
    now and then an id off it, out of range or repeated."""
    legal = replay.open_ids()
    batches = []
    for _ in range(count):
        size = rng.randint(1, replay.workers)
        pool = [ROOT] * replay.workers + legal
        batch = rng.sample(pool, min(size, len(pool)))
        if rng.random() < 0.2:
            batch[rng.randrange(len(batch))] = rng.randrange(len(replay.order) + 2)
        batches.append(batch)
    return batches


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rule", RULES)
def test_request_mode_is_the_online_frontier_answered_by_the_rule(rule: str, seed: int) -> None:
    """Request mode's frontier is the online loop's on the revealed tree; its hits are a legal
    batch of the rule itself, revealing the same nodes (so the oracle's cost model bounds it);
    its refusals are exactly the selections with no unrevealed recorded child (the root beyond
    its unopened branches); the env's engine and the session agree with Replay step by step."""
    rng = random.Random(f"requests-{rule}-{seed}")
    world = random_world(rng, rule, 2, 60)
    workers = world.workers
    requests = Replay(world, workers, rule, requests=True)
    plain = Replay(world, workers, rule)  # the rule's own replay, fed the hits
    env = ReplayEnv(world, workers=workers, frontier=rule, requests=True)
    _, info = env.reset(seed=0)
    session = ReplaySession(world, workers=workers, frontier=rule, requests=True)
    costs = reach_costs(world, workers, rule)
    refusals = 0
    for _ in range(200):
        view = tree_view(revealed_records(requests), dict(world.meta), workers=workers, beta=0.5, frontier=rule,
                         rounds=requests.rounds, max_rounds=None)
        assert requests.frontier() == view.frontier and requests.root_slots == view.root_slots == workers
        assert info["frontier"] == requests.frontier_counts() == session.replay.frontier_counts()
        assert plain.order == requests.order and plain.open_ids() == [
            i for i in requests.open_ids() if has_unrevealed_child(requests, i)]
        batch = rng.choice(request_batches(requests, rng, 4))
        if not requests.legal_part(batch)[0]:
            continue
        hits, dropped, refused = requests.judge(batch)
        unopened = len(world.children_of(ROOT)) - requests._revealed_children.get(ROOT, 0)
        for obs_id in refused:
            assert obs_id == ROOT or not has_unrevealed_child(requests, obs_id)
        assert refused.count(ROOT) == max(0, [*hits, *refused].count(ROOT) - unopened)
        assert all(s == ROOT or has_unrevealed_child(requests, s) for s in hits)
        if dropped:  # a strict session refuses a batch off the online frontier; the env drops those
            with pytest.raises(IllegalBatchError):
                session.step(batch)
        outcome = session.step(requests.legal_part(batch)[0])
        _, _, terminated, truncated, info = env.step(list(batch))
        assert info["refused"] == refused and outcome.refused == refused
        refusals += len(refused)
        attempts = requests.attempts + len(hits)
        assert info["coverage"] == attempts / (attempts + refusals) == session.coverage
        if not hits:  # a batch of refusals ends the episode, cut short
            assert truncated and not terminated and info["truncated_by"] == "record" and info["cut_short"]
            assert session.done and session.truncated and session.cut_short
            break
        assert plain.check(hits) == hits  # the hits are a legal batch of the rule
        new_ids = requests.apply(hits)
        assert plain.apply(hits) == new_ids == info["new_ids"] == outcome.new_ids
        for new_id in new_ids:  # no request schedule beats the oracle's cost model
            node = requests.world_index(new_id)
            assert costs.feasible[node]
            assert requests.attempts >= costs.attempts[node] and requests.rounds >= costs.rounds[node]
        assert session.refused == refusals == env.session.refused
    assert session.cut_short and refusals  # every episode asked beyond the record, and ended there
