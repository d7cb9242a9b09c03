"""The beta-priced objective (dream_gym.replay.objectives.PricedAttainment) and the node-level policy
(dream_gym.rl.node_features / node_env / node_policy, NodeSB3Policy): rewards sum to the objective,
masks never allow an illegal batch, the scorer is permutation-equivariant and serves any number of
candidates, and a node model runs through run_episode, load_policy and evaluate deterministically."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from worldgen import (
    frontier_st,
    make_world,
    node,
    random_legal_batch,
    random_pool,
    random_records,
    workers_st,
    world_records,
)

from dream_gym.policy import run_episode
from dream_gym.replay.mechanics import Replay
from dream_gym.replay.objectives import Progress, make_objective, replay_value
from dream_gym.replay.session import ReplaySession
from dream_gym.rl import (
    N_GLOBAL_FEATURES,
    N_NODE_FEATURES,
    NODE_FEATURE_NAMES,
    MacroReplayEnv,
    MacroVectorEnv,
    NodeReplayEnv,
    NodeSB3Policy,
    PricedAttainment,
    RoundPlan,
    model_policy,
    node_observation,
)
from dream_gym.world.tree import World


def random_worlds(seed: int, count: int) -> list[World]:
    return random_pool(seed, count, "r")


# -- the objective ----------------------------------------------------------------------------------
def test_priced_attainment_by_hand() -> None:
    objective = PricedAttainment(price_high=5.0, price_low=0.1, lam=0.1)
    assert objective.price(0.0) == pytest.approx(5.0) and objective.price(1.0) == pytest.approx(0.1)
    assert objective.price(0.5) == pytest.approx(np.sqrt(5.0 * 0.1))
    # q 0.8, 10 of 100 recorded attempts in 4 rounds at beta 0: 0.8 - 5 * 0.1 - 0.1 * 0.4
    assert objective(Progress(0.8, 10, 4, 0.0, 0.003, 0.02, 100)) == pytest.approx(0.8 - 0.5 - 0.04)
    # attainment is clipped to [0, 1] (v2's), and no attempt means no penalty
    assert objective(Progress(1.7, 0, 0, 1.0, 0.003, 0.02, 100)) == pytest.approx(1.0)
    assert objective(Progress(-0.5, 0, 0, 1.0, 0.003, 0.02, 100)) == 0.0
    arrays = objective(Progress(np.array([0.8, 1.7]), np.array([10, 0]), np.array([4, 0]), np.array([0.0, 1.0]),
                                0.003, 0.02, np.array([100, 100])))
    np.testing.assert_allclose(arrays, [0.8 - 0.5 - 0.04, 1.0])


def test_price_falls_as_beta_rises_and_bad_prices_are_refused() -> None:
    prices = PricedAttainment().price(np.linspace(0, 1, 11))
    assert np.all(np.diff(prices) < 0)
    with pytest.raises(ValueError, match="price_low <= price_high"):
        PricedAttainment(price_high=0.1, price_low=1.0)
    with pytest.raises(ValueError, match="lam"):
        PricedAttainment(lam=-1)
    with pytest.raises(ValueError, match="recorded"):
        PricedAttainment()(Progress(0.5, 1, 1, 0.5, 0.003, 0.02))
    assert make_objective("v") is replay_value
    with pytest.raises(ValueError, match="unknown objective"):
        make_objective("auc")


def _priced(session: ReplaySession, objective: PricedAttainment) -> float:
    return objective(Progress(session.best_q, session.attempts, session.rounds, session.beta, session.beta1,
                              session.beta2, session.world.size - 1))


def test_macro_envs_rewards_sum_to_the_priced_objective() -> None:
    """The single and the vector macro env, fed the objective (Jumanji-style), return episodes whose
    rewards sum to the objective of the episode's final state."""
    worlds, objective = random_worlds(1, 4), PricedAttainment()
    env = MacroReplayEnv(worlds, workers=3, beta=[0.0, 0.4, 1.0], value_fn=objective)
    rng = np.random.default_rng(0)
    for seed in range(12):
        env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
            total, done = total + reward, terminated or truncated
        assert env.session is not None
        assert total == pytest.approx(_priced(env.session, objective), abs=1e-12)
    vector = MacroVectorEnv(worlds, 6, workers=3, beta=[0.0, 1.0], value_fn=objective)
    vector.reset(seed=0)
    sums, ended = np.zeros(6), 0
    for _ in range(60):
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in vector.action_masks()])
        _, rewards, terminated, truncated, info = vector.step(actions)
        sums += rewards
        for i in np.flatnonzero(terminated | truncated):  # compare with the value the env tracked
            assert sums[i] == pytest.approx(info["replay_score"][i], abs=1e-12)
            sums[i], ended = 0.0, ended + 1
    assert ended > 5


