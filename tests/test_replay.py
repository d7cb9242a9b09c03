"""The reveal rules (docs/concepts/reveal-rules.md) on hand-built worlds: Replay and ReplaySession."""

from __future__ import annotations

import numpy as np
import pytest
from worldgen import make_world, node

from dream_gym.replay.mechanics import IllegalBatchError, Replay, judge_batch
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.view import PrefixView

# Creation order (file order) deliberately interleaves branches:
#   root -> a, b, c ;  a -> a1, a2 ;  a1 -> a11 ;  c -> c1
TREE = [
    node("root", None, 1.0),
    node("a", "root", 2.0),
    node("b", "root", None, error="boom", fail_class="hard"),
    node("a1", "a", 3.0),
    node("c", "root", 1.5),
    node("a2", "a", 2.5),
    node("c1", "c", 0.5),
    node("a11", "a1", 5.0),
]


def tree(workers: int = 2, frontier: str = "leaves"):
    return make_world(TREE, workers=workers, frontier=frontier)


def names(replay: Replay, ids) -> list[str]:
    return [replay.world.ids[replay.world_index(i)] for i in ids]


def illegal(replay_or_session, batch) -> IllegalBatchError:
    target = replay_or_session
    with pytest.raises(IllegalBatchError) as info:
        target.check(batch) if isinstance(target, Replay) else target.step(batch)
    return info.value


# -- reveal order and frontier --------------------------------------------------------------------
def test_initial_state() -> None:
    replay = Replay(tree(), 2)
    assert replay.frontier() == (0,)
    assert replay.root_slots == 2
    assert replay.order == [0] and replay.attempts == 0 and replay.rounds == 0
    assert not replay.exhausted


def test_root_opens_branches_in_creation_order_and_ids_follow_batch_order() -> None:
    replay = Replay(tree(), 2)
    assert replay.apply([0, 0]) == [1, 2]
    assert names(replay, [1, 2]) == ["a", "b"]
    # b has no recorded child: off the frontier; the root has one branch left (c)
    assert replay.root_slots == 1
    assert replay.frontier() == (0, 1)
    # batch order decides observed ids: the root's reveal comes first here
    assert replay.apply([0, 1]) == [3, 4]
    assert names(replay, [3, 4]) == ["c", "a1"]
    assert replay.observed_parent(4) == 1 and replay.observed_parent(3) == 0 and replay.observed_parent(0) == -1
    assert replay.root_slots == 0
    assert replay.frontier() == (3, 4)  # a is no longer a leaf; c and a1 are open leaves
    assert (replay.attempts, replay.rounds) == (4, 2)


def test_non_root_reveals_earliest_unrevealed_child_under_any_rule() -> None:
    replay = Replay(tree(frontier="any"), 2, frontier="any")
    replay.apply([0])  # a
    replay.apply([1])  # a1 (earliest child of a)
    assert replay.frontier() == (0, 1, 2)  # a still has a2 under "any"
    replay.apply([1, 2])  # a2, then a11
    assert names(replay, [3, 4]) == ["a2", "a11"]
    assert replay.frontier() == (0,)  # a exhausted, a1 exhausted, leaves a2/a11 have no child


def test_leaves_rule_refuses_an_inner_node_and_says_why() -> None:
    replay = Replay(tree(), 2)
    replay.apply([0])
    replay.apply([1])
    err = illegal(replay, [1])
    assert err.node == 1 and "id 1" in str(err) and "not a leaf" in str(err) and "'any'" in str(err)


def test_root_multiplicity_capped_by_w_and_by_remaining_branches() -> None:
    replay = Replay(tree(workers=4), 4)
    assert replay.root_slots == 3  # only 3 root children recorded
    err = illegal(replay, [0, 0, 0, 0])
    assert err.node == 0 and "4 times" in str(err) and "3 branch" in str(err)
    replay2 = Replay(tree(), 2)
    assert replay2.root_slots == 2
    assert "exceeds W=2" in str(illegal(replay2, [0, 0, 0]))


ILLEGAL = {
    "unknown-id": ([7], 7, "not an observed node"),
    "negative-id": ([-1], -1, "not an observed node"),
    "no-recorded-child": ([2], 2, "no unrevealed recorded child"),
    "non-root-twice": ([1, 1], 1, "appears twice"),
    "root-too-often": ([0, 0], 0, "may open only 1"),
    "string": (["1"], "1", "not an observed node id"),
    "float": ([1.0], 1.0, "not an observed node id"),
    "none": ([None], None, "not an observed node id"),
    "bool": ([True], True, "bool"),
}


