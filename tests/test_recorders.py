"""The coverage recorder (``--policy coverage``): seeded, resumable, and its worlds answer other
policies' requests better than greedy's worlds of the same size (docs/concepts/recorders.md)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from dream_gym import load_world
from dream_gym.datasets.stats import reference_coverage
from dream_gym.policies import make_policy
from dream_gym.policy import RunContext
from dream_gym.replay.settings import ReplaySettings, recorder_or
from tests.online_sim import simulate_run

OTHERS = ("stagnation", "hyperband", "openevolve")  # the requests a greedy world is not grown for


def answered(world, policies=OTHERS) -> float:
    """The mean, over ``policies``, of the share of their requests ``world`` answers (request mode)."""
    settings = ReplaySettings().resolved(world)
    return statistics.mean(reference_coverage(world, settings, p)[0] for p in policies)


def batches(world) -> list[list[str]]:
    """Each round's parents, in slot order."""
    rounds: dict[int, list[str]] = {}
    for record in world.records[1:]:
        rounds.setdefault(record["round"], []).append(record["parent"])
    return [rounds[r] for r in sorted(rounds)]


@pytest.mark.parametrize("frontier", ["any", "leaves"])
def test_the_same_seed_records_the_same_tree_and_another_seed_another(frontier):
    one = simulate_run("coverage", seed=3, attempts=30, frontier=frontier)
    again = simulate_run("coverage", seed=3, attempts=30, frontier=frontier)
    other = simulate_run("coverage", seed=4, attempts=30, frontier=frontier)
    assert batches(one) == batches(again)
    assert one.records == again.records
    assert batches(one) != batches(other)  # the control: the seed does decide


def test_a_round_depends_on_the_seed_and_the_view_only_so_a_resumed_run_records_the_same():
    """grow's resume builds a fresh policy and shows it the tree so far: the batch must be the one
    the uninterrupted run chose there."""
    world = simulate_run("coverage", seed=7, attempts=24, workers=3)
    from dream_gym.online.loop import tree_view

    records = list(world.records)
    for cut in range(1, max(r["round"] for r in records[1:]) + 1):
        prefix = [r for r in records if r["round"] < cut]
        view = tree_view(prefix, world.meta, ReplaySettings(3, 0.5, frontier="any"), rounds=cut - 1)
        fresh = make_policy("coverage")
        fresh.reset(RunContext.from_view(view, seed=7))
        chosen = [prefix[i]["id"] for i in fresh.act(view)]
        recorded = [r["parent"] for r in records if r["round"] == cut]
        assert chosen[: len(recorded)] == recorded, f"round {cut}"


def test_a_seed_changes_the_branch_traits_and_bad_ranges_are_refused():
    policy = make_policy("coverage", deepen="0.1,0.3", depth=(-1, 1))
    policy.reset(RunContext(2, 0.5, 0.003, 0.02, None, "t", "", "maximize", "any", seed=1))
    p, depth = policy.traits(0)
    assert 0.1 <= p <= 0.3 and -1 <= depth <= 1
    assert policy.traits(0) == (p, depth) and policy.traits(1) != (p, depth)
    for bad in ({"deepen": "0.9,0.1"}, {"widen": "0,2"}, {"depth": "x"}, {"favour": -1}):
        with pytest.raises(ValueError):
            make_policy("coverage", **bad)


@pytest.mark.parametrize("frontier", ["any", "leaves"])
def test_coverage_worlds_answer_more_of_other_policies_requests_than_greedy_worlds_of_the_same_size(frontier):
    """A property over seeds: at equal attempts, on every seed, the coverage recorder's world answers
    a larger share of stagnation's, hyperband's and OpenEvolve's requests than greedy's world."""
    for seed in range(6):
        coverage = simulate_run("coverage", seed=seed, attempts=40, frontier=frontier)
        greedy = simulate_run("greedy", seed=seed, attempts=40, frontier=frontier, patience=10**6)
        assert coverage.size == greedy.size == 41  # equal attempts: greedy never stopped early
        assert answered(coverage) > answered(greedy), f"seed {seed}"
        assert answered(greedy, ("greedy",)) >= 0.9  # the control: greedy's own world answers greedy


def test_no_recorder_is_set_so_each_command_keeps_its_own_default():
    """The lead sets DEFAULT_RECORDER once the fidelity experiment decides; until then grow records
    with recommended and the bridges with the system's own selection."""
    from dream_gym.cli import build_parser

    assert recorder_or("native") == "native"
    parser = build_parser("grow")
    assert parser.parse_args(["grow", "--task", "sum-difference", "--out", "x"]).policy == "recommended"
    assert parser.parse_args(["deploy", "--system", "openevolve", "--task", "t", "--budget", "2",
                              "--out", "x"]).policy == "native"


@pytest.mark.slow
def test_grow_records_with_the_coverage_recorder_and_its_world_beats_greedys(tmp_path: Path):
    """Through the real CLI, a built-in task, W = 2 under the "any" rule, two seeds."""
    def grow(policy: str, seed: int, *extra: str) -> Path:
        out = tmp_path / f"{policy}-{seed}"
        subprocess.run([sys.executable, "-m", "dream_gym", "grow", "--task", "sum-difference", "--policy", policy,
                        *extra, "-W", "2", "--frontier", "any", "--rounds", "200", "--max-attempts", "16",
                        "--seed", str(seed), "--out", str(out), "--quiet"], check=True, capture_output=True)
        return out

    for seed in (0, 1):
        coverage = load_world(grow("coverage", seed))
        greedy = load_world(grow("greedy", seed, "--policy-arg", "patience=1000000"))
        assert json.loads((tmp_path / f"coverage-{seed}" / "world.json").read_text())["policy"] == "coverage"
        assert coverage.size == greedy.size == 17
        assert answered(coverage) > answered(greedy), f"seed {seed}"
