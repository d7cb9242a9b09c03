"""Coverage and bias report."""

from __future__ import annotations

from pathlib import Path

import pytest

from dream_gym.datasets.coverage import coverage_report, plot_tree, render_text
from dream_gym.world.tree import build_world
from dream_gym.world.writer import new_meta


def world_of(records, **meta):
    return build_world(new_meta("w", "task", **meta), records)


def tree_world():
    # root -> a(2) -> b(3) -> c(fail) ; root -> d(1.5) -> e(4), d -> f(1)
    recs = [
        {"id": "r", "parent": None, "score": 1.0},
        {"id": "a", "parent": "r", "score": 2.0, "round": 1},
        {"id": "d", "parent": "r", "score": 1.5, "round": 1},
        {"id": "b", "parent": "a", "score": 3.0, "round": 2},
        {"id": "e", "parent": "d", "score": 4.0, "round": 2},
        {"id": "c", "parent": "b", "score": None, "round": 3, "error": "x"},
        {"id": "f", "parent": "d", "score": 1.0, "round": 3},
    ]
    return world_of(recs, workers=2, frontier="any")


def test_counts_depth_branching_and_rounds():
    r = coverage_report(tree_world())
    assert (r.nodes, r.attempts, r.scored, r.failed) == (7, 6, 5, 1)
    assert r.scored_fraction == pytest.approx(5 / 6)
    assert r.max_depth == 3 and r.mean_depth == pytest.approx((1 + 1 + 2 + 2 + 3 + 2) / 6)
    assert r.root_children == 2
    assert r.expanded_non_root == 3 and r.max_children_non_root == 2 and not r.chain_world
    assert r.mean_branching == pytest.approx(4 / 3)
    assert r.leaves == 3 and r.leaf_share == pytest.approx(0.5)
    assert r.best_is_leaf  # e (4.0) has no child
    assert r.baseline == 1.0 and r.best == 4.0 and r.gain == 3.0
    assert r.nodes_beating_baseline == 4
    assert r.rounds == 3 and r.attempts_per_round == {1: 2, 2: 2, 3: 2}
    assert r.attempts_per_round_mean == 2.0 and r.attempts_per_round_max == 2
    assert not any("tiny" in w for w in r.warnings)
    assert any("frontier bias" in w and "50%" in w for w in r.warnings)
    assert any("best node is a leaf" in w for w in r.warnings)
    text = render_text(r)
    for needle in ("nodes            7", "root children 2", "stopped leaves   3", "attempts per round mean 2.00",
                   "a replay cannot answer", "frontier bias"):
        assert needle in text


def test_tiny_improvement_warns_like_the_real_openevolve_case():
    recs = [{"id": "r", "parent": None, "score": 0.8572}]
    recs += [{"id": f"n{i}", "parent": "r", "score": 0.8570 + 0.00001 * i} for i in range(1, 40)]
    recs.append({"id": "best", "parent": "n1", "score": 0.8575})
    r = coverage_report(world_of(recs))
    assert r.gain == pytest.approx(0.0003)
    assert r.relative_gain < 0.001
    assert any("tiny" in w and "0.8572 -> 0.8575" in w for w in r.warnings)
    assert any("evaluator noise" in w for w in r.warnings)
    assert r.rounds is None and any("no rounds" in w for w in r.warnings)


def test_no_improvement_and_root_only_and_chain_world():
    flat = world_of([{"id": "r", "parent": None, "score": 1.0}, {"id": "a", "parent": "r", "score": 0.5}])
    assert any("no recorded attempt beats the baseline" in w for w in coverage_report(flat).warnings)
    alone = world_of([{"id": "r", "parent": None, "score": 1.0}])
    r = coverage_report(alone)
    assert r.attempts == 0 and any("only its root" in w for w in r.warnings)
    chain = world_of([{"id": "r", "parent": None, "score": 1.0}, {"id": "a", "parent": "r", "score": 2.0},
                      {"id": "b", "parent": "a", "score": 3.0}])
    rc = coverage_report(chain)
    assert rc.chain_world and rc.leaves == 1 and rc.best_is_leaf
    # said in words that fit the counts ("1 recorded branches", "more than 0 times", "the 0 leaves")
    assert "branching decisions from the root (1 recorded branch)" in rc.answers
    assert ("anything beyond the record: a branch opened more than 1 time, a child of its one leaf, or a second "
            "attempt where the run made one") in rc.cannot_answer
    assert ("anything beyond the record: any branch of the root, or a second attempt where the run made one"
            in r.cannot_answer)


def test_minimize_world_reports_raw_scores():
    recs = [{"id": "r", "parent": None, "score": 10.0}, {"id": "a", "parent": "r", "score": 7.0}]
    r = coverage_report(world_of(recs, direction="minimize"))
    assert r.baseline == 10.0 and r.best == 7.0 and r.gain == pytest.approx(3.0)


def test_leaves_rule_with_branching_nodes_is_flagged():
    recs = [{"id": "r", "parent": None, "score": 1.0}, {"id": "a", "parent": "r", "score": 2.0},
            {"id": "b", "parent": "a", "score": 3.0}, {"id": "c", "parent": "a", "score": 2.5}]
    r = coverage_report(world_of(recs))
    assert any("unreachable in replay" in w for w in r.warnings)


def test_plot_tree_writes_a_png(tmp_path):
    out = plot_tree(tree_world(), tmp_path / "tree.png")
    data = Path(out).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_report_gives_the_oracle_limit_and_stopping_after_rounds_1_to_3() -> None:
    from worldgen import make_world, random_records

    from dream_gym.replay.oracle import oracle_limit

    world = make_world(random_records(__import__("random").Random(5), 80), workers=3)
    report = coverage_report(world)
    assert report.limit == oracle_limit(world, 3).value and report.limit_exact
    assert report.stop_after == {r: oracle_limit(world, 3, max_rounds=r).value for r in (1, 2, 3)}
    assert list(report.stop_after.values()) == sorted(report.stop_after.values())
    text = render_text(report)
    assert f"oracle limit     V* {report.limit:.4f} at W=3" in text
    assert "stopping after round 1/2/3: " + " / ".join(f"{v:.4f}" for v in report.stop_after.values()) in text
    assert report.as_dict()["stop_after"]["2"] == report.stop_after[2]


def test_a_world_reference_is_taken_as_the_world() -> None:
    # a name was "'str' object has no attribute 'size'"
    from dream_gym.world.registry import resolve_world

    assert coverage_report("cp26-fixed-w4-s0") == coverage_report(resolve_world("cp26-fixed-w4-s0"))