@pytest.mark.parametrize("case", sorted(ILLEGAL))
def test_illegal_batch_names_the_id_and_why(case: str) -> None:
    batch, culprit, reason = ILLEGAL[case]
    replay = Replay(tree(), 2)
    replay.apply([0, 0])  # ids 1 (a, open) and 2 (b, no child); root has 1 slot left
    err = illegal(replay, batch)
    assert err.node == culprit
    assert reason in str(err)
    assert repr(culprit) in str(err) or f"id {culprit}" in str(err)
    # a failed check changes nothing
    assert replay.order == [0, 1, 2] and replay.frontier() == (0, 1)


def test_more_than_w_is_illegal_even_when_each_selection_is_legal() -> None:
    replay = Replay(tree(workers=1), 1)
    err = illegal(replay, [0, 0])
    assert "exceeds W=1" in str(err)


def test_numpy_ints_are_accepted() -> None:
    replay = Replay(tree(), 2)
    assert replay.apply(np.array([0, 0])) == [1, 2]
    assert replay.apply([np.int32(1)]) == [3]


def test_empty_batch_is_not_a_round() -> None:
    replay = Replay(tree(), 2)
    with pytest.raises(IllegalBatchError, match="empty batch"):
        replay.apply([])


def test_replay_argument_checks() -> None:
    with pytest.raises(ValueError):
        Replay(tree(), 0)
    with pytest.raises(ValueError):
        Replay(tree(), 2, frontier="all")


def test_reset_restores_the_start() -> None:
    replay = Replay(tree(), 2)
    replay.apply([0, 0])
    replay.reset()
    assert replay.order == [0] and replay.frontier() == (0,) and replay.root_slots == 2
    assert replay.apply([0, 0]) == [1, 2]


def test_exhausted_after_everything_is_revealed() -> None:
    replay = Replay(tree(frontier="any"), 3, frontier="any")
    while not replay.exhausted:
        slots = [0] * replay.root_slots + [i for i in replay.frontier() if i]
        replay.apply(slots[:3])
    assert sorted(replay.order) == list(range(len(TREE)))
    assert replay.frontier() == ()


# -- the session: flags, strictness, views ----------------------------------------------------------
def test_session_empty_batch_terminates() -> None:
    session = ReplaySession(tree())
    out = session.step([])
    assert out.terminated and not out.truncated and out.new_ids == [] and session.done
    assert session.rounds == 0 and session.attempts == 0
    with pytest.raises(RuntimeError):
        session.step([0])


def test_session_terminates_when_nothing_is_left() -> None:
    session = ReplaySession(tree(), workers=3, frontier="any")
    flags = []
    while not session.done:
        front = session.view()
        batch = ([0] * front.root_slots + [i for i in front.frontier if i])[:3]
        flags.append(session.step(batch).terminated)
    assert flags[-1] and not any(flags[:-1])
    assert session.attempts == len(TREE) - 1


def test_session_max_rounds_truncates() -> None:
    session = ReplaySession(tree(), max_rounds=2)
    assert not session.step([0]).truncated
    out = session.step([1])
    assert out.truncated and not out.terminated and session.done
    with pytest.raises(ValueError):
        ReplaySession(tree(), max_rounds=0)


def test_session_terminated_beats_truncated_on_the_last_round() -> None:
    world = make_world([node("root", None, 0.0), node("a", "root", 1.0)], workers=1)
    out = ReplaySession(world, max_rounds=1).step([0])
    assert out.terminated and not out.truncated


def test_strict_session_raises_and_keeps_state() -> None:
    session = ReplaySession(tree())
    with pytest.raises(IllegalBatchError, match="id 5"):
        session.step([0, 5])
    assert session.attempts == 0 and session.rounds == 0 and not session.done
    assert session.step([0]).new_ids == [1]


def test_non_strict_session_drops_and_reports() -> None:
    session = ReplaySession(tree(), workers=4, strict=False)
    out = session.step([0, 99, 0, "x", 0, 0])
    assert out.new_ids == [1, 2, 3]
    dropped = [sel for sel, _ in out.dropped]
    assert dropped == [99, "x", 0]
    reasons = dict((repr(s), r) for s, r in out.dropped)
    assert "not an observed node" in reasons["99"] and "may open only 3" in reasons["0"]
    assert session.batches == [[0, 0, 0]]
    # an all-illegal batch stops the episode
    out = session.step([2])
    assert out.terminated and out.new_ids == [] and out.dropped and out.dropped[0][0] == 2


