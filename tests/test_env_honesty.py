"""Honest by default: ReplayEnv (and its vector env) with default arguments shows nothing unrevealed.

The metamorphic test builds worlds that agree on every revealed node but differ in what is not
revealed (scores, code, children, line order, and how many nodes there are: from a few to
hundreds more), plays the same batches on each, and checks that the spaces, every observation,
every info key, the rendered text, the flags and the rewards are identical at every step. Rewards
are compared when the variant also keeps the world's best recorded score and its baseline: q is
normalised by the best recorded score, so the reward (the training signal, never part of the
observation or the info) is the one output that may move when an unrevealed node beats every
recorded score. The test checks that it is the only one.

The same holds with an explicit capacity smaller than the worlds: an episode is cut when the next
batch might not fit, decided from the frontier, so worlds of different sizes are cut alike.
"""

from __future__ import annotations

import math
import random
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_view_honesty import _children, _revealed, vary_order, vary_scores, vary_structure
from worldgen import (
    copied,
    frontier_st,
    make_world,
    node,
    random_batch_sequence,
    random_records,
    workers_st,
    world_records,
)

from dream_gym.envs.env import DEFAULT_MAX_NODES, ReplayEnv
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.replay.mechanics import Replay

Record = dict[str, Any]
SMALL_CAPACITY = 8  # smaller than most generated worlds: episodes get cut


def plain(value: Any) -> Any:
    """A comparable copy of an observation or info value (arrays as their bytes, which a policy
    could read too: a -0.0 differs from a 0.0; views as dicts)."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tolist() if value.dtype == object else value.tobytes())
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


def space_key(space: Any) -> Any:
    """A comparable copy of a space: its type and every array it holds as bytes (the bounds in full,
    where repr shortens them), without the seeded sampler and repr's caches."""
    if isinstance(space, gym.spaces.Dict):
        return {name: space_key(sub) for name, sub in space.spaces.items()}
    held = {k: v for k, v in vars(space).items() if k != "_np_random" and not k.endswith("_repr")}
    return type(space).__name__, space.shape, plain(held)


def env_trace(records: list[Record], batches: list[list[int]], workers: int, frontier: str,
              max_nodes: int | None) -> tuple[list[Any], list[float]]:
    """Everything a default ReplayEnv shows for the batches, and its rewards (kept apart)."""
    env = ReplayEnv(make_world(records, workers=workers, frontier=frontier), max_nodes=max_nodes,
                    render_mode="ansi")
    obs, info = env.reset()
    shown: list[Any] = [space_key(env.observation_space), space_key(env.action_space), env.max_nodes,
                        plain(obs), plain(info), env.render(), plain(env.action_masks())]
    rewards: list[float] = []
    for batch in batches:
        obs, reward, terminated, truncated, info = env.step(batch)
        shown.append((plain(obs), plain(info), terminated, truncated, env.render(), plain(env.action_masks())))
        rewards.append(reward)
        if terminated or truncated:
            break
    return shown, rewards


def vector_env_trace(records: list[Record], batches: list[list[int]], workers: int, frontier: str,
                     max_nodes: int | None) -> tuple[list[Any], list[float]]:
    """The same for ReplayVectorEnv (one sub-env, default arguments)."""
    env = ReplayVectorEnv(1, world=make_world(records, workers=workers, frontier=frontier), max_nodes=max_nodes)
    pad = env.max_nodes
    obs, info = env.reset()
    shown: list[Any] = [space_key(env.single_observation_space), space_key(env.single_action_space), plain(obs), plain(info),
                        plain(env.action_masks())]
    rewards: list[float] = []
    for batch in batches:
        row = np.full((1, workers), pad)
        row[0, : min(len(batch), workers)] = batch[:workers]  # a W+1-th selection is dropped by the single env
        obs, reward, terminated, truncated, info = env.step(row)
        shown.append((plain(obs), plain(info), bool(terminated[0]), bool(truncated[0]), plain(env.action_masks())))
        rewards.append(float(reward[0]))
        if terminated[0] or truncated[0]:
            break
    return shown, rewards


