"""The baseline policy library: legality, termination, determinism, beta, and one rule each."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dream_gym.policies import POLICIES, make_policy
from dream_gym.policies.base import NEW_BRANCH, branch_table
from dream_gym.policies.hyperband import HyperbandPolicy, bracket_plan
from dream_gym.policies.openevolve_sampler import OpenEvolvePolicy
from dream_gym.policies.puct import PUCTPolicy
from dream_gym.policies.shinka import ShinkaPolicy
from dream_gym.policies.stagnation import StagnationPolicy
from dream_gym.policies.ucb import UCBPolicy
from dream_gym.policy import RunContext, run_episode
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.view import PrefixView
from dream_gym.world.tree import World, build_world
from dream_gym.world.writer import new_meta

LIBRARY = ("ucb", "puct", "hyperband", "openevolve", "shinka", "stagnation")
BETAS = (0.0, 0.5, 1.0)
RULES = ("leaves", "any")


# -- random worlds ---------------------------------------------------------------------
def _score(rng: np.random.Generator, parent: float | None, p_fail: float) -> dict:
    if rng.random() < p_fail:
        kind = "hard" if rng.random() < 0.4 else "repairable"
        return {"score": None, "error": f"{kind} failure", "fail_class": kind}
    base = 1.0 if parent is None else parent
    return {"score": round(base + float(rng.normal(0.05, 0.2)), 4)}


def chain_world(seed: int, frontier: str = "leaves", branches: int = 6, length: int = 10) -> World:
    """Root + chains (Dream-RSI shape): each non-root node has at most one child."""
    rng = np.random.default_rng(seed)
    records: list[dict] = [{"id": "r", "parent": None, "score": 1.0}]
    for b in range(branches):
        parent, parent_score = "r", 1.0
        for d in range(int(rng.integers(1, length + 1))):
            node = {"id": f"b{b}d{d}", "parent": parent, **_score(rng, parent_score, 0.2)}
            records.append(node)
            parent = node["id"]
            if node["score"] is not None:
                parent_score = node["score"]
    return build_world(new_meta(f"chain-{seed}", "t", frontier=frontier), records)


def bushy_world(seed: int, frontier: str = "leaves", size: int = 50) -> World:
    """Imported-system shape: any node may have many children."""
    rng = np.random.default_rng(seed)
    records: list[dict] = [{"id": "n0", "parent": None, "score": 1.0}]
    scores: list[float | None] = [1.0]
    for i in range(1, size):
        parent = 0 if rng.random() < 0.25 else int(rng.integers(0, i))
        node = {"id": f"n{i}", "parent": f"n{parent}", **_score(rng, scores[parent], 0.15)}
        records.append(node)
        scores.append(node["score"])
    return build_world(new_meta(f"bushy-{seed}", "t", frontier=frontier), records)


def worlds(rule: str) -> list[World]:
    return [chain_world(1, rule), chain_world(2, rule, branches=3, length=25), bushy_world(3, rule), bushy_world(4, rule, 80)]


def episode(name: str, world: World, workers: int, beta: float, seed: int = 0, **params):
    return run_episode(make_policy(name, **params), world, seed=seed, workers=workers, beta=beta, strict=True)


# -- every policy: legal, ends, deterministic ------------------------------------------
def test_registry_names() -> None:
    assert set(LIBRARY) | {"random", "greedy", "fixed"} <= set(POLICIES)
    for name in LIBRARY:
        doc = POLICIES[name].__doc__ or ""
        assert "Args:" in doc and "Source:" in doc and "beta" in doc, name


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("rule", RULES)
def test_batches_legal_and_episodes_end(name: str, rule: str) -> None:
    for world in worlds(rule):
        for workers in (1, 2, 4):
            for beta in BETAS:
                # strict=True: an illegal batch raises IllegalBatchError out of run_episode
                result = episode(name, world, workers, beta, seed=workers)
                assert result.error is None
                assert result.terminated and not result.truncated
                assert all(1 <= len(b) <= workers for b in result.batches)
                assert result.attempts == sum(len(b) for b in result.batches) <= world.size - 1


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_deterministic_for_a_fixed_seed(name: str) -> None:
    for rule in RULES:
        world = bushy_world(7, rule, 60)
        first = episode(name, world, 2, 0.5, seed=11)
        again = episode(name, world, 2, 0.5, seed=11)
        assert first.batches == again.batches


@pytest.mark.parametrize("name", ["openevolve", "shinka", "random"])
def test_randomised_policies_use_the_seed(name: str) -> None:
    world = bushy_world(8, "any", 80)
    runs = {tuple(map(tuple, episode(name, world, 2, 1.0, seed=s).batches)) for s in range(6)}
    assert len(runs) > 1


@pytest.mark.parametrize("name", LIBRARY)
def test_stops_on_its_own_when_progress_never_stalls(name: str) -> None:
    """A huge, always-improving world: only the policy's own beta-scaled budget can stop it."""
    records: list[dict] = [{"id": "r", "parent": None, "score": 0.0}]
    for b in range(40):
        parent = "r"
        for d in range(150):
            records.append({"id": f"{b}.{d}", "parent": parent, "score": float(d + 1) + b / 100})
            parent = f"{b}.{d}"
    world = build_world(new_meta("endless", "t"), records)
    for beta in (0.0, 1.0):
        result = episode(name, world, 4, beta)
        assert result.terminated and result.attempts < world.size - 1
        assert result.batches  # it did something before stopping


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_beta_monotone_on_average(name: str) -> None:
    low, high = [], []
    for seed in range(6):
        for world in (chain_world(100 + seed), bushy_world(200 + seed, "leaves", 60)):
            low.append(episode(name, world, 2, 0.0, seed=seed).attempts)
            high.append(episode(name, world, 2, 1.0, seed=seed).attempts)
    assert np.mean(high) >= np.mean(low), (np.mean(low), np.mean(high))


