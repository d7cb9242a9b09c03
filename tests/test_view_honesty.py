"""Honest observation (docs/concepts/honesty.md): views hold copies only, and nothing unrevealed leaks into them.

The metamorphic test builds worlds that agree on the revealed part but differ in unrevealed
nodes, and checks that the same batches give identical observations, views and frontiers.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import random
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from worldgen import (
    copied,
    frontier_st,
    make_world,
    node,
    random_batch_sequence,
    random_records,
    workers_st,
    world_records,
    write_folder,
)

from dream_gym.envs.env import ReplayEnv
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.policy import RunContext, run_episode
from dream_gym.replay.mechanics import Replay
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.vector import VectorReplay, WorldPool
from dream_gym.replay.view import NodeView, PrefixView
from dream_gym.rl import EpisodeParams, RoundPlan, batch_features, node_observation, view_features
from dream_gym.rl.option_set import OptionSet, option_features
from dream_gym.world.tree import World, load_world

FORBIDDEN = (World, Replay, ReplaySession, ReplayEnv, np.ndarray, np.generic)
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def reachable(root: Any) -> list[Any]:
    """Everything reachable from ``root`` through attributes, slots, containers and gc referents.

    Classes, modules and functions are not entered (they are code, not data of this view).
    """
    seen: dict[int, Any] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen[id(obj)] = obj
        if isinstance(obj, _OPAQUE):
            continue
        found: list[Any] = []
        if hasattr(obj, "__dict__") and not isinstance(obj, type):
            found.extend(vars(obj).values())
        for klass in type(obj).__mro__:
            for slot in getattr(klass, "__slots__", ()):
                if hasattr(obj, slot):
                    found.append(getattr(obj, slot))
        if isinstance(obj, (types.MappingProxyType, dict)):
            found.extend(obj.keys())
            found.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            found.extend(obj)
        found.extend(gc.get_referents(obj))
        stack.extend(found)
    return list(seen.values())


def _containers_of(owner: Any) -> set[int]:
    """ids of the mutable/collection attributes of an object (and of tuples' members), e.g. the
    World's arrays and cached lists or a Replay's counters: none may be shared with a view."""
    found: set[int] = set()
    for value in vars(owner).values():
        if isinstance(value, (list, dict, tuple, set, np.ndarray)):
            found.add(id(value))
            if isinstance(value, tuple):
                found |= {id(v) for v in value if isinstance(v, (list, dict, tuple, np.ndarray))}
    return found


def _revealed_nodes_only(item: Any) -> bool:
    """A tuple of node views (or of such tuples): what the views of an episode may share with the
    session, which holds views of revealed nodes only (PrefixView's node chunks)."""
    return isinstance(item, tuple) and all(isinstance(x, NodeView) or _revealed_nodes_only(x) for x in item)


def assert_no_world_reachable(obj: Any, world: World, session: ReplaySession | None = None) -> None:
    world_arrays = {id(a) for a in (world.parent, world.score, world.children, world.children_start)}
    world_data = {id(r) for r in world.records} | {id(world.records), id(world.meta), id(world.ids)}
    world_data |= _containers_of(world)
    session_data: set[int] = set()
    if session is not None:
        session_data = _containers_of(session) | _containers_of(session.replay)
    for item in reachable(obj):
        assert not isinstance(item, FORBIDDEN), f"{type(item).__name__} reachable from the view"
        assert id(item) not in world_arrays and id(item) not in world_data, type(item)
        assert id(item) not in session_data or _revealed_nodes_only(item), type(item)


def played_session(world: World, batches=([0, 0], [1, 0], [3])) -> ReplaySession:
    session = ReplaySession(world, workers=2)
    for batch in batches:
        legal = [b for b in batch if b in session.view().frontier]
        if session.done or not legal:
            break
        session.step(legal)
    return session


@pytest.fixture
def disk_world(tmp_path: Path) -> World:
    return load_world(write_folder(tmp_path / "w", random_records(random.Random(2), 30, extras=True), workers=2))


def test_reachability_walk_detects_a_leak(disk_world: World) -> None:
    """The walk itself must be able to fail: a view smuggling the world is caught."""

    @dataclasses.dataclass(frozen=True)
    class Leaky:
        inner: tuple

    leaky = Leaky(inner=({"x": [disk_world.score]},))
    with pytest.raises(AssertionError):
        assert_no_world_reachable(leaky, disk_world)
    with pytest.raises(AssertionError):
        assert_no_world_reachable(types.MappingProxyType({"w": disk_world}), disk_world)


def test_views_reach_no_world_replay_or_session(disk_world: World) -> None:
    session = played_session(disk_world)
    view = session.view()
    assert len(view.nodes) > 3
    assert_no_world_reachable(view, disk_world, session)
    for node_view in view.nodes:
        assert_no_world_reachable(node_view, disk_world, session)
    # the walk sees the session's own containers: a view sharing one would be caught
    with pytest.raises(AssertionError):
        assert_no_world_reachable((session.replay.order,), disk_world, session)
    with pytest.raises(AssertionError):
        assert_no_world_reachable((session.batches,), disk_world, session)  # a list of the session's own
    with pytest.raises(AssertionError):
        assert_no_world_reachable((session._q,), disk_world, session)  # q of every world node


def test_env_info_view_reaches_no_world(disk_world: World) -> None:
    env = ReplayEnv(disk_world, max_nodes=64)
    _, info = env.reset()
    _, _, _, _, info = env.step([0, 0])
    assert_no_world_reachable(info["view"], disk_world, env.session)
    assert_no_world_reachable(info["frontier"], disk_world, env.session)


def test_policy_sees_only_honest_views(disk_world: World) -> None:
    seen: list[PrefixView] = []

    def spy(view: PrefixView, context) -> list[int]:
        seen.append(view)
        assert_no_world_reachable(view, disk_world)
        assert_no_world_reachable(context, disk_world)
        return [0] if view.rounds < 3 and view.root_slots else []

    run_episode(spy, disk_world)
    assert len(seen) >= 2


def test_frozen_metrics_and_views_cannot_be_mutated(disk_world: World) -> None:
    view = played_session(disk_world).view()
    node_view = next(n for n in view.nodes if n.metrics is not None)
    with pytest.raises(TypeError):
        node_view.metrics["runtime"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        node_view.metrics["nested"]["k"] = 5  # type: ignore[index]
    with pytest.raises(AttributeError):
        node_view.metrics["runtime"].append(3)  # a tuple, not a list
    with pytest.raises(TypeError):
        node_view.cost["tokens"] = 0  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        node_view.score = 1e9  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.frontier = (0,)  # type: ignore[misc]
    assert isinstance(view.nodes, tuple) and isinstance(view.frontier, tuple)


def test_views_are_copies_of_records(disk_world: World) -> None:
    session = played_session(disk_world)
    view = session.view()
    target = next(n for n in view.nodes if n.metrics is not None)
    record = disk_world.records[session.replay.world_index(target.id)]
    record["metrics"]["nested"]["k"] = "changed"  # mutate the world's record behind the view
    record["metrics"]["runtime"].append(99)
    assert target.metrics["nested"]["k"] != "changed"
    assert 99 not in target.metrics["runtime"]
    data = view.to_dict()
    data["nodes"][target.id]["metrics"]["nested"]["k"] = "also changed"
    assert target.metrics["nested"]["k"] != "also changed"


def test_to_dict_from_dict_round_trip(disk_world: World) -> None:
    view = played_session(disk_world).view()
    data = view.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain JSON
    again = PrefixView.from_dict(json.loads(view.to_json()))
    assert again == view
    assert again.to_dict() == data
    assert again.children(0) == view.children(0) and again.leaves() == view.leaves()
    assert isinstance(again.nodes[0], NodeView)
    assert "_children" not in data


def test_view_has_no_future_facts() -> None:
    world = make_world(random_records(random.Random(9), 40), workers=2)
    data = ReplaySession(world).view().to_dict()
    text = json.dumps(data)
    assert len(data["nodes"]) == 1
    assert str(world.best_score) not in text or world.best_score == world.baseline_score
    assert not ({"size", "best_score", "world", "n_nodes", "ids"} & set(data))


# -- the metamorphic honesty test -----------------------------------------------------------------
def _revealed(records, batches, workers, frontier) -> set[str]:
    world = make_world(records, workers=workers, frontier=frontier)
    replay = Replay(world, workers, frontier)
    for batch in batches:
        replay.apply(batch)
    return {world.ids[i] for i in replay.order}


def _children(records) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {r["id"]: [] for r in records}
    for r in records[1:]:
        kids[r["parent"]].append(r["id"])
    return kids


def vary_scores(records, revealed, rng: random.Random):
    """(a) Change the scores (and other fields) of unrevealed nodes."""
    out = copied(records)
    for r in out:
        if r["id"] not in revealed:
            r["score"] = rng.choice([None, 1e12, -1e12, rng.uniform(-1e3, 1e3)])
            r["code"] = "changed"
            r["error"] = "a different future"
    return out


def vary_structure(records, revealed, workers: int, rng: random.Random):
    """(b) Remove and add unrevealed nodes, keeping what the frontier may tell.

    For each revealed non-root node: whether it has an unrevealed child. For the root: its
    remaining branch count capped at W (the documented frontier bias).
    """
    kids = _children(records)
    drop: set[str] = set()

    def drop_subtree(rid: str) -> None:
        drop.add(rid)
        for k in kids[rid]:
            drop_subtree(k)

    root = records[0]["id"]
    in_order = [r["id"] for r in records if r["id"] in revealed]  # not set order: reproducible
    for rid in in_order:
        hidden = [k for k in kids[rid] if k not in revealed]
        # the root: fewer than W left is an exact, visible count; W or more shows as W
        keep_at_least = min(workers, len(hidden)) if rid == root else min(1, len(hidden))
        removable = len(hidden) - keep_at_least
        for k in rng.sample(hidden, rng.randint(0, removable)):
            drop_subtree(k)
    for r in records:  # unrevealed nodes may lose any of their children
        if r["id"] not in revealed and r["id"] not in drop:
            for k in kids[r["id"]]:
                if rng.random() < 0.3:
                    drop_subtree(k)
    out = copied([r for r in records if r["id"] not in drop])
    remaining_kids = _children(out)
    parents = [r["id"] for r in out if r["id"] not in revealed]
    parents += [
        rid
        for rid in in_order
        if rid != root and any(k not in revealed for k in remaining_kids[rid])
    ]
    if sum(k not in revealed for k in remaining_kids[root]) >= workers:
        parents.append(root)
    for i in range(rng.randint(0, 8)):
        if not parents:
            break
        new_id = f"new{i}"
        out.append(node(new_id, rng.choice(parents), rng.choice([None, 1e9, -5.0]), code="new"))
        parents.append(new_id)
    return out


def vary_order(records, revealed, rng: random.Random):
    """(c) Move lines of unrevealed nodes, keeping the order of the children of revealed nodes.

    A random topological order: a node is placed after its parent and, when its parent is
    revealed, after its previous sibling.
    """
    kids = _children(records)
    gate: dict[str, list[str]] = {}
    for r in records[1:]:
        needs = [r["parent"]]
        if r["parent"] in revealed:
            siblings = kids[r["parent"]]
            pos = siblings.index(r["id"])
            if pos:
                needs.append(siblings[pos - 1])
        gate[r["id"]] = needs
    by_id = {r["id"]: r for r in records}
    placed = [records[0]["id"]]
    done = {records[0]["id"]}
    waiting = [r["id"] for r in records[1:]]
    while waiting:
        ready = [rid for rid in waiting if all(n in done for n in gate[rid])]
        pick = rng.choice(ready)
        waiting.remove(pick)
        placed.append(pick)
        done.add(pick)
    return copied([by_id[rid] for rid in placed])


def trace(records, batches, workers: int, frontier: str) -> list[Any]:
    world = make_world(records, workers=workers, frontier=frontier)
    env = ReplayEnv(world, max_nodes=64)
    obs, info = env.reset()
    out: list[Any] = [({k: v.tolist() for k, v in obs.items()}, info["view"].to_dict(), info["frontier"])]
    for batch in batches:
        obs, _, term, trunc, info = env.step(batch)
        out.append(
            (
                {k: v.tolist() for k, v in obs.items()},
                info["view"].to_dict(),
                info["frontier"],
                info["new_ids"],
                term,
                trunc,
            )
        )
    return out


def vector_trace(records, batches, workers: int, frontier: str) -> list[Any]:
    """What the vector envs show for the same batches: ReplayVectorEnv's observations and the
    macro features computed on the vector engine (one episode)."""
    world = make_world(records, workers=workers, frontier=frontier)
    env = ReplayVectorEnv(1, world=world, max_nodes=64)
    replay = VectorReplay(WorldPool([world]), 1, workers)
    params = EpisodeParams(np.array([0.5]), 0.003, 0.02, None)

    def seen(obs: dict) -> tuple:
        top = replay.ranked_open(workers)[:, 0]
        return ({k: v.tolist() for k, v in obs.items()}, batch_features(replay, params, top).tolist())

    obs, _ = env.reset()
    out = [seen(obs)]
    for batch in batches:
        row = np.full((1, workers), 64)
        row[0, : len(batch)] = batch
        obs, *_ = env.step(row)
        replay.apply(np.where(row == 64, -1, row))
        out.append(seen(obs))
    return out


def rl_trace(records, batches, workers: int, frontier: str) -> list[Any]:
    """What the RL observations show for the same batches: the macro env's features of each view,
    the options env's (the built-ins' proposals on the real history included), and the node env's
    observation at every sub-step of building each batch (uncapped, and capped at 3 candidate rows
    as in training)."""
    session = ReplaySession(make_world(records, workers=workers, frontier=frontier), workers=workers)
    options = OptionSet()
    options.reset(RunContext.from_view(session.view(), seed=0))
    out: list[Any] = []
    for batch in [*batches, []]:
        view = session.view()
        out.append(view_features(view).tolist())
        out.append(option_features(view, options.propose(view)).tolist())
        for capacity in (None, 3):
            plan = RoundPlan(view, capacity)
            pending: list[int] = []
            for node_id in batch:
                obs, available = node_observation(plan, pending, capacity)
                out.append(({k: v.tolist() for k, v in obs.items()}, [plan.candidates[i] for i in available]))
                if node_id not in plan.candidates:
                    break  # capped out of the rows: the same cut whatever the unrevealed part holds
                index = plan.candidates.index(node_id)
                pending.append(index)
        if not batch or session.done:
            break
        session.step(batch)
    return out


@settings(max_examples=60, deadline=None)
@given(
    base=world_records(min_nodes=2, max_nodes=25),
    workers=workers_st,
    frontier=frontier_st,
    rng=st.randoms(use_true_random=False),
)
@pytest.mark.slow
def test_unrevealed_nodes_never_change_what_is_seen(base, workers, frontier, rng) -> None:
    world = make_world(base, workers=workers, frontier=frontier)
    batches = random_batch_sequence(world, workers, frontier, rng, max_rounds=8)
    revealed = _revealed(base, batches, workers, frontier)
    expected = trace(base, batches, workers, frontier)
    a = vary_scores(base, revealed, rng)
    b = vary_structure(base, revealed, workers, rng)
    c = vary_order(base, revealed, rng)
    abc = vary_order(vary_structure(vary_scores(base, revealed, rng), revealed, workers, rng), revealed, rng)
    expected_vector = vector_trace(base, batches, workers, frontier)
    expected_rl = rl_trace(base, batches, workers, frontier)
    for name, variant in (("scores", a), ("structure", b), ("order", c), ("all", abc)):
        assert trace(variant, batches, workers, frontier) == expected, name
        assert vector_trace(variant, batches, workers, frontier) == expected_vector, name
        assert rl_trace(variant, batches, workers, frontier) == expected_rl, name


def test_metamorphic_variants_really_differ() -> None:
    """The variant builders change the unrevealed part (so the test above is not vacuous)."""
    rng = random.Random(1)
    base = random_records(rng, 30, shape="bushy")
    world = make_world(base, workers=2)
    batches = random_batch_sequence(world, 2, "leaves", rng, max_rounds=3)
    revealed = _revealed(base, batches, 2, "leaves")
    assert len(revealed) < len(base)
    assert vary_scores(base, revealed, random.Random(2)) != base
    assert any(vary_structure(base, revealed, 2, random.Random(s)) != base for s in range(5))
    assert any(
        [r["id"] for r in vary_order(base, revealed, random.Random(s))] != [r["id"] for r in base] for s in range(5)
    )


def test_changing_a_revealed_score_is_seen() -> None:
    """Control: the traces do react to the revealed part."""
    base = [node("root", None, 0.0), node("a", "root", 1.0), node("b", "a", 2.0)]
    changed = copied(base)
    changed[1]["score"] = 1.5
    assert trace(base, [[0]], 1, "leaves") != trace(changed, [[0]], 1, "leaves")
    assert vector_trace(base, [[0]], 1, "leaves") != vector_trace(changed, [[0]], 1, "leaves")
    # both RL observations: the macro features and the node rows (a: 1.0 -> 1.5 changes the scale)
    base.append(node("c", "root", 0.5))
    changed.append(node("c", "root", 0.5))
    assert rl_trace(base, [[0], [0, 1]], 2, "leaves") != rl_trace(changed, [[0], [0, 1]], 2, "leaves")