def _eligible_parents(records: list[Record], revealed: set[str], workers: int) -> list[str]:
    """Nodes that may get more children without changing anything the frontier tells (the rule
    of vary_structure): unrevealed nodes, revealed non-root nodes that keep an unrevealed child,
    and the root while W or more of its branches stay unrevealed."""
    kids = _children(records)
    root = records[0]["id"]
    parents = [r["id"] for r in records if r["id"] not in revealed]
    parents += [r["id"] for r in records if r["id"] in revealed and r["id"] != root
                and any(k not in revealed for k in kids[r["id"]])]
    if sum(k not in revealed for k in kids[root]) >= workers:
        parents.append(root)
    return parents


def vary_size(records: list[Record], revealed: set[str], workers: int, rng: random.Random) -> list[Record] | None:
    """(d) Hundreds more unrevealed nodes (a long chain under an eligible parent); None when no node
    may get children without changing the frontier."""
    parents = _eligible_parents(records, revealed, workers)
    if not parents:
        return None
    out = copied(records)
    parent = rng.choice(parents)
    for i in range(rng.randint(200, 600)):
        out.append(node(f"grown{i}", parent, rng.choice([None, -3.0, 1e6]), code="a longer future"))
        parent = f"grown{i}"
    return out


def vary_inner_children(records: list[Record], revealed: set[str], rng: random.Random) -> list[Record]:
    """(e) Under "leaves": remove, or add, the unrevealed children of revealed inner nodes. Such a
    node is off the frontier whether it has more recorded children or not, so nothing may tell."""
    kids = _children(records)
    root = records[0]["id"]
    inner = [r["id"] for r in records if r["id"] in revealed and r["id"] != root
             and any(k in revealed for k in kids[r["id"]])]
    drop: set[str] = set()

    def drop_subtree(rid: str) -> None:
        drop.add(rid)
        for k in kids[rid]:
            drop_subtree(k)

    for rid in inner:
        for k in kids[rid]:
            if k not in revealed and rng.random() < 0.7:
                drop_subtree(k)
    out = copied([r for r in records if r["id"] not in drop])
    for i, rid in enumerate(inner):
        if rng.random() < 0.5:
            out.append(node(f"late{i}", rid, 1e9, code="a child the run never showed"))
    return out


def probe(batches: list[list[int]], rng: random.Random) -> list[list[int]]:
    """The batches, some with one more selection that the rules may refuse (an id not revealed yet,
    one off the frontier, a repeat, one past W): the reasons given are part of the info too."""
    probed, observed = [], 1
    for batch in batches:
        extra = [rng.randrange(0, observed + 2)] if rng.random() < 0.6 else []
        probed.append([*batch, *extra])
        observed += len(batch)
    return probed


def revealed_by(records: list[Record], batches: list[list[int]], workers: int, frontier: str,
                max_nodes: int | None) -> set[str]:
    """The recorded ids a default env revealed playing the batches (probes dropped or applied)."""
    world = make_world(records, workers=workers, frontier=frontier)
    env = ReplayEnv(world, max_nodes=max_nodes)
    env.reset()
    for batch in batches:
        *_, terminated, truncated, _ = env.step(batch)
        if terminated or truncated:
            break
    return {world.ids[i] for i in env.session.replay.order}


def _best_recorded(records: list[Record]) -> float:
    scores = [r["score"] for r in records if r["score"] is not None and math.isfinite(r["score"])]
    return max(scores, default=math.nan)


def keep_the_record(records: list[Record], variant: list[Record], revealed: set[str]) -> list[Record] | None:
    """The variant with its unrevealed scores clamped to the base world's best recorded score, and
    one unrevealed node holding that score when no revealed node does (so that q's scale, and with
    it the reward, is the base world's); None when the variant has no unrevealed scored node to
    hold it."""
    best = _best_recorded(records)
    out = copied(variant)
    hidden_scored = [r for r in out if r["id"] not in revealed and r["score"] is not None]
    for r in hidden_scored:
        r["score"] = min(r["score"], best)
    if _best_recorded(out) != best:
        if not hidden_scored:
            return None
        hidden_scored[0]["score"] = best
    return out