@pytest.mark.parametrize("name", LIBRARY)
def test_same_decisions_on_a_json_round_tripped_view(name: str) -> None:
    """What an isolated policy receives (view JSON) must drive a policy exactly like the live view."""
    world = bushy_world(9, "any", 60)
    live = make_policy(name)
    shipped = make_policy(name)
    session = ReplaySession(world, workers=3, beta=0.5)
    view = session.view()
    live.reset(RunContext.from_view(view, seed=5))
    shipped.reset(RunContext.from_view(view, seed=5))
    while not session.done:
        batch = list(live.act(view))
        assert list(shipped.act(PrefixView.from_dict(view.to_dict()))) == batch
        session.step(batch)
        view = session.view()


# -- one distinctive rule per policy ---------------------------------------------------
def _view_after(world: World, batches: list[list[int]], workers: int, beta: float = 0.5) -> PrefixView:
    session = ReplaySession(world, workers=workers, beta=beta)
    for batch in batches:
        session.step(batch)
    return session.view()


def _star(heads: list[float | None], length: int = 5, frontier: str = "leaves") -> World:
    """Root (score 0) with one chain per head; chain nodes keep the head's score."""
    records: list[dict] = [{"id": "r", "parent": None, "score": 0.0}]
    for b, head in enumerate(heads):
        parent = "r"
        for d in range(length):
            records.append({"id": f"{b}.{d}", "parent": parent, "score": head})
            parent = f"{b}.{d}"
    return build_world(new_meta("star", "t", frontier=frontier), records)


def test_ucb_index_is_ucb1_over_branches() -> None:
    world = _star([1.0, 0.5, 0.0])
    view = _view_after(world, [[0, 0, 0], [1], [4], [3]], workers=3)  # branch pulls 3, 1, 2
    policy = UCBPolicy(c=1.0)
    policy.reset(RunContext.from_view(view))
    table = branch_table(view)
    assert {b: t.pulls for b, t in table.items()} == {0: 3, 1: 1, 2: 2}
    policy.prepare(view, table)
    t = view.attempts
    expected = {0: 1.0 / 3, 1: 0.5 / 1, 2: 0.0 / 2, NEW_BRANCH: (1.0 + 0.5 + 0.0) / 3}
    pulls = {0: 3, 1: 1, 2: 2, NEW_BRANCH: 3}
    for arm, mean in expected.items():
        bonus = math.sqrt(2 * math.log(t) / pulls[arm])
        assert policy.index(arm, pulls[arm], t) == pytest.approx(mean + bonus)
    # a one-slot batch goes to the arm of highest index: the once-pulled branch 1
    assert policy.act(dataclasses.replace(view, workers=1)) == [table[1].open[0]] == [2]
    greedy = UCBPolicy(c=0.0)  # without exploration: by mean, branch 1 (0.5), 0 (1/3), 2 (0)
    greedy.reset(RunContext.from_view(view))
    assert greedy.act(view) == [2, 5, 6]