# -- the node env ---------------------------------------------------------------------------------
def test_node_env_passes_the_env_checker() -> None:
    env = NodeReplayEnv(random_worlds(2, 3), workers=3, beta=[0.2, 0.8], value_fn=PricedAttainment(),
                        max_candidates=6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    assert [str(w.message) for w in caught if "render" not in str(w.message)] == []


def test_node_rewards_come_only_at_commits_and_sum_to_the_objective() -> None:
    worlds, objective = random_worlds(3, 5), PricedAttainment(price_high=3.0, price_low=0.3)
    env = NodeReplayEnv(worlds, workers=3, beta=[0.0, 0.5, 1.0], value_fn=objective, max_candidates=5)
    rng = np.random.default_rng(1)
    commits = 0
    for seed in range(15):
        env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
            if not info["batch"] and not (terminated or truncated):
                assert reward == 0.0  # a selection: no reward yet
            commits += bool(info["batch"])
            total, done = total + reward, terminated or truncated
        assert env.session is not None
        assert total == pytest.approx(_priced(env.session, objective), abs=1e-12)
        assert info["value"] == pytest.approx(total, abs=1e-12)
    assert commits > 20
    plain = NodeReplayEnv(worlds, workers=2)  # default value_fn: V, and the session agrees
    plain.reset(seed=0)
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, info = plain.step(0)
        total, done = total + reward, terminated or truncated
    assert total == pytest.approx(info["replay_score"], abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(base=world_records(min_nodes=2, max_nodes=30), workers=workers_st, frontier=frontier_st,
       capacity=st.integers(1, 6), masked=st.booleans(), rng=st.randoms(use_true_random=False))
def test_node_masks_never_allow_an_illegal_batch(base, workers, frontier, capacity, masked, rng) -> None:
    """Masked actions (MaskablePPO) or any action at all (plain PPO) give only legal batches: every
    batch the env applies passes the replay rules' own check on an independent Replay."""
    world = make_world(base, workers=workers, frontier=frontier)
    env = NodeReplayEnv([world], workers=workers, max_candidates=capacity)
    env.reset(seed=0)
    check = Replay(world, workers, frontier)
    done = False
    while not done:
        mask = env.action_masks()
        assert mask[capacity] and mask.shape == (capacity + 1,)
        choices = np.flatnonzero(mask) if masked else np.arange(capacity + 1)
        _, _, terminated, truncated, info = env.step(int(rng.choice(list(choices))))
        if info["batch"]:
            assert len(info["batch"]) <= workers
            check.apply(info["batch"])  # raises IllegalBatchError on an illegal batch
        done = terminated or truncated
    assert check.attempts == env.session.attempts  # type: ignore[union-attr]


def test_node_rows_are_bounded_and_name_every_feature() -> None:
    assert len(NODE_FEATURE_NAMES) == N_NODE_FEATURES
    rng = random.Random(4)
    for world in random_worlds(4, 8):
        session = ReplaySession(world, beta=0.3)
        while not session.done:
            view = session.view()
            plan = RoundPlan(view)
            obs, available = node_observation(plan, [])
            assert obs["globals"].shape == (N_GLOBAL_FEATURES,) and obs["nodes"].shape == (len(available), N_NODE_FEATURES)
            assert np.all(np.abs(obs["nodes"]) <= 1.0) and np.all(np.isfinite(obs["nodes"]))
            assert np.all(np.abs(obs["globals"]) <= 1.0)
            assert [plan.candidates[i] for i in available] == plan.candidates
            assert set(plan.candidates) == set(view.frontier)  # uncapped: every frontier node, the root once
            session.step(random_legal_batch(session.replay, rng, p_stop=0.1))


def test_round_plan_rows_by_hand() -> None:
    """Root first, open nodes best first; the capped plan keeps the best rows."""
    records = [node("root", None, 0.0), node("a", "root", 1.0), node("b", "root", 4.0), node("c", "root", None,
               fail_class="hard"), node("a1", "a", 2.0), node("b1", "b", 3.0), node("c1", "c", 1.0), node("d", "root", 0.5)]
    session = ReplaySession(make_world(records, workers=3))
    session.step([0, 0, 0])  # observed 1, 2, 3 = a, b, c
    plan = RoundPlan(session.view())
    assert plan.candidates == [0, 2, 1, 3]  # root, then b (4.0), a (1.0), c (invalid)
    names = list(NODE_FEATURE_NAMES)
    rows = dict(zip(plan.candidates, plan.rows, strict=True))
    assert rows[0][names.index("is_root")] == 1.0
    assert rows[2][names.index("is_best")] == 1.0 and rows[2][names.index("vs_best")] == 0.0
    assert rows[1][names.index("vs_baseline")] == pytest.approx(0.25)  # (1 - 0) / 4
    assert rows[3][names.index("fail_hard")] == 1.0 and rows[3][names.index("valid")] == 0.0
    assert RoundPlan(session.view(), 2).candidates == [0, 2]
    rows_now, available = plan.features([1])  # b is in the batch already
    assert list(available) == [0, 2, 3]
    assert rows_now[0][names.index("pending_branch")] == 0.0


# -- the scorer -----------------------------------------------------------------------------------
def _scorer():
    import torch

    from dream_gym.rl.node_policy import NodeScorer

    torch.manual_seed(0)
    return NodeScorer(N_NODE_FEATURES, N_GLOBAL_FEATURES, hidden=16)


def test_scorer_is_permutation_equivariant_and_serves_any_size() -> None:
    import torch

    scorer = _scorer()
    for rows in (1, 5, 40):
        nodes = torch.rand(2, rows, N_NODE_FEATURES) * 2 - 1
        glob = torch.rand(2, N_GLOBAL_FEATURES)
        mask = torch.ones(2, rows + 1)
        perm = torch.randperm(rows)
        logits, value = scorer({"nodes": nodes, "globals": glob, "mask": mask})
        logits_p, value_p = scorer({"nodes": nodes[:, perm], "globals": glob, "mask": mask})
        assert logits.shape == (2, rows + 1)
        torch.testing.assert_close(logits_p[:, :rows], logits[:, perm])  # rows move with their nodes
        torch.testing.assert_close(logits_p[:, rows], logits[:, rows])  # commit: invariant
        torch.testing.assert_close(value_p, value)
    # padding rows change nothing and get no probability
    nodes = torch.rand(1, 3, N_NODE_FEATURES)
    glob = torch.rand(1, N_GLOBAL_FEATURES)
    small = scorer({"nodes": nodes, "globals": glob, "mask": torch.ones(1, 4)})[0]
    padded_nodes = torch.cat([nodes, torch.zeros(1, 5, N_NODE_FEATURES)], dim=1)
    padded_mask = torch.tensor([[1, 1, 1, 0, 0, 0, 0, 0, 1]], dtype=torch.float32)
    padded = scorer({"nodes": padded_nodes, "globals": glob, "mask": padded_mask})[0]
    torch.testing.assert_close(padded[:, :3], small[:, :3])
    torch.testing.assert_close(padded[:, -1], small[:, -1])
    assert torch.softmax(padded, -1)[0, 3:8].sum() < 1e-12


# -- trained node models --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def node_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sb3_contrib import MaskablePPO

    from dream_gym.rl.node_policy import MaskableNodePolicy

    env = NodeReplayEnv(random_worlds(5, 4), workers=3, beta=[0.0, 1.0], value_fn=PricedAttainment(),
                        max_candidates=8)
    model = MaskablePPO(MaskableNodePolicy, env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu",
                        policy_kwargs={"hidden": 16})
    model.learn(total_timesteps=512)
    path = tmp_path_factory.mktemp("node") / "tiny-node.zip"
    model.save(path)
    return path


def test_node_policy_builds_the_batches_the_env_would(node_model: Path) -> None:
    """NodeSB3Policy on a view = the model's argmax actions on NodeReplayEnv (when the candidates fit
    the training capacity), and every batch is legal in a strict session."""
    from sb3_contrib import MaskablePPO

    model = MaskablePPO.load(node_model, device="cpu")
    policy = model_policy(model)
    assert isinstance(policy, NodeSB3Policy)
    compared = 0
    for i, world in enumerate(random_worlds(6, 10)):
        env = NodeReplayEnv([world], workers=3, beta=0.6, max_candidates=8)  # the model's capacity
        obs, _ = env.reset(seed=i)
        batches, done, capped = [], False, False
        while not done:
            capped |= len(env.view.frontier) > 8
            action, _ = model.predict(obs, deterministic=True, action_masks=env.action_masks())
            obs, _, terminated, truncated, info = env.step(int(action))
            batches += [info["batch"]] if info["batch"] else []
            done = terminated or truncated
        result = run_episode(policy, world, workers=3, beta=0.6)
        assert result.error is None
        if not capped:  # the policy scores every candidate; the env showed them all too
            assert result.batches == batches
            compared += 1
    assert compared >= 5


@pytest.mark.parametrize("maskable", [True, False], ids=["MaskablePPO", "PPO"])
def test_a_model_of_sb3s_own_multi_input_network_on_node_v0_plays_as_the_env_showed_it(
        tmp_path: Path, maskable: bool) -> None:
    """A user's own SB3 code trains "MultiInputPolicy" on DreamGym/Node-v0; eval loads the zip as
    data and its policy builds the batches the model makes on the env: the same capped, padded
    candidates, the same masks (a MaskablePPO model), a padding row committing (a PPO one)."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    algorithm = MaskablePPO if maskable else PPO
    env = NodeReplayEnv(random_worlds(5, 4), workers=3, beta=[0.0, 1.0], max_candidates=4)
    trained = algorithm("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    trained.learn(64)
    trained.save(tmp_path / "mine.zip")
    model = algorithm.load(tmp_path / "mine.zip", device="cpu")
    policy = model_policy(str(tmp_path / "mine.zip"))  # as data: SB3's own classes are known
    assert isinstance(policy, NodeSB3Policy) and policy.name == "mine"
    for i, world in enumerate(random_worlds(6, 6)):
        env = NodeReplayEnv([world], workers=3, beta=0.6, max_candidates=4)
        obs, _ = env.reset(seed=i)
        batches, done = [], False
        while not done:
            masks = {"action_masks": env.action_masks()} if maskable else {}
            action, _ = model.predict(obs, deterministic=True, **masks)
            obs, _, terminated, truncated, info = env.step(int(action))
            batches += [info["batch"]] if info["batch"] else []
            done = terminated or truncated
        result = run_episode(policy, world, workers=3, beta=0.6)
        assert result.error is None and result.batches == batches, i


@pytest.mark.slow
def test_load_policy_and_evaluate_a_node_model_deterministically(node_model: Path) -> None:
    from dream_gym.evaluation.evaluate import evaluate
    from dream_gym.policy_files import load_policy

    policy = load_policy(str(node_model))
    assert isinstance(policy, NodeSB3Policy) and policy.name == "tiny-node"
    worlds = random_worlds(7, 3)
    first = evaluate([str(node_model)], worlds, "0,0.5,1", jobs=1, progress=False)
    second = evaluate([str(node_model)], worlds, "0,0.5,1", jobs=1, progress=False)
    assert [r.to_dict() for r in first] == [r.to_dict() for r in second]
    assert all(r.error is None for r in first)
    sampled = load_policy(str(node_model), params={"deterministic": False})
    world = worlds[0]
    assert run_episode(sampled, world, seed=3).batches == run_episode(sampled, world, seed=3).batches


def test_shipped_model_names_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node_model: Path) -> None:
    from dream_gym.policies import trained
    from dream_gym.policy_files import PolicyNotFoundError, load_policy
    from dream_gym.rl import EnsemblePolicy

    monkeypatch.setenv("DREAM_GYM_MODELS", str(tmp_path))
    # names of a node model and a node seed ensemble (none ships now: registered for the test)
    monkeypatch.setitem(trained.SHIPPED_MODELS, "ppo-node-v", "ppo-node-v.zip")
    monkeypatch.setitem(trained.SHIPPED_MODELS, "ppo-node", "+".join(f"ppo-node-{i}.zip" for i in range(1, 6)))
    with pytest.raises(PolicyNotFoundError, match="ppo-node-v"):
        load_policy("ppo-node-v")
    (tmp_path / "ppo-node-v.zip").write_bytes(node_model.read_bytes())
    policy = load_policy("ppo-node-v")
    assert isinstance(policy, NodeSB3Policy) and policy.name == "ppo-node-v"
    for i in range(1, 5):  # ppo-node is a seed ensemble of five zips: the missing fifth is named
        (tmp_path / f"ppo-node-{i}.zip").write_bytes(node_model.read_bytes())
    with pytest.raises(PolicyNotFoundError, match="ppo-node-5.zip does not exist"):
        load_policy("ppo-node")
    (tmp_path / "ppo-node-5.zip").write_bytes(node_model.read_bytes())
    ensemble = load_policy("ppo-node")
    assert isinstance(ensemble, EnsemblePolicy) and ensemble.name == "ppo-node" and len(ensemble.members) == 5
    with pytest.raises(ValueError, match="in-process"):
        load_policy("ppo-node", isolate=True)


def test_a_node_model_of_another_observation_is_refused_naming_it(node_model: Path) -> None:
    from gymnasium import spaces
    from sb3_contrib import MaskablePPO

    model = MaskablePPO.load(node_model, device="cpu")
    old = dict(model.observation_space.spaces)
    old["globals"] = spaces.Box(-1.0, 1.0, shape=(old["globals"].shape[0] - 1,), dtype=np.float32)
    model.observation_space = spaces.Dict(old)  # as a model of an earlier feature set has it
    with pytest.raises(ValueError, match="model old-node was trained on another node observation .*retrain"):
        NodeSB3Policy(model, name="old-node")


def test_node_observations_are_invariant_under_positive_affine_score_maps() -> None:
    """Scores mapped by s -> 40 * s - 700 (baseline included): the same node observation at every
    sub-step, as q, V and v2 do not change (both RL observations are affine-invariant)."""
    import copy

    from dream_gym.replay.session import ReplaySession

    rng = random.Random(11)
    records = random_records(rng, 45, root_score=3.0)
    mapped = copy.deepcopy(records)
    for r in mapped:
        if r["score"] is not None:
            r["score"] = 40.0 * r["score"] - 700.0
    a, b = ReplaySession(make_world(records, workers=3)), ReplaySession(make_world(mapped, workers=3))
    compared = 0
    while not a.done and compared < 60:
        plan_a, plan_b = RoundPlan(a.view()), RoundPlan(b.view())
        assert plan_a.candidates == plan_b.candidates
        pending: list[int] = []
        for _ in range(3):
            obs_a, available = node_observation(plan_a, pending)
            obs_b, _ = node_observation(plan_b, pending)
            for key in obs_a:
                np.testing.assert_allclose(obs_a[key], obs_b[key], atol=1e-5)
            compared += 1
            if not len(available):
                break
            pending.append(int(available[rng.randrange(len(available))]))
        batch = [plan_a.candidates[i] for i in pending]
        if not batch:
            break
        a.step(batch)
        b.step(batch)
    assert compared >= 20
