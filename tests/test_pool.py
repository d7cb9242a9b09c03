"""Pooled worlds (dream_gym.datasets.pool, ``dream-gym worlds pool``): runs of one task merged where
their nodes are the same program under the same parent chain, in the order of first creation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dream_gym import load_world
from dream_gym.datasets.pool import PoolError, pool_worlds
from dream_gym.policies import make_policy
from dream_gym.policy import run_episode
from dream_gym.replay.score import DEFAULT_BETA_GRID
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.settings import ReplaySettings
from tests.online_sim import simulate_run
from tests.worldgen import make_world, node, write_folder

ROOT = "print(0)\n"


def run_a():
    return make_world([
        node("root", None, 0.0, code=ROOT),
        node("a1", "root", 1.0, code="A1"),
        node("a2", "a1", 2.0, code="A2"),
        node("a3", "root", 0.5, code="X"),
    ], world_id="A", frontier="any")


def run_b(**scores: float | None):
    return make_world([
        node("root", None, scores.get("root", 0.0), code=ROOT),
        node("b1", "root", scores.get("b1", 1.0), code="A1"),  # a1 again
        node("b2", "b1", 1.5, code="B2"),  # a new child of a1
        node("b3", "root", 0.7, code="Y"),  # a new branch
        node("b4", "b2", 2.5, code="A2"),  # a2's code under another parent chain: another node
        node("b5", "b1", 2.0, code="A2"),  # a2 again
        node("b6", "b3", None, code=None, error="no code recorded"),
    ], world_id="B", frontier="any")


def by_id(world) -> dict[str, dict]:
    return {r["id"]: r for r in world.records}


def test_identical_nodes_merge_distinct_ones_stay_and_children_keep_their_first_creation_order(tmp_path):
    result = pool_worlds([run_a(), run_b()], tmp_path / "pool")
    pooled = load_world(tmp_path / "pool")  # validates: ids, parents first, checksum
    assert [r["id"] for r in pooled.records] == ["1/root", "1/a1", "1/a2", "1/a3", "2/b2", "2/b3", "2/b4", "2/b6"]
    nodes = by_id(pooled)
    assert nodes["1/a1"]["pooled_from"] == ["1/a1", "2/b1"] and nodes["1/a2"]["pooled_from"] == ["1/a2", "2/b5"]
    assert nodes["1/root"]["pooled_from"] == ["1/root", "2/root"]
    assert nodes["2/b2"]["parent"] == "1/a1" and nodes["2/b4"]["parent"] == "2/b2"
    assert nodes["2/b6"]["parent"] == "2/b3"
    children = [pooled.ids[c] for c in pooled.children_of(pooled.ids.index("1/a1"))]
    assert children == ["1/a2", "2/b2"]  # run 1's child first, then run 2's
    assert [pooled.ids[c] for c in pooled.children_of(0)] == ["1/a1", "1/a3", "2/b3"]
    assert (result.nodes, result.recorded, result.merged, result.disagreements) == (8, 11, 3, 0)
    assert result.added == [4, 4]
    assert pooled.meta["pool"]["runs"][1]["id"] == "B" and pooled.meta["pool"]["scores"] == "exact"


def test_a_folder_that_holds_something_else_is_refused_and_kept(tmp_path):
    """``worlds pool --out`` says "new or empty"; it wrote its world among the files there."""
    (tmp_path / "pool").mkdir()
    (tmp_path / "pool" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"output folder exists and is not empty \(it holds notes.txt\)"):
        pool_worlds([run_a(), run_b()], tmp_path / "pool")
    assert [p.name for p in (tmp_path / "pool").iterdir()] == ["notes.txt"]


def test_the_order_given_is_the_clock_so_the_other_order_puts_the_other_run_first(tmp_path):
    pool_worlds([run_b(), run_a()], tmp_path / "pool")
    pooled = load_world(tmp_path / "pool")
    assert [r["id"] for r in pooled.records] == ["1/root", "1/b1", "1/b2", "1/b3", "1/b4", "1/b5", "1/b6", "2/a3"]
    assert by_id(pooled)["1/b5"]["pooled_from"] == ["1/b5", "2/a2"]


def test_a_node_without_code_is_never_merged(tmp_path):
    twice = make_world([node("root", None, 0.0, code=ROOT), node("n", "root", 1.0)], world_id="C", frontier="any")
    pool_worlds([twice, twice], tmp_path / "pool")
    assert [r["id"] for r in load_world(tmp_path / "pool").records] == ["1/root", "1/n", "2/n"]


def test_scores_that_disagree_are_refused_kept_first_or_split(tmp_path):
    with pytest.raises(PoolError, match=r"node 'b1' of run 2 .* scored 1\.25 against 1\.0"):
        pool_worlds([run_a(), run_b(b1=1.25)], tmp_path / "exact")
    assert not (tmp_path / "exact").exists()  # nothing written

    first = pool_worlds([run_a(), run_b(b1=1.25)], tmp_path / "first", scores="first")
    kept = by_id(load_world(tmp_path / "first"))["1/a1"]
    assert (kept["score"], kept["pooled_scores"], first.disagreements) == (1.0, [1.25], 1)
    assert by_id(load_world(tmp_path / "first"))["2/b2"]["parent"] == "1/a1"  # its children still merge

    split = pool_worlds([run_a(), run_b(b1=1.25)], tmp_path / "split", scores="split")
    nodes = by_id(load_world(tmp_path / "split"))
    assert nodes["2/b1"]["score"] == 1.25 and nodes["2/b1"]["parent"] == "1/root"  # a sibling of 1/a1
    assert nodes["2/b2"]["parent"] == "2/b1" and nodes["2/b5"]["parent"] == "2/b1"  # its subtree under it
    assert split.disagreements == 1

    with pytest.raises(PoolError, match="node .root. of run 2 .* scored 0.5 against 0.0"):  # the root, "exact"
        pool_worlds([run_a(), run_b(root=0.5)], tmp_path / "root")
    root = by_id(load_world(pool_worlds([run_a(), run_b(root=0.5)], tmp_path / "root-split", scores="split").folder))
    assert root["1/root"]["score"] == 0.0 and root["1/root"]["pooled_scores"] == [0.5]  # one root: the first's


def test_runs_of_another_task_root_or_setting_are_refused(tmp_path):
    other_root = make_world([node("root", None, 0.0, code="print(1)\n")], world_id="R", frontier="any")
    with pytest.raises(PoolError, match="another root program"):
        pool_worlds([run_a(), other_root], tmp_path / "a")
    leaves = make_world([node("root", None, 0.0, code=ROOT)], world_id="L", frontier="leaves")
    with pytest.raises(PoolError, match="frontier rule 'leaves'"):
        pool_worlds([run_a(), leaves], tmp_path / "b")
    wide = make_world([node("root", None, 0.0, code=ROOT)], world_id="W", frontier="any", workers=4)
    with pytest.raises(PoolError, match="has W 4"):
        pool_worlds([run_a(), wide], tmp_path / "c")
    with pytest.raises(ValueError, match="scores must be one of"):
        pool_worlds([run_a()], tmp_path / "d", scores="mean")


def test_under_the_leaves_rule_a_later_child_is_counted_unreachable(tmp_path):
    a = make_world([node("root", None, 0.0, code=ROOT), node("a1", "root", 1.0, code="A1"),
                    node("a2", "a1", 2.0, code="A2")], world_id="A")
    b = make_world([node("root", None, 0.0, code=ROOT), node("b1", "root", 1.0, code="A1"),
                    node("b2", "b1", 3.0, code="B2"), node("b3", "b2", 4.0, code="B3")], world_id="B")
    result = pool_worlds([a, b], tmp_path / "pool")
    assert result.unreachable == 2  # 2/b2 is a1's second child; 2/b3 lies below it
    world = load_world(tmp_path / "pool")
    revealed = run_episode(make_policy("greedy", patience=100), ReplaySession(world, ReplaySettings(), beta=1.0))
    assert revealed.best_score == 2.0  # the leaves rule reveals a1's first child only
    wider = run_episode(make_policy("greedy", patience=100),
                        ReplaySession(world, ReplaySettings(frontier="any"), beta=1.0))
    assert wider.best_score == 4.0  # and --frontier any the rest


def hits(world, policy: str) -> int:
    """Requests of ``policy`` the world answers, in request mode over the beta grid."""
    settings = ReplaySettings().resolved(world)
    return sum(run_episode(make_policy(policy), ReplaySession(world, settings, beta=b, requests=True)).attempts
               for b in DEFAULT_BETA_GRID)


@pytest.mark.parametrize(("frontier", "agent"), [("any", ""), ("any", "another"), ("leaves", "another")])
def test_a_pooled_world_answers_every_policy_what_its_first_run_answers_and_more_overall(tmp_path, frontier, agent):
    """The pool begins with its first run's tree, in its order, so each policy's requests are answered
    at least as on that run alone; the later runs add what policies that go elsewhere ask for. (Not
    as on a later run alone: a policy that opens one branch sees the first run's first branch.)"""
    for seed in range(3):
        coverage = simulate_run("coverage", seed=seed, attempts=30, frontier=frontier)
        greedy = simulate_run("greedy", seed=seed, attempts=30, frontier=frontier, patience=10**6, agent=agent)
        for runs in ([coverage, greedy], [greedy, coverage]):
            pooled = load_world(pool_worlds(runs, tmp_path / f"{frontier}{agent}-{seed}-{runs[0].id}").folder)
            gained = 0
            for policy in ("greedy", "stagnation", "hyperband", "openevolve"):
                first, together = hits(runs[0], policy), hits(pooled, policy)
                assert together >= first, (seed, runs[0].id, policy)
                gained += together - first
            assert gained > 0, (seed, runs[0].id)


def parents_by_round(world) -> list[list[str]]:
    rounds: dict[int, list[str]] = {}
    for record in world.records[1:]:
        rounds.setdefault(record["round"], []).append(record["parent"])
    return [rounds[r] for r in sorted(rounds)]


def replayed_parents(pooled, run_number: int, policy: str, seed: int, rounds: int) -> list[list[str]]:
    """The policy's first ``rounds`` batches on the pooled world in request mode, each selection
    named by its id in run ``run_number`` (None where that run did not record the node)."""
    session = ReplaySession(pooled, ReplaySettings(), beta=0.5, requests=True)
    result = run_episode(make_policy(policy), session, seed=seed)
    prefix = f"{run_number}/"

    def name(obs: int) -> str | None:
        sources = pooled.records[session.replay.order[obs]]["pooled_from"]
        return next((s[len(prefix):] for s in sources if s.startswith(prefix)), None)

    return [[name(obs) for obs in batch] for batch in result.batches[:rounds]]


@pytest.mark.parametrize(("frontier", "policy"), [("any", "coverage"), ("leaves", "coverage"), ("any", "greedy")])
def test_replay_on_a_pool_of_a_policys_own_runs_gives_back_the_run_listed_first(tmp_path, frontier, policy):
    """In request mode, where the record answers, a policy replayed with a run's seed makes that
    run's choices: exactly for the run listed first; the order given decides which run that is."""
    runs = [simulate_run(policy, seed=seed, attempts=24, frontier=frontier) for seed in (0, 1)]
    for first in (0, 1):
        ordered = [runs[first], runs[1 - first]]
        pooled = load_world(pool_worlds(ordered, tmp_path / f"pool-{first}").folder)
        expected = parents_by_round(runs[first])
        got = replayed_parents(pooled, 1, policy, seed=first, rounds=len(expected))
        assert got[:-1] == expected[:-1]
        assert got[-1][: len(expected[-1])] == expected[-1]  # the run's budget may have cut its last round
    # the control: where the other run, listed first, made other programs (another agent), this run's
    # choices are not given back: the pool reveals the other run's nodes first
    other = simulate_run(policy, seed=1, attempts=24, frontier=frontier, agent="another")
    pooled = load_world(pool_worlds([other, runs[0]], tmp_path / "other").folder)
    expected = parents_by_round(runs[0])
    assert replayed_parents(pooled, 2, policy, seed=0, rounds=len(expected)) != expected


def test_worlds_pool_on_the_command_line(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_folder(a, run_a().records, world_id="A", frontier="any")
    write_folder(b, run_b().records, world_id="B", frontier="any")
    done = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "pool", str(a), str(b), "--out",
                           str(tmp_path / "pool"), "--id", "ab"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "pooled 2 runs of toy-task" in done.stdout and "8 nodes (11 recorded, 3 merged)" in done.stdout
    assert json.loads((tmp_path / "pool" / "world.json").read_text())["id"] == "ab"
    kept = {f.name: f.read_bytes() for f in (tmp_path / "pool").iterdir()}
    again = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "pool", str(b), str(a), "--out",
                            str(tmp_path / "pool")], capture_output=True, text=True)
    assert again.returncode == 2
    assert again.stderr.strip().endswith("pool already holds a world; write the new one to another folder")
    assert {f.name: f.read_bytes() for f in (tmp_path / "pool").iterdir()} == kept  # the first pool is intact
    write_folder(tmp_path / "c", run_b(b1=9.0).records, world_id="C", frontier="any")
    refused = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "pool", str(a), str(tmp_path / "c"),
                              "--out", str(tmp_path / "refused")], capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "scored 9.0 against 1.0" in refused.stderr and "--scores" not in refused.stdout
    split = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "pool", str(a), str(tmp_path / "c"),
                            "--out", str(tmp_path / "split"), "--scores", "split"], capture_output=True, text=True)
    assert split.returncode == 0 and "1 copies of a program scored differently (kept as siblings" in split.stdout
    # one run twice (by one spelling, or by two) was pooled, and the pooled world counted two runs
    for twice, message in (([str(a), str(a)], f"{a} is given twice"),
                           ([str(a), str(b), f"{a}/"], f"{a}/ is the run {a} again")):
        done = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "pool", *twice, "--out",
                               str(tmp_path / "twice")], capture_output=True, text=True)
        assert (done.returncode, done.stderr.strip()) == (2, f"dream-gym worlds pool: error: {message}: give each run once")
        assert not (tmp_path / "twice").exists()
