"""The single env's incremental state against a full rebuild.

``info["frontier"]`` is kept per observation buffer set and brought up to date with the ids the
steps since changed; the session's V, N and k are read from the engine instead of replaying the
episode. Both must give exactly what a session that plays every batch gives: its replay's
frontier (ids, multiplicities and order) and its value, attempts and rounds, at every step, on
random worlds, under both frontier rules and request mode, through resets, whatever the caller
holds on to (a frontier someone holds is never changed: its copy is brought up to date instead).
"""

from __future__ import annotations

import copy
import pickle
import random
import warnings
from typing import Any

import pytest
from worldgen import make_world, random_records
from worldgen import node as node_record

from dream_gym.envs.env import FrontierCounts, ReplayEnv
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.session import ReplaySession

# What the caller keeps from each step's info (the env may reuse a frontier nobody holds).
KEEPERS = {
    "nothing": lambda step, info: None,
    "every info": lambda step, info: info,
    "the frontier only": lambda step, info: info["frontier"],
    "every third frontier": lambda step, info: info["frontier"] if step % 3 == 0 else None,
    "the view only": lambda step, info: info["view"],
}


def random_env(rng: random.Random, **options: Any) -> ReplayEnv:
    size = rng.choice((2, 6, 20, 60, 150, 300))
    records = random_records(rng, size, shape=rng.choice(("chain", "bushy", "mixed")))
    world = make_world(records, workers=rng.randint(1, 5), frontier=rng.choice(("leaves", "any")))
    if rng.random() < 0.25 and size > 20:
        options.setdefault("max_nodes", rng.randint(8, size - 1))  # episodes cut when the next batch might not fit
    return ReplayEnv(world, requests=rng.random() < 0.2, **options)


def next_action(rng: random.Random, info: dict[str, Any], workers: int) -> list[int]:
    """Mostly a legal batch from the frontier, sometimes illegal ids, rarely the empty batch."""
    slots = [node for node, times in info["frontier"].items() for _ in range(times)]
    roll = rng.random()
    if roll < 0.85 and slots:
        return rng.sample(slots, rng.randint(1, min(workers, len(slots))))
    if roll < 0.97:
        observed = info["attempts"] + 1
        return [rng.randrange(observed + 2) for _ in range(rng.randint(1, workers))]
    return []


def the_full_rebuild(session: ReplaySession) -> list[tuple[int, int]]:
    return list(session.replay.frontier_counts().items())


def play_against_a_full_replay(seed: int, keep: Any, **options: Any) -> list[tuple[Any, Any]]:
    """Play random episodes on one random env next to a session that plays every batch; check
    every step; return what the caller held, with a copy of each held frontier as it was."""
    rng = random.Random(seed)
    env = random_env(rng, **options)
    reference = ReplaySession(env.world, env.settings, strict=False)
    held: list[tuple[Any, Any]] = []
    for _ in range(3):
        _, info = env.reset()
        reference.reset()
        for step in range(80):
            assert list(info["frontier"].items()) == the_full_rebuild(reference)
            assert list(info["view"].frontier) == list(reference.view().frontier)
            followed = env._followed
            session = env.session
            assert (session.value, session.attempts, session.rounds) == (
                reference.value, reference.attempts, reference.rounds)
            assert (env.value, env.attempts, env.rounds) == (reference.value, reference.attempts, reference.rounds)
            assert env._followed == followed, "reading V, N or k played the episode's batches"
            kept = keep(step, info)
            if kept is not None:  # with what it shows now (a view's fields are filled when first read)
                held.append((kept, the_full_rebuild(reference)))
            action = next_action(rng, info, env.workers)
            _, reward, terminated, truncated, info = env.step(action)
            outcome = reference.step(action)
            assert reward == outcome.reward
            if terminated or truncated:
                assert env.value == reference.value
                break
    return held