def variants(base: list[Record], revealed: set[str], workers: int, frontier: str,
             rng: random.Random) -> dict[str, list[Record]]:
    found = {
        "scores": vary_scores(base, revealed, rng),
        "structure": vary_structure(base, revealed, workers, rng),
        "order": vary_order(base, revealed, rng),
        "all": vary_order(vary_structure(vary_scores(base, revealed, rng), revealed, workers, rng), revealed, rng),
    }
    grown = vary_size(base, revealed, workers, rng)
    if grown is not None:
        found["size"] = grown
    if frontier == "leaves":
        found["inner children"] = vary_inner_children(base, revealed, rng)
    return found


CAPACITY_RULES = ("default", "small", "the base world's size")


def capacity_of(rule: str, base: list[Record], workers: int) -> int | None:
    """An explicit capacity that exactly holds the base world probes the cut hardest: the base is
    never cut, so no variant (most are bigger) may be either."""
    return {"default": None, "small": SMALL_CAPACITY, "the base world's size": max(len(base), workers + 1)}[rule]


def assert_variants_show_the_same(base: list[Record], workers: int, frontier: str, capacity_rule: str,
                                  rng: random.Random) -> None:
    capacity = capacity_of(capacity_rule, base, workers)
    world = make_world(base, workers=workers, frontier=frontier)
    batches = probe(random_batch_sequence(world, workers, frontier, rng, max_rounds=8), rng)
    # The vector env is sent each batch's first W ids (a W+1-th slot does not exist there), so an
    # illegal id among them is dropped without the single env's next id taking its place: the two
    # envs may reveal different nodes, and a variant may change only what neither revealed.
    revealed = revealed_by(base, batches, workers, frontier, capacity)
    revealed |= revealed_by(base, [batch[:workers] for batch in batches], workers, frontier, capacity)
    for trace in (env_trace, vector_env_trace):
        expected, expected_rewards = trace(base, batches, workers, frontier, capacity)
        for name, variant in variants(base, revealed, workers, frontier, rng).items():
            shown, rewards = trace(variant, batches, workers, frontier, capacity)
            assert shown == expected, (trace.__name__, name)
            assert len(rewards) == len(expected_rewards), (trace.__name__, name)
            same_record = keep_the_record(base, variant, revealed)
            if same_record is not None:
                shown, rewards = trace(same_record, batches, workers, frontier, capacity)
                assert shown == expected and rewards == expected_rewards, (trace.__name__, name, "rewards")


@settings(max_examples=40, deadline=None)
@given(
    base=world_records(min_nodes=2, max_nodes=25),
    workers=workers_st,
    frontier=frontier_st,
    capacity_rule=st.sampled_from(CAPACITY_RULES),
    rng=st.randoms(use_true_random=False),
)
@pytest.mark.slow
def test_unrevealed_nodes_never_change_what_a_default_env_shows(base, workers, frontier, capacity_rule, rng) -> None:
    assert_variants_show_the_same(base, workers, frontier, capacity_rule, rng)


@pytest.mark.slow
def test_unrevealed_nodes_never_change_what_is_shown_on_seeded_random_worlds() -> None:
    """The same on 60 seeded worlds of 2-25 nodes (chains and bushy trees, 20 % unscored): hypothesis
    favours tiny worlds, these reach the capacity's edge with unrevealed nodes left."""
    for seed in range(60):
        rng = random.Random(seed)
        base = random_records(rng, rng.randint(2, 25))
        assert_variants_show_the_same(base, rng.randint(1, 4), rng.choice(("leaves", "any")),
                                      CAPACITY_RULES[seed % len(CAPACITY_RULES)], rng)