def test_session_workers_and_frontier_override_and_validation() -> None:
    world = tree(workers=2, frontier="leaves")
    assert ReplaySession(world).workers == 2
    assert ReplaySession(world, workers=3).workers == 3
    assert ReplaySession(world, frontier="any").replay.frontier_rule == "any"
    with pytest.raises(ValueError):
        ReplaySession(world, workers=0)  # not silently the world's W
    with pytest.raises(ValueError):
        ReplaySession(world, frontier="")
    with pytest.raises(ValueError):
        ReplaySession(world, beta=1.5)


def test_session_views_describe_revealed_nodes() -> None:
    session = ReplaySession(tree(), beta=0.3, max_rounds=9)
    session.step([0, 0])  # a, b
    session.step([1, 0])  # a1, c
    view = session.view()
    by_id = {n.id: n for n in view.nodes}
    assert [n.id for n in view.nodes] == [0, 1, 2, 3, 4]
    assert [(n.parent, n.depth, n.branch) for n in view.nodes] == [
        (None, 0, None),
        (0, 1, 0),
        (0, 1, 1),
        (1, 2, 0),
        (0, 1, 2),
    ]
    assert by_id[3].score == 3.0 and by_id[3].delta_parent == 1.0 and by_id[3].delta_baseline == 2.0
    assert by_id[2].score is None and not by_id[2].valid and by_id[2].delta_parent is None
    assert by_id[2].error == "boom" and by_id[2].fail_class == "hard"
    assert view.frontier == (3, 4) and view.root_slots == 0
    assert (view.rounds, view.attempts, view.workers, view.beta, view.max_rounds) == (2, 4, 2, 0.3, 9)
    assert view.children(0) == (1, 2, 4) and view.children(1) == (3,)
    assert view.leaves() == (2, 3, 4) and view.n_branches == 3
    assert view.best().id == 3 and view.best_score() == 3.0
    assert view.branch_nodes(0) == (by_id[1], by_id[3])
    assert view.legal(3) and not view.legal(1)
    assert len(view) == 5


def test_sessions_are_deterministic() -> None:
    world = tree(workers=3, frontier="any")
    batches = [[0, 0], [1, 0], [3], [1]]
    runs = []
    for _ in range(2):
        session = ReplaySession(world)
        trace = [session.step(b) for b in batches if not session.done]
        runs.append(([(o.new_ids, o.reward, o.terminated) for o in trace], session.view().to_dict()))
    assert runs[0] == runs[1]


def test_views_keep_their_own_prefix_across_node_chunks() -> None:
    """Views share immutable chunks of node views; each still shows exactly its own prefix."""
    records = [node("root", None, 0.0)] + [node(f"n{i}", "root" if i == 1 else f"n{i - 1}", float(i)) for i in range(1, 100)]
    session = ReplaySession(make_world(records, workers=1))
    views = [session.view()]
    while not session.done:
        session.step([views[-1].frontier[-1]])
        views.append(session.view())
    for k, view in enumerate(views):
        assert [n.id for n in view.nodes] == list(range(k + 1)) and len(view) == k + 1
    assert views[40].nodes[:33] == views[-1].nodes[:33]
    assert views[40] == PrefixView.from_dict(views[40].to_dict())
    again = ReplaySession(make_world(records, workers=1))
    assert again.view() == views[0] and again.view().to_dict() == views[0].to_dict()


def test_the_roots_reason_reads_right_when_it_may_open_one_branch_or_none() -> None:
    # it said "is selected 1 times but may open only 0 branch(es)"
    def off(obs_id: int) -> str:
        return "off"

    _, dropped = judge_batch([0, 0], 4, 3, set(), 0, off)
    assert [reason for _, reason in dropped] == ["the root (id 0) may open no branch in this batch"] * 2
    _, dropped = judge_batch([0, 0], 4, 3, set(), 1, off)
    assert dropped == [(0, "the root (id 0) is selected 2 times but may open only 1 branch in this batch")]


def test_a_duration_no_float_holds_is_no_duration_not_the_policys_error():
    """A world that validates may record ``duration_s`` as 10**400 (valid JSON): making the node's
    view raised OverflowError, which eval and replay reported as the policy's error."""
    from dream_gym.policies import make_policy
    from dream_gym.policy import run_episode

    world = make_world([node("root", None, 0.0), {**node("a", "root", 1.0), "duration_s": 10**400}], workers=1)
    result = run_episode(make_policy("greedy"), ReplaySession(world, beta=0.5), seed=0)
    assert result.error is None and result.attempts == 1