@pytest.mark.parametrize("keeper", list(KEEPERS))
@pytest.mark.parametrize("seed", range(12))
def test_the_frontier_and_v_n_k_are_the_full_replays_at_every_step(seed: int, keeper: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the capacity warning of the smaller max_nodes
        held = play_against_a_full_replay(seed, KEEPERS[keeper])
    for kept, as_it_was in held:  # nothing the caller held changed afterwards
        assert shown(kept) == as_it_was


def shown(kept: Any) -> list[tuple[int, int]]:
    """The frontier a kept info, frontier or view shows, as (id, multiplicity) pairs."""
    if isinstance(kept, dict) and "frontier" in kept:
        kept = kept["frontier"]
    if isinstance(kept, dict):
        return list(kept.items())
    return [(node, kept.root_slots if node == ROOT else 1) for node in kept.frontier]


@pytest.mark.parametrize("seed", range(4))
def test_a_node_selected_until_it_closes_leaves_the_frontier_once(seed: int) -> None:
    """Under "any" a node stays on the frontier until its last child is revealed: selecting
    the same nodes step after step puts them in the changes of one buffer set's steps more than
    once (the dict a step brings up to date is two steps behind)."""
    rng = random.Random(seed)
    world = make_world(random_records(rng, 300, shape="bushy"), workers=3, frontier="any")
    env = ReplayEnv(world)
    reference = ReplaySession(world, env.settings, strict=False)
    _, info = env.reset()
    reference.reset()
    for _ in range(200):
        assert list(info["frontier"].items()) == the_full_rebuild(reference)
        batch = [node for node, times in info["frontier"].items() for _ in range(times)][:3]
        _, _, terminated, truncated, info = env.step(batch)
        reference.step(batch)
        if terminated or truncated:
            break


@pytest.mark.parametrize("seed", range(6))
def test_shared_observations_keep_each_steps_frontier_too(seed: int) -> None:
    """With share_obs=True one buffer set serves every step: a frontier the caller holds is
    still never changed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        held = play_against_a_full_replay(100 + seed, KEEPERS["every info"], share_obs=True)
    assert all(shown(info) == as_it_was for info, as_it_was in held)


def test_two_frontiers_take_turns_when_the_caller_keeps_nothing() -> None:
    """The usual loop (each info dropped at the next step) reuses two frontier dicts while the
    frontier is long (a short one is written whole): none is copied, each is brought up to date
    with the ids its steps changed."""
    records = [node_record("root", None, 0.0)]
    for chain in range(60):  # a root with 60 chains of 8 nodes: the frontier holds about 60 ids
        records += [node_record(f"c{chain}-{depth}", f"c{chain}-{depth - 1}" if depth else "root", float(depth))
                    for depth in range(8)]
    env = ReplayEnv(make_world(records, workers=4, frontier="leaves"))
    _, info = env.reset()
    dicts: list[int] = []
    for _ in range(80):
        batch = [node for node, times in info["frontier"].items() for _ in range(times)][:4]
        _, _, terminated, truncated, info = env.step(batch)
        if len(info["frontier"]) > 40:
            dicts = dicts or [id(front) for front in env._fronts]
            assert [id(front) for front in env._fronts] == dicts and id(info["frontier"]) in dicts
    assert len(dicts) == 2


def test_the_frontier_is_read_only_and_copies_to_a_plain_dict() -> None:
    env = ReplayEnv(make_world(random_records(random.Random(1), 40, shape="bushy"), workers=3))
    _, info = env.reset()
    _, _, _, _, info = env.step([ROOT, ROOT])
    frontier = info["frontier"]
    for change in (lambda f: f.__setitem__(1, 2), lambda f: f.__delitem__(ROOT), lambda f: f.clear(),
                   lambda f: f.pop(ROOT), lambda f: f.popitem(), lambda f: f.update({5: 1}),
                   lambda f: f.setdefault(9, 1), lambda f: f.__ior__({5: 1})):
        with pytest.raises(TypeError, match="read-only"):
            change(frontier)
    assert isinstance(frontier, dict) and type(frontier.copy()) is dict and frontier.copy() == frontier
    mine = dict(frontier)
    mine[99] = 1  # a plain copy changes freely
    assert 99 not in frontier
    assert copy.deepcopy(frontier) is frontier and copy.copy(frontier) is frontier  # SB3 deep-copies infos
    restored = pickle.loads(pickle.dumps(frontier))
    assert type(restored) is FrontierCounts and list(restored.items()) == list(frontier.items())