def test_the_size_variant_really_grows_the_world_and_keeps_the_default_spaces() -> None:
    rng = random.Random(4)
    base = random_records(rng, 30, shape="bushy")
    batches = random_batch_sequence(make_world(base, workers=2), 2, "leaves", rng, max_rounds=3)
    revealed = _revealed(base, batches, 2, "leaves")
    grown = vary_size(base, revealed, 2, random.Random(5))
    assert grown is not None and len(grown) >= len(base) + 200
    small, big = ReplayEnv(make_world(base, workers=2)), ReplayEnv(make_world(grown, workers=2))
    assert small.observation_space == big.observation_space and small.action_space == big.action_space
    assert small.max_nodes == big.max_nodes == DEFAULT_MAX_NODES


def test_changing_a_revealed_score_is_seen() -> None:
    """Control: the traces react to the revealed part, through the observation and the info."""
    base = [node("root", None, 0.0), node("a", "root", 1.0), node("b", "a", 2.0)]
    changed = copied(base)
    changed[1]["score"] = 1.5
    for trace in (env_trace, vector_env_trace):
        assert trace(base, [[0]], 1, "leaves", None)[0] != trace(changed, [[0]], 1, "leaves", None)[0]


def test_a_new_best_recorded_score_moves_only_the_reward() -> None:
    """An unrevealed node beating every recorded score rescales q: the rewards change, and
    nothing else does (the test above would catch anything else)."""
    base = [node("root", None, 0.0), node("a", "root", 1.0), node("b", "a", 2.0), node("c", "b", 3.0)]
    record = [*base, node("d", "c", 100.0)]
    shown_base, rewards_base = env_trace(base, [[0], [1]], 1, "leaves", None)
    shown_record, rewards_record = env_trace(record, [[0], [1]], 1, "leaves", None)
    assert shown_base == shown_record and rewards_base != rewards_record


def test_a_smaller_capacity_cuts_worlds_of_any_size_alike() -> None:
    """With max_nodes=8 and W=2 the cut comes when the batch the frontier allows next might not fit,
    whatever the world's size: an 8-node world and a 408-node one that agree on the revealed part
    are both played on after 7 rows (the root may open one branch: 8 rows suffice), and a 12-node
    and a 412-node world are both cut there (two branches: 9 rows)."""
    fits = [node("root", None, 0.0)] + [node(f"n{i}", "root", float(i)) for i in range(1, 8)]
    wide = fits + [node(f"n{i}", "root", float(i)) for i in range(8, 12)]
    batches = [[0, 0], [0, 0], [0, 0]]  # 7 rows; n7 and later stay unrevealed
    for base, cut in ((fits, False), (wide, True)):
        bigger = base + [node(f"m{i}", "n7" if i == 0 else f"m{i - 1}", float(i)) for i in range(400)]
        shown, _ = env_trace(base, batches, 2, "leaves", SMALL_CAPACITY)
        assert env_trace(bigger, batches, 2, "leaves", SMALL_CAPACITY)[0] == shown
        assert len(shown) == 7 + len(batches) and shown[-1][3] is cut  # the spaces, reset, then each step
        assert shown[-1][1].get("capacity_full", False) is cut


def test_the_reason_a_selection_is_dropped_tells_nothing_unrevealed() -> None:
    """Under "leaves", a revealed inner node is off the frontier whether or not the run went on from
    it again: the reason in info["dropped"] names the revealed fact (not a leaf), never the other."""
    base = [node("root", None, 0.0), node("x", "root", 1.0), node("x1", "x", 2.0), node("y", "root", 0.5)]
    again = [*base, node("x2", "x", 3.0)]  # x has a second, unrevealed child
    shown = [env_trace(records, [[0], [1], [1]], 1, "leaves", None)[0] for records in (base, again)]
    assert shown[0] == shown[1]
    assert "not a leaf" in shown[0][-1][1]["dropped"][0][1]


