"""Property tests: random trees x random legal (and illegal) batch sequences, against a naive model."""

from __future__ import annotations

import copy
import json
import random
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from worldgen import (
    ReferenceReplay,
    frontier_st,
    jsonl,
    make_world,
    meta_for,
    workers_st,
    world_records,
    write_folder,
)

from dream_gym.replay.mechanics import IllegalBatchError, Replay
from dream_gym.replay.score import replay_score
from dream_gym.replay.session import ReplaySession
from dream_gym.world.tree import WorldFormatError, load_world

SETTINGS = settings(max_examples=80, deadline=None)


def play(records, workers, frontier, rng: random.Random, max_rounds=None):
    """Play random legal batches, checking every step against the reference model."""
    world = make_world(records, workers=workers, frontier=frontier)
    session = ReplaySession(world, max_rounds=max_rounds, beta1=0.01, beta2=0.03)
    ref = ReferenceReplay(records, workers, frontier)
    batches, rewards, views = [], [], [session.view().to_dict()]
    while not session.done:
        view = session.view()
        assert view.frontier == ref.frontier()
        assert view.root_slots == ref.root_slots()
        slots = [0] * view.root_slots + [i for i in view.frontier if i != 0]
        size = rng.randint(0 if rng.random() < 0.1 else 1, min(workers, len(slots))) if slots else 0
        batch = rng.sample(slots, size)
        assert ref.is_legal(batch)
        out = session.step(batch)
        if batch:
            assert out.new_ids == ref.apply(batch)
        else:
            assert out.terminated
        assert [world.ids[i] for i in session.replay.order] == ref.order
        batches.append(batch)
        rewards.append(out.reward)
        views.append(session.view().to_dict())
    return world, session, batches, rewards, views


@SETTINGS
@given(
    records=world_records(),
    workers=workers_st,
    frontier=frontier_st,
    rng=st.randoms(use_true_random=False),
    max_rounds=st.one_of(st.none(), st.integers(1, 6)),
)
def test_random_play_matches_the_rules(records, workers, frontier, rng, max_rounds) -> None:
    world, session, batches, rewards, views = play(records, workers, frontier, rng, max_rounds)
    nonempty = [b for b in batches if b]
    # counters
    assert session.attempts == sum(len(b) for b in batches)
    assert session.rounds == len(nonempty)
    assert session.batches == nonempty
    # flags
    if max_rounds is not None and session.truncated:
        assert session.rounds == max_rounds and not session.terminated
    else:
        assert session.terminated
        assert not batches or not batches[-1] or session.replay.exhausted
    # the rewards sum to V, and V is the formula over the revealed nodes
    qs = [session.normalizer.q(world.score[i]) for i in session.replay.order]
    best_q = max([q for q in qs if q is not None], default=0.0)
    expected_v = replay_score(best_q, session.attempts, session.rounds, 0.01, 0.03)
    assert abs(sum(rewards) - expected_v) < 1e-9
    assert abs(session.value - expected_v) < 1e-12
    # revealed children of each node are a prefix of its recorded children, in creation order
    revealed = set(session.replay.order)
    for index in range(world.size):
        kids = world.children_of(index).tolist()
        shown = [k for k in kids if k in revealed]
        assert shown == kids[: len(shown)]
    # ids are assigned in reveal order: each observed node's parent was observed before it
    for obs_id in range(1, len(session.replay.order)):
        assert 0 <= session.replay.observed_parent(obs_id) < obs_id
    # determinism: the same batches give the same views and rewards
    again = ReplaySession(world, max_rounds=max_rounds, beta1=0.01, beta2=0.03)
    replayed = [again.view().to_dict()]
    replayed_rewards = []
    for batch in batches:
        replayed_rewards.append(again.step(batch).reward)
        replayed.append(again.view().to_dict())
    assert replayed == views and replayed_rewards == rewards


@SETTINGS
@given(
    records=world_records(),
    workers=workers_st,
    frontier=frontier_st,
    rng=st.randoms(use_true_random=False),
)
def test_check_agrees_with_the_reference_on_arbitrary_batches(records, workers, frontier, rng) -> None:
    world = make_world(records, workers=workers, frontier=frontier)
    replay = Replay(world, workers, frontier)
    ref = ReferenceReplay(records, workers, frontier)
    for _ in range(10):
        n_obs = len(replay.order)
        batch = [rng.randint(-1, n_obs + 1) for _ in range(rng.randint(1, workers + 1))]
        try:
            ids = replay.check(batch)
        except IllegalBatchError as err:
            assert not ref.is_legal(batch), batch
            assert err.node is None or err.node in batch
            # strict=False keeps exactly a legal sub-batch, in order
            kept, dropped = replay.legal_part(batch)
            assert ref.is_legal(kept) and len(kept) + len(dropped) == len(batch)
            assert all(reason for _, reason in dropped)
            it = iter(batch)
            assert all(any(k == b for b in it) for k in kept)  # kept is a subsequence
            batch = kept
            if not batch:
                continue
        else:
            assert ref.is_legal(batch) and ids == batch
        assert replay.apply(batch) == ref.apply(batch)
        if replay.exhausted:
            assert ref.frontier() == ()
            break