def test_puct_prior_is_a_softmax_of_branch_heads() -> None:
    world = _star([2.0, 1.0, None])
    view = _view_after(world, [[0, 0, 0]], workers=3)
    policy = PUCTPolicy(c_puct=1.0, temperature=1.0)
    policy.reset(RunContext.from_view(view))
    prior = policy.priors(view, branch_table(view))
    z = np.array([1.0, 0.5, -1.0, 0.0])  # (head - baseline) / scale, invalid = -1, new arm = 0
    expected = np.exp(z) / np.exp(z).sum()
    assert [prior[a] for a in (0, 1, 2, NEW_BRANCH)] == pytest.approx(list(expected))
    # equal pulls: the branch with the best head (highest Q and prior) is pulled first
    assert policy.act(dataclasses.replace(view, workers=1)) == [1]
    # a flatter prior (higher beta default temperature) gives weak heads more mass
    flat = PUCTPolicy(c_puct=1.0)
    flat.reset(dataclasses.replace(RunContext.from_view(view), beta=1.0))
    sharp = PUCTPolicy(c_puct=1.0)
    sharp.reset(dataclasses.replace(RunContext.from_view(view), beta=0.0))
    table = branch_table(view)
    assert flat.priors(view, table)[2] > sharp.priors(view, table)[2]


def test_hyperband_keeps_the_top_third_each_rung() -> None:
    heads = [0.3, 0.9, 0.1, 0.5, 0.8, 0.2, 0.7, 0.4, 0.6]
    records: list[dict] = [{"id": "r", "parent": None, "score": 0.0}]
    for b, h in enumerate(heads):  # refinements score 2 * head (+ a little per step)
        parent = "r"
        for d in range(20):
            score = h if d == 0 else 2 * h + d / 1000
            records.append({"id": f"{b}.{d}", "parent": parent, "score": score})
            parent = f"{b}.{d}"
    world = build_world(new_meta("hb", "t"), records)
    assert bracket_plan(3, 2, 1) == [(2, 9, 1)]
    result = run_episode(HyperbandPolicy(eta=3, max_bracket=2, brackets=1), world, workers=1, beta=0.5)
    session = ReplaySession(world, workers=1)
    for batch in result.batches:
        session.step(batch)
    nodes = session.nodes
    per_branch = {b: sum(1 for n in nodes if n.branch == b) for b in range(9)}
    # rung 0: 9 heads + 1 refinement each; rung 1: top 3 (heads 0.9, 0.8, 0.7) get 3 more;
    # rung 2: the best of those (branch 1) gets 9 more; then the single bracket is over
    assert per_branch == {0: 2, 1: 2 + 3 + 9, 2: 2, 3: 2, 4: 2 + 3, 5: 2, 6: 2 + 3, 7: 2, 8: 2}
    assert result.attempts == 9 + 9 + 9 + 9


def _grown(world: World, rounds: int, workers: int) -> PrefixView:
    """A view after ``rounds`` rounds that select the first legal ids (root once)."""
    session = ReplaySession(world, workers=workers)
    for _ in range(rounds):
        if session.done:
            break
        session.step(list(session.view().frontier[:workers]))
    return session.view()


def test_openevolve_exploration_and_fitness_weighting() -> None:
    view = _grown(bushy_world(5, "any", 80), 6, workers=4)
    scored = sorted(
        (view.nodes[i] for i in view.frontier if i and view.nodes[i].score is not None),
        key=lambda n: n.score,  # type: ignore[arg-type,return-value]
        reverse=True,
    )
    assert len(scored) >= 4
    elites = OpenEvolvePolicy(elite_ratio=0.25)
    elites.reset(RunContext.from_view(view))
    assert elites.elites(view) == [n.id for n in scored[: math.ceil(0.25 * len(scored))]]
    forever = {"patience": 10**6, "rounds": 10**6}  # act() is called many times on one view
    explore = OpenEvolvePolicy(exploration_ratio=1.0, exploitation_ratio=0.0, **forever)
    explore.reset(RunContext.from_view(view, seed=3))
    wide = {i for _ in range(50) for i in explore.act(view)}
    assert wide == set(view.frontier)  # uniform over every legal slot, root included
    weighted = OpenEvolvePolicy(exploration_ratio=0.0, exploitation_ratio=0.0, **forever)
    weighted.reset(RunContext.from_view(view, seed=3))
    counts: dict[int, int] = {}
    for _ in range(300):
        first = weighted.act(view)[0]
        counts[first] = counts.get(first, 0) + 1
    assert counts.get(scored[0].id, 0) > counts.get(scored[-1].id, 0)
    assert counts.get(scored[0].id, 0) == max(counts.values())