# -- request mode: what a refusal tells ---------------------------------------------------------
def request_env_trace(records: list[Record], batches: list[list[int]], workers: int, frontier: str
                      ) -> tuple[list[Any], list[float]]:
    """Everything a request-mode ReplayEnv shows for the batches (its refusals and coverage
    included), and its rewards (kept apart)."""
    env = ReplayEnv(make_world(records, workers=workers, frontier=frontier), requests=True, render_mode="ansi")
    obs, info = env.reset()
    shown: list[Any] = [space_key(env.observation_space), space_key(env.action_space), plain(obs), plain(info), env.render()]
    rewards: list[float] = []
    for batch in batches:
        obs, reward, terminated, truncated, info = env.step(batch)
        shown.append((plain(obs), plain(info), terminated, truncated, env.render(), plain(env.action_masks())))
        rewards.append(reward)
        if terminated or truncated:
            break
    return shown, rewards


def request_batch_sequence(world: Any, workers: int, frontier: str, rng: random.Random,
                           max_rounds: int = 12) -> tuple[list[list[int]], set[str]]:
    """Random request-mode batches (from the online frontier, the root up to W times; now and
    then an id off it), played on a request-mode Replay until a batch of refusals ends the
    episode; and the recorded ids they revealed."""
    replay = Replay(world, workers, frontier, requests=True)
    batches: list[list[int]] = []
    for _ in range(max_rounds):
        pool = [0] * workers + replay.open_ids()
        batch = rng.sample(pool, rng.randint(1, min(workers, len(pool))))
        if rng.random() < 0.2:
            batch.append(rng.randrange(len(replay.order) + 2))
        batches.append(batch)
        hits, _, _ = replay.judge(batch)
        if not hits:
            break
        replay.apply(hits)
    return batches, {world.ids[i] for i in replay.order}


def assert_twin_shows_the_same(base: list[Record], twin: list[Record], batches: list[list[int]],
                               revealed: set[str], workers: int, frontier: str) -> None:
    """Request mode shows the same on ``twin`` as on ``base`` (the rewards too when the twin keeps
    the base's best recorded score)."""
    expected, expected_rewards = request_env_trace(base, batches, workers, frontier)
    assert request_env_trace(twin, batches, workers, frontier)[0] == expected
    same_record = keep_the_record(base, twin, revealed)
    if same_record is not None:
        assert request_env_trace(same_record, batches, workers, frontier) == (expected, expected_rewards)


def assert_request_twins_show_the_same(base: list[Record], workers: int, frontier: str, rng: random.Random) -> None:
    batches, revealed = request_batch_sequence(make_world(base, workers=workers, frontier=frontier), workers,
                                               frontier, rng)
    for variant in variants(base, revealed, workers, frontier, rng).values():
        assert_twin_shows_the_same(base, variant, batches, revealed, workers, frontier)


@pytest.mark.slow
def test_request_mode_shows_nothing_a_twin_world_would_not() -> None:
    """Twins that keep what the rule's frontier tells (whether a revealed node has an unrevealed
    recorded child; the root's remaining branches capped at W) show the same in request mode:
    observations, infos (refusals and coverage included), ends and renderings. A refusal tells
    nothing the frontier bias does not already tell."""
    for seed in range(60):
        rng = random.Random(f"requests-{seed}")
        base = random_records(rng, rng.randint(2, 25))
        assert_request_twins_show_the_same(base, rng.randint(1, 4), rng.choice(("leaves", "any")), rng)


@settings(max_examples=30, deadline=None)
@given(base=world_records(min_nodes=2, max_nodes=20), workers=workers_st, frontier=frontier_st,
       rng=st.randoms(use_true_random=False))
def test_request_mode_shows_nothing_a_twin_world_would_not_on_drawn_worlds(base, workers, frontier, rng) -> None:
    assert_request_twins_show_the_same(base, workers, frontier, rng)