@SETTINGS
@given(records=world_records(), workers=workers_st, rng=st.randoms(use_true_random=False))
def test_any_frontier_contains_leaves_frontier(records, workers, rng) -> None:
    world = make_world(records, workers=workers)
    leaves = Replay(world, workers, "leaves")
    wide = Replay(world, workers, "any")
    for _ in range(8):
        assert set(leaves.frontier()) <= set(wide.frontier())
        assert leaves.root_slots == wide.root_slots
        slots = [0] * leaves.root_slots + [i for i in leaves.frontier() if i]
        if not slots:
            break
        batch = rng.sample(slots, rng.randint(1, min(workers, len(slots))))
        assert leaves.apply(batch) == wide.apply(batch)  # a batch legal under leaves is legal under any


@settings(max_examples=60, deadline=None)
@given(records=world_records(), workers=workers_st, rng=st.randoms(use_true_random=False))
def test_minimize_is_maximize_of_the_negated_scores(records, workers, rng) -> None:
    negated = copy.deepcopy(records)
    for r in negated:
        if r["score"] is not None:
            r["score"] = -r["score"]
    maxi = ReplaySession(make_world(records, workers=workers))
    mini = ReplaySession(make_world(negated, workers=workers, direction="minimize"))
    while not maxi.done:
        view = maxi.view()
        slots = [0] * view.root_slots + [i for i in view.frontier if i]
        batch = rng.sample(slots, rng.randint(0, min(workers, len(slots)))) if slots else []
        a, b = maxi.step(batch), mini.step(batch)
        assert a.new_ids == b.new_ids and a.reward == b.reward
        da, db = maxi.view().to_dict(), mini.view().to_dict()
        assert da.pop("direction") == "maximize" and db.pop("direction") == "minimize"
        assert da == db


@settings(max_examples=25, deadline=None)
@given(records=world_records(max_nodes=20), workers=workers_st, frontier=frontier_st)
def test_write_then_load_round_trip(records, workers, frontier) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = load_world(write_folder(Path(tmp) / "w", records, workers=workers, frontier=frontier))
    mem = make_world(records, workers=workers, frontier=frontier)
    assert [dict(r) for r in world.records] == records
    assert world.ids == mem.ids and (world.workers, world.frontier_rule) == (workers, frontier)
    np.testing.assert_array_equal(world.parent, mem.parent)
    np.testing.assert_array_equal(world.score, mem.score)
    np.testing.assert_array_equal(world.children, mem.children)
    np.testing.assert_array_equal(world.children_start, mem.children_start)
    assert world.baseline_score == mem.baseline_score and world.best_score == mem.best_score
    for i, r in enumerate(records):
        assert world.ids[i] == r["id"]
        parent = world.parent[i]
        assert (r["parent"] is None) == (parent == -1)
        if parent >= 0:
            assert world.ids[parent] == r["parent"] and parent < i
            assert i in world.children_of(int(parent)).tolist()


def _record_or_none(line: str) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _mutate(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    if not lines:
        return text
    kind = rng.randrange(6)
    if kind == 0 and text:  # cut the file anywhere
        return text[: rng.randrange(len(text))]
    if kind == 1 and len(lines) > 1:  # swap two lines
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 2:  # drop a key from a line
        i = rng.randrange(len(lines))
        record = _record_or_none(lines[i])
        if record:
            record.pop(rng.choice(sorted(record)))
            lines[i] = json.dumps(record) + "\n"
    elif kind == 3:  # replace a value by something odd
        i = rng.randrange(len(lines))
        record = _record_or_none(lines[i]) or {}
        key = rng.choice(["id", "parent", "score"])
        record[key] = rng.choice([None, True, 3, "x", [1], {"a": 1}, 1.5, "root", ""])
        lines[i] = json.dumps(record) + "\n"
    elif kind == 4:  # flip a byte
        data = bytearray(text.encode("utf-8", errors="surrogateescape"))
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        return data.decode("utf-8", errors="surrogateescape")
    else:  # duplicate a line
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return "".join(lines)


@settings(max_examples=80, deadline=None)
@given(records=world_records(max_nodes=12), rng=st.randoms(use_true_random=False), n=st.integers(1, 3))
def test_loader_never_raises_anything_but_world_format_error(records, rng, n) -> None:
    text = jsonl(records)
    for _ in range(n):
        text = _mutate(text, rng)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "w"
        folder.mkdir()
        (folder / "world.json").write_text(json.dumps(meta_for()), encoding="utf-8")
        raw = text.encode("utf-8", errors="surrogateescape")
        (folder / "nodes.jsonl").write_bytes(raw)
        try:
            world = load_world(folder)
        except WorldFormatError as err:
            assert "nodes.jsonl" in str(err)
        else:  # accepted: then nothing was dropped
            assert world.size == raw.count(b"\n") and raw.endswith(b"\n")