def test_openevolve_exploitation_only_fills_batch_from_elites_alone() -> None:
    world = _star([1.0, 2.0, 3.0, 4.0])
    view = _view_after(world, [[0, 0, 0, 0]], workers=4)
    policy = OpenEvolvePolicy(exploration_ratio=0.0, exploitation_ratio=1.0, elite_ratio=0.5)
    policy.reset(RunContext.from_view(view, seed=0))
    # elites: the two best heads; once they are taken the empty mode falls back to exploration
    batch = policy.act(view)
    assert len(batch) == 4 and set(batch[:2]) == {3, 4}


def test_shinka_discounts_nodes_with_many_children() -> None:
    records: list[dict] = [{"id": "r", "parent": None, "score": 0.0}]
    records += [{"id": "a", "parent": "r", "score": 1.0}, {"id": "b", "parent": "r", "score": 1.0}]
    records += [{"id": f"a{i}", "parent": "a", "score": 0.5} for i in range(5)]
    records += [{"id": "b0", "parent": "b", "score": 0.5}]
    world = build_world(new_meta("sh", "t", frontier="any"), records)
    view = _view_after(world, [[0, 0], [1], [1], [1]], workers=2)  # a (id 1) has 3 children
    assert len(view.children(1)) == 3 and not view.children(2)
    policy = ShinkaPolicy(lam=4.0)
    policy.reset(RunContext.from_view(view))
    weights = dict(policy.weights(view))
    assert weights[1] == pytest.approx(weights[2] / 4)  # 1 / (1 + 3 children)
    population = [0.0, 1.0, 1.0, 0.5, 0.5, 0.5]
    median, scale = float(np.median(population)), float(np.std(population))
    assert weights[2] == pytest.approx(1 / (1 + math.exp(-4.0 * (1.0 - median) / scale)))
    assert set(weights) == {1, 2}  # a's revealed children are leaves without recorded children
    # sampling follows the weights: b (id 2) is drawn far more often than a (id 1) alone
    counts = {1: 0, 2: 0}
    one = dataclasses.replace(view, workers=1)
    for seed in range(400):
        policy.reset(RunContext.from_view(one, seed=seed))
        pick = policy.act(one)[0]
        if pick in counts:
            counts[pick] += 1
    assert counts[2] > 2 * counts[1]


def test_stagnation_closes_hard_and_retries_repairable() -> None:
    records: list[dict] = [{"id": "r", "parent": None, "score": 1.0}]
    for b, kind in enumerate(("hard", "repairable")):
        parent = "r"
        for d in range(6):
            records.append({"id": f"{b}.{d}", "parent": parent, "score": None, "fail_class": kind,
                            "error": kind})
            parent = f"{b}.{d}"
    world = build_world(new_meta("st", "t"), records)
    policy = StagnationPolicy(retries=2, max_branches=2, patience=50)
    result = run_episode(policy, world, workers=2, beta=0.5)
    # round 1 opens both; the hard branch (head id 1) is never continued; the repairable one
    # (head id 2) is retried twice, then closed after its third failure in a row; then stop
    assert result.batches == [[0, 0], [2], [3]]
    assert policy.closed == {0, 1}
    assert result.terminated and result.attempts == 4


def test_stagnation_continues_a_branch_that_repairs_itself() -> None:
    records: list[dict] = [
        {"id": "r", "parent": None, "score": 1.0},
        {"id": "a", "parent": "r", "score": None, "fail_class": "repairable", "error": "SyntaxError"},
        {"id": "a1", "parent": "a", "score": 2.0},
        {"id": "a2", "parent": "a1", "score": 3.0},
        {"id": "a3", "parent": "a2", "score": 3.5},
    ]
    world = build_world(new_meta("st2", "t"), records)
    result = run_episode(StagnationPolicy(retries=1, max_branches=1), world, workers=1, beta=0.5)
    assert result.batches == [[0], [1], [2], [3]]  # the repair (a1) reopened the branch