def test_a_twin_that_differs_in_what_a_refusal_answers_is_told_apart_as_the_frontier_tells_it() -> None:
    """Control: a twin that continues the run where the base stopped (a recorded child under a
    revealed leaf) answers the request the base refuses, and the test above would catch it. The
    rule's own frontier tells the two apart the same way (the leaf is on it in one, off it in the
    other): the refusal adds nothing to the frontier bias."""
    base = [node("root", None, 0.0), node("a", "root", 1.0), node("b", "root", 2.0)]
    twin = [*base, node("a1", "a", 0.5)]  # the best recorded score stays b's: only the answer differs
    batches = [[0], [1]]  # open branch a, then ask to continue a
    revealed = {"root", "a"}
    with pytest.raises(AssertionError):
        assert_twin_shows_the_same(base, twin, batches, revealed, 1, "leaves")
    (shown_base, _), (shown_twin, _) = (request_env_trace(r, batches, 1, "leaves") for r in (base, twin))
    assert shown_base[:-1] == shown_twin[:-1]  # the same until the request the record answers differently
    assert shown_base[-1][1]["refused"] == [1] and shown_twin[-1][1]["refused"] == []
    frontiers = [env_trace(r, [[0]], 1, "leaves", None)[0][-1][1]["frontier"] for r in (base, twin)]
    assert 1 not in frontiers[0] and 1 in frontiers[1]  # the leaves frontier told it already
    assert_twin_shows_the_same(base, [*base, node("b1", "b", 0.5)], batches, revealed, 1, "leaves")  # b unrevealed


def vary_unasked(records: list[Record], revealed: set[str], asked: set[str], rng: random.Random) -> list[Record]:
    """Continue the run, or not, under revealed non-root nodes no batch selected: drop their
    unrevealed children, or give a childless one a recorded child. The rule's frontier may tell
    (a leaf on or off it); a request-mode episode asked nothing there."""
    kids = _children(records)
    root = records[0]["id"]
    unasked = [r["id"] for r in records if r["id"] in revealed and r["id"] not in asked and r["id"] != root]
    drop: set[str] = set()

    def drop_subtree(rid: str) -> None:
        drop.add(rid)
        for k in kids[rid]:
            drop_subtree(k)

    for rid in unasked:
        for k in kids[rid]:
            if k not in revealed and rng.random() < 0.7:
                drop_subtree(k)
    out = copied([r for r in records if r["id"] not in drop])
    for i, rid in enumerate(unasked):
        if rng.random() < 0.5:
            out.append(node(f"unasked{i}", rid, -7.0, code="where the policy never asked"))
    return out


@pytest.mark.slow
def test_request_mode_tells_nothing_about_nodes_the_policy_did_not_select() -> None:
    """Request mode tells less than the frontier bias: whether the run went on under a revealed
    node shows only when the policy selects it. Twins that differ there alone show the same in
    request mode, while the rule's frontier tells many of them apart."""
    told_by_the_frontier = 0
    for seed in range(60):
        rng = random.Random(f"unasked-{seed}")
        base = random_records(rng, rng.randint(3, 25), shape="bushy")
        workers, frontier = rng.randint(1, 4), rng.choice(("leaves", "any"))
        world = make_world(base, workers=workers, frontier=frontier)
        batches, revealed = request_batch_sequence(world, workers, frontier, rng, max_rounds=4)
        asked, hit_batches = _asked_and_hits(world, batches, workers, frontier)
        twin = vary_unasked(base, revealed, {world.ids[i] for i in asked}, rng)
        assert_twin_shows_the_same(base, twin, batches, revealed, workers, frontier)
        # the rule's own env, played with the hits (a legal batch of the rule each), reveals the
        # same nodes and shows, on its frontier, where the run went on
        told_by_the_frontier += (env_trace(base, hit_batches, workers, frontier, None)[0]
                                 != env_trace(twin, hit_batches, workers, frontier, None)[0])
    assert told_by_the_frontier >= 10, told_by_the_frontier


def _asked_and_hits(world: Any, batches: list[list[int]], workers: int, frontier: str
                    ) -> tuple[set[int], list[list[int]]]:
    """World indices of the revealed nodes the request batches selected (any selection in
    range), and the batches' hits."""
    replay = Replay(world, workers, frontier, requests=True)
    asked: set[int] = set()
    hit_batches = []
    for batch in batches:
        asked |= {replay.world_index(s) for s in batch if type(s) is int and 0 <= s < len(replay.order)}
        hits, _, _ = replay.judge(batch)
        if not hits:
            break
        replay.apply(hits)
        hit_batches.append(hits)
    return asked, hit_batches
