"""The Gymnasium adapter: registration, env_checker, spaces, the action convention (every sample is
valid; no legal selection stops), observation layout and copies, capacity, wrappers, render."""

from __future__ import annotations

import pickle
import random
import re
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import FlattenObservation, RecordEpisodeStatistics, TimeLimit
from worldgen import make_world, node, random_records, write_folder

import dream_gym  # noqa: F401  (registers the envs)
from dream_gym.envs.env import DEFAULT_MAX_NODES, GLOBAL_COLUMNS, NODE_COLUMNS, ReplayEnv
from dream_gym.envs.ids import shipped_world_ids
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.replay.mechanics import IllegalBatchError
from dream_gym.replay.session import ReplaySession
from dream_gym.world.registry import resolve_world

EXTERNAL = Path(__file__).resolve().parents[2] / "shared" / "external-runs" / "openevolve"

TREE = [
    node("root", None, 1.0),
    node("a", "root", 2.0),
    node("b", "root", None, error="SyntaxError: nope"),
    node("a1", "a", 3.0),
    node("c", "root", 1.5),
    node("c1", "c", 0.5),
    node("a11", "a1", 5.0),
]
COL = {name: i for i, name in enumerate(NODE_COLUMNS)}
GLOB = {name: i for i, name in enumerate(GLOBAL_COLUMNS)}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_folder(tmp_path / "toy", TREE, workers=2)


def column(obs: dict, name: str) -> list[int]:
    return obs["nodes"][:, COL[name]].tolist()


def glob(obs: dict, name: str) -> float:
    return float(obs["globals"][GLOB[name]])


def checked(env: gym.Env) -> list[str]:
    """check_env's warnings, except the infinite score bounds (raw scores are unbounded by design).

    ResourceWarnings are not check_env's: the collector may finalise another test's pipe at any
    moment, and its warning would land here."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=False)
    return [str(w.message) for w in caught
            if "infinity" not in str(w.message) and not issubclass(w.category, ResourceWarning)]


# -- registration and spaces ---------------------------------------------------------------------
@pytest.mark.slow
def test_make_with_folder_and_with_world(folder: Path) -> None:
    for world in (folder, str(folder), dream_gym.load_world(folder)):
        env = gym.make("DreamGym/Replay-v1", world=world)
        assert isinstance(env.unwrapped, ReplayEnv)
        obs, info = env.reset(seed=3)
        assert column(obs, "revealed") == [1] + [0] * (DEFAULT_MAX_NODES - 1)
        assert env.action_space == gym.spaces.MultiDiscrete([DEFAULT_MAX_NODES + 1] * 2)  # not the world's 7
        env.close()


def test_flags_that_are_not_booleans_and_an_empty_world_are_refused(folder: Path) -> None:
    """bool("false") is True: a text flag turned strict mode on; Path("") is the current folder."""
    for flag in ("strict", "share_obs"):
        with pytest.raises(ValueError, match=f"{flag} must be True or False, got 'false'"):
            ReplayEnv(folder, **{flag: "false"})
    with pytest.raises(ValueError, match="strict must be True or False"):
        ReplayVectorEnv(1, world=folder, strict="no")
    with pytest.raises(LookupError, match="the world reference is empty"):
        gym.make("DreamGym/Replay-v1", world="")
    assert ReplayEnv(folder, strict=np.bool_(True)).strict is True


def test_unknown_world_reference_is_a_lookup_error(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="unknown world"):
        gym.make("DreamGym/Replay-v1", world="no-such-world-anywhere")


def test_a_shipped_worlds_id_replays_that_world_only(folder: Path) -> None:
    """``gym.make("DreamGym/<world>-v1", world=other)`` replayed the other world under the first
    one's id, which its spec, the training logs and every monitor then named."""
    env_id, reference = sorted(shipped_world_ids().items())[0]
    name = reference.rsplit("/", 1)[-1]
    said = f"{env_id} replays the world {name} ({reference}), not w: make DreamGym/Replay-v1 with world=..."
    with pytest.raises(ValueError, match=re.escape(said)):
        gym.make(env_id, world=folder)
    with pytest.raises(ValueError, match=re.escape(said)):
        gym.make_vec(env_id, num_envs=2, world=folder, vectorization_mode="vector_entry_point")
    # its own world, however it is named, and any world under DreamGym/Replay-v1
    assert gym.make(env_id, world=name).unwrapped.world.id == name
    assert gym.make(env_id, world=resolve_world(reference)).spec.id == env_id
    assert gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point").spec.id == env_id
    assert gym.make("DreamGym/Replay-v1", world=folder).unwrapped.world.id == "w"
    # an id of the user's own keeps Gymnasium's rule: kwargs given to make override its defaults
    gym.register("Users/BoundWorld-v0", entry_point="dream_gym.envs.env:ReplayEnv", kwargs={"world": reference})
    try:
        assert gym.make("Users/BoundWorld-v0", world=folder).unwrapped.world.id == "w"
    finally:
        del gym.registry["Users/BoundWorld-v0"]


@pytest.mark.parametrize("env_id", sorted(shipped_world_ids()))
def test_check_env_passes_on_every_shipped_world_with_default_arguments(env_id: str) -> None:
    env = gym.make(env_id, render_mode="ansi")  # DreamGym/<name>-v1 for the worlds of every shipped dataset
    assert checked(env.unwrapped) == []


def test_check_env_passes_on_a_600_node_bushy_world(tmp_path: Path) -> None:
    records = random_records(random.Random(600), 600, shape="bushy", extras=True)
    folder = write_folder(tmp_path / "big", records, workers=4, frontier="any")
    env = gym.make("DreamGym/Replay-v1", world=folder)
    assert env.unwrapped.max_nodes == DEFAULT_MAX_NODES
    assert checked(env.unwrapped) == []


@pytest.mark.usefixtures("external_runs")
def test_check_env_passes_on_an_imported_openevolve_run(tmp_path: Path) -> None:
    from dream_gym.datasets.importers.openevolve import import_openevolve

    import_openevolve(EXTERNAL / "binpack-null-islands-s42", tmp_path / "binpack")
    env = gym.make("DreamGym/Replay-v1", world=tmp_path / "binpack")
    assert env.unwrapped.max_nodes == DEFAULT_MAX_NODES and env.unwrapped.world.size > 150
    assert checked(env.unwrapped) == []


def test_observation_space_layout(folder: Path) -> None:
    space = ReplayEnv(folder, max_nodes=10).observation_space
    assert set(space.spaces) == {"nodes", "score", "globals"}
    assert space["nodes"].shape == (10, len(NODE_COLUMNS)) and space["nodes"].dtype == np.int32
    assert space["score"].shape == (10,) and space["score"].dtype == np.float64
    assert space["globals"].shape == (len(GLOBAL_COLUMNS),)


# -- what a step shows -----------------------------------------------------------------------------
def test_info_keys_and_frontier_multiplicity(folder: Path) -> None:
    env = gym.make("DreamGym/Replay-v1", world=folder, beta1=0.01, beta2=0.1)
    _, info = env.reset()
    assert set(info) == {"view", "frontier", "action_mask", "attempts", "rounds", "new_ids", "dropped", "refused",
                         "coverage"}
    assert info["frontier"] == {0: 2} and info["attempts"] == 0 and info["rounds"] == 0
    obs, reward, term, trunc, info = env.step([0, 0])
    assert info["new_ids"] == [1, 2] and info["dropped"] == []
    assert info["frontier"] == {0: 1, 1: 1}  # the root may open one more branch
    assert (info["attempts"], info["rounds"]) == (2, 1)
    assert env.unwrapped.session.value == pytest.approx(reward)  # V so far: replay-side, not in info
    assert info["view"].frontier == (0, 1)
    assert glob(obs, "root_slots") == 1 and column(obs, "frontier")[:3] == [1, 1, 0]
    _, _, _, _, info = env.step([0, 1])
    assert 0 not in info["frontier"] and info["frontier"] == {3: 1, 4: 1}


def test_observation_contents_are_raw(folder: Path) -> None:
    env = ReplayEnv(folder, max_nodes=10)
    env.reset()
    env.step([0, 0])
    obs, *_ = env.step([1, 0])
    assert column(obs, "revealed") == [1] * 5 + [0] * 5
    assert column(obs, "parent")[:6] == [-1, 0, 0, 1, 0, -1]
    assert column(obs, "depth")[:5] == [0, 1, 1, 2, 1]
    assert obs["score"].tolist()[:5] == [1.0, 2.0, 0.0, 3.0, 1.5]
    assert column(obs, "scored")[:5] == [1, 1, 0, 1, 1]
    assert column(obs, "frontier")[:5] == [0, 0, 0, 1, 1]
    assert (glob(obs, "baseline"), glob(obs, "rounds"), glob(obs, "attempts"), glob(obs, "root_slots")) == (
        1.0, 2, 4, 0)
    assert env.observation_space.contains(obs)


def test_frontier_flags_follow_the_rule_any(tmp_path: Path) -> None:
    recs = [node("root", None, 0.0), node("a", "root", 1.0), node("a1", "a", 2.0), node("a2", "a", 3.0)]
    env = ReplayEnv(make_world(recs, workers=1, frontier="any"))
    env.reset()
    obs, *_ = env.step([0])
    assert column(obs, "frontier")[:4] == [0, 1, 0, 0]  # the root has no branch left; a has children
    obs, *_ = env.step([1])
    assert column(obs, "frontier")[:4] == [0, 1, 0, 0]  # under "any", a stays selectable (a2 left)
    obs, _, term, *_ = env.step([1])
    assert not any(column(obs, "frontier")) and term


def test_minimize_world_observations_are_oriented(tmp_path: Path) -> None:
    recs = [node("root", None, 10.0), node("a", "root", 7.0)]
    env = ReplayEnv(write_folder(tmp_path / "m", recs, workers=1, direction="minimize"))
    obs, _ = env.reset()
    assert glob(obs, "baseline") == -10.0
    obs, *_ = env.step([0])
    assert obs["score"].tolist()[:3] == [-10.0, -7.0, 0.0]


def test_observations_never_carry_q(tmp_path: Path) -> None:
    """Raising the best recorded score (an unrevealed node) changes rewards, not what is seen."""
    rng = random.Random(5)
    base = random_records(rng, 30, extras=True)
    leaf_parent = base[-1]["id"]
    huge = [*base, node("future", leaf_parent, 1e9)]
    runs = []
    for i, recs in enumerate((base, huge)):
        env = gym.make("DreamGym/Replay-v1", world=write_folder(tmp_path / f"w{i}", recs, workers=2), max_nodes=64)
        obs, info = env.reset()
        trace = [(obs, info["view"].to_dict(), info["frontier"])]
        rewards = []
        for batch in ([0, 0], [0, 1], [2], [0]):
            obs, reward, term, trunc, info = env.step(batch)
            trace.append((obs, info["view"].to_dict(), info["frontier"]))
            rewards.append(reward)
            if term or trunc:
                break
        runs.append((trace, rewards))
        env.close()
    (trace_a, rewards_a), (trace_b, rewards_b) = runs
    assert len(trace_a) == len(trace_b)
    revealed = trace_a[-1][1]["nodes"]
    assert all(n["score"] != 1e9 for n in revealed)  # the future node stayed hidden
    for (obs_a, view_a, front_a), (obs_b, view_b, front_b) in zip(trace_a, trace_b, strict=True):
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key], err_msg=key)
        assert view_a == view_b and front_a == front_b
    assert rewards_a != rewards_b  # q moved: only the reward may show it


# -- the action convention -------------------------------------------------------------------------
def test_padding_means_no_selection(folder: Path) -> None:
    env = ReplayEnv(folder, max_nodes=8)
    env.reset()
    pad = env.max_nodes
    obs, _, term, _, info = env.step(np.array([0, pad]))
    assert info["new_ids"] == [1] and not term and info["dropped"] == []
    obs, _, term, trunc, info = env.step(np.array([pad, pad]))
    assert term and not trunc and info["new_ids"] == [] and glob(obs, "attempts") == 1
    assert "illegal_stop" not in info  # all padding is the plain stop


def test_programmatic_actions(folder: Path) -> None:
    env = ReplayEnv(folder)
    env.reset()
    assert env.step([0, 0])[4]["new_ids"] == [1, 2]
    assert env.step((1,))[4]["new_ids"] == [3]
    with pytest.raises(TypeError):
        env.step(5)
    with pytest.raises(TypeError):
        env.step("01")


def test_illegal_selections_are_dropped_and_the_legal_rest_applied(folder: Path) -> None:
    env = ReplayEnv(folder)
    env.reset()
    _, _, term, _, info = env.step([0, 6])  # id 6 is not revealed yet
    assert info["new_ids"] == [1] and not term
    assert [s for s, _ in info["dropped"]] == [6] and "not an observed node" in info["dropped"][0][1]


def test_integers_past_int64_in_a_list_are_dropped_as_ids_never_observed(folder: Path) -> None:
    """The list fast path writes ids straight into the engine's int64 batch: a value it cannot
    hold is judged like any other id (dropped, or IllegalBatchError when strict), not a crash."""
    for huge in (2**70, 2**63, -(2**63) - 1):
        env = ReplayEnv(folder)
        env.reset()
        _, _, term, _, info = env.step([0, huge])
        assert info["new_ids"] == [1] and not term
        assert [s for s, _ in info["dropped"]] == [huge] and "not an observed node" in info["dropped"][0][1]
        strict = ReplayEnv(folder, strict=True)
        strict.reset()
        with pytest.raises(IllegalBatchError):
            strict.step([0, huge])


def test_an_action_with_no_legal_selection_stops_with_reward_zero(folder: Path) -> None:
    env = ReplayEnv(folder)
    env.reset()
    env.step([0, 0])
    value = env.session.value
    _, reward, term, trunc, info = env.step([2, 2])  # b has no recorded child, and appears twice
    assert term and not trunc and reward == 0.0 and info["illegal_stop"] is True
    assert [s for s, _ in info["dropped"]] == [2, 2] and env.session.value == value
    with pytest.raises(RuntimeError, match="reset"):
        env.step([0])


def test_every_sample_of_the_action_space_is_valid_and_rewards_sum_to_v(tmp_path: Path) -> None:
    rng = random.Random(1)
    for i in range(8):
        world = make_world(random_records(rng, rng.randint(2, 40)), workers=rng.randint(1, 4),
                           frontier=rng.choice(("leaves", "any")))
        env = gym.make("DreamGym/Replay-v1", world=world, max_nodes=rng.choice([None, 45]))
        env.action_space.seed(i)
        for _ in range(20):
            env.reset()
            total, done = 0.0, False
            while not done:
                action = env.action_space.sample()
                if rng.random() < 0.7:  # mostly legal picks, so that episodes get long
                    legal = [k for k in env.unwrapped.session.view().frontier]
                    action[: len(legal)] = rng.sample(legal, len(legal))[: len(action)]
                _, reward, term, trunc, _ = env.step(action)
                total += reward
                done = term or trunc
            assert total == pytest.approx(env.unwrapped.session.value, abs=1e-12)


def test_strict_env_raises(folder: Path) -> None:
    env = ReplayEnv(folder, strict=True)
    env.reset()
    with pytest.raises(IllegalBatchError, match="id 1"):
        env.step([1])
    assert env.session.attempts == 0 and not env.session.done


def test_action_masks_shape_and_semantics(folder: Path) -> None:
    env = ReplayEnv(folder, workers=3, max_nodes=12)
    env.reset()
    width = env.max_nodes + 1
    masks = env.action_masks()
    assert masks.shape == (3 * width,) and masks.dtype == bool
    grid = masks.reshape(3, width)
    assert grid[:, env.max_nodes].all()  # padding always allowed
    assert grid[:, 0].tolist() == [True, True, True]  # 3 root children, W=3
    assert grid[:, 1 : env.max_nodes].sum() == 0
    env.step([0, 0])  # root has 1 branch left; a (1) is open, b (2) has no child
    grid = env.action_masks().reshape(3, width)
    assert grid[:, 0].tolist() == [True, False, False]
    assert grid[:, 1].all() and not grid[:, 2].any() and not grid[:, 3 : env.max_nodes].any()


def test_masked_random_actions_are_always_legal(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    world = make_world(random_records(random.Random(8), 60), workers=3, frontier="any")
    env = ReplayEnv(world, strict=True)
    for _ in range(5):
        env.reset()
        done = False
        while not done:
            grid = env.action_masks().reshape(env.session.workers, -1)
            action, used = [], set()
            for slot in grid:
                choices = [i for i in np.flatnonzero(slot) if i == 0 or i == env.max_nodes or i not in used]
                pick = int(rng.choice(choices))
                used.add(pick)
                action.append(pick)
            _, _, term, trunc, _ = env.step(np.array(action))  # strict: must not raise
            done = term or trunc


# -- capacity ----------------------------------------------------------------------------------------
def test_default_capacity_holds_the_whole_world() -> None:
    recs = [node("root", None, 0.0)] + [node(f"n{i}", "root", float(i)) for i in range(1, 20)]
    env = ReplayEnv(make_world(recs, workers=4))
    assert env.max_nodes == DEFAULT_MAX_NODES
    env.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        while True:
            obs, _, term, trunc, info = env.step([0, 0, 0, 0])
            assert "capacity_full" not in info
            if term or trunc:
                break
    assert term and not trunc and glob(obs, "attempts") == 19 and sum(column(obs, "revealed")) == 20


def test_explicit_smaller_capacity_truncates_flags_and_warns_once() -> None:
    recs = [node("root", None, 0.0)] + [node(f"n{i}", "root", float(i)) for i in range(1, 20)]
    env = ReplayEnv(make_world(recs, workers=2), max_nodes=6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            env.reset()
            _, _, term, trunc, info = env.step([0, 0])  # 3 nodes, 3 + W <= 6: room left
            assert not trunc and "capacity_full" not in info
            _, _, term, trunc, info = env.step([0, 0])  # 5 nodes, 5 + W > 6: truncated
            assert trunc and not term and info["capacity_full"] is True
            assert env.session.done and env.session.truncated
    assert len([w for w in caught if "max_nodes=6" in str(w.message)]) == 1
    with pytest.raises(ValueError, match="max_nodes"):
        ReplayEnv(make_world(recs, workers=2), max_nodes=2)


def test_a_tiny_world_needs_no_room_for_w() -> None:
    env = ReplayEnv(make_world([node("root", None, 0.0), node("a", "root", 1.0)], workers=4), max_nodes=2)
    env.reset()
    _, _, term, trunc, _ = env.step([0, 0, 0, 0])
    assert term and not trunc


# -- episodes ------------------------------------------------------------------------------------------
def test_max_rounds_truncates_through_gym(folder: Path) -> None:
    env = gym.make("DreamGym/Replay-v1", world=folder, max_rounds=1)
    env.reset()
    _, _, term, trunc, _ = env.step([0])
    assert trunc and not term


def test_reset_is_deterministic_and_seed_changes_nothing(folder: Path) -> None:
    env = ReplayEnv(folder)
    traces = []
    for seed in (0, 1, None):
        obs, _ = env.reset(seed=seed)
        steps = [obs] + [env.step(b)[0] for b in ([0, 0], [1])]
        traces.append(steps)
    for other in traces[1:]:
        for a, b in zip(traces[0], other, strict=True):
            for key in a:
                np.testing.assert_array_equal(a[key], b[key])


def test_reset_clears_the_rows_of_the_previous_episode(folder: Path) -> None:
    env = ReplayEnv(folder)
    first, _ = env.reset()
    for batch in ([0, 0], [1, 0], [3]):
        env.step(batch)
    again, _ = env.reset()
    for key in first:
        np.testing.assert_array_equal(first[key], again[key], err_msg=key)


def test_observations_are_read_only_and_never_change(folder: Path) -> None:
    env = ReplayEnv(folder)
    obs, info = env.reset()
    for array in (*obs.values(), info["action_mask"], obs["nodes"][:, 0]):
        with pytest.raises(ValueError):
            array[...] = 1  # the env may write these buffers again once nobody holds them
        with pytest.raises(ValueError):
            array.flags.writeable = True
    mine = {key: value.copy() for key, value in obs.items()}
    mine["score"][:] = 99.0  # a copy is the caller's own
    obs2, *_ = env.step([0])
    assert obs2["score"][0] == 1.0 and column(obs2, "frontier")[2] == 0
    obs3, *_ = env.step([1])
    assert column(obs2, "revealed")[2] == 0 and column(obs3, "revealed")[2] == 1  # obs2 did not change
    for key in obs2:
        assert not np.shares_memory(obs2[key], obs3[key])


def test_share_obs_returns_read_only_buffers_the_next_step_overwrites(folder: Path) -> None:
    env = ReplayEnv(folder, share_obs=True)
    obs, _ = env.reset()
    with pytest.raises(ValueError):
        obs["score"][0] = 5.0
    kept = {key: value.copy() for key, value in obs.items()}
    obs2, *_ = env.step([0])
    assert obs2["nodes"] is obs["nodes"] and column(obs, "revealed")[1] == 1
    assert column(kept, "revealed")[1] == 0


def test_rewards_match_session(folder: Path) -> None:
    env = ReplayEnv(folder)
    session = ReplaySession(env.world)
    env.reset()
    for batch in ([0, 0], [1, 0], [3], []):
        reward = env.step(batch)[1]
        assert reward == session.step(batch).reward


# -- wrappers -------------------------------------------------------------------------------------------
def test_record_episode_statistics_returns_the_replay_score(folder: Path) -> None:
    env = RecordEpisodeStatistics(gym.make("DreamGym/Replay-v1", world=folder))
    env.reset()
    for batch in ([0, 0], [1, 0], [3], []):
        *_, term, trunc, info = env.step(batch)
    assert term and info["episode"]["l"] == 4
    assert info["episode"]["r"] == pytest.approx(env.unwrapped.session.value)


def test_time_limit_truncates_and_rewards_still_sum_to_v(folder: Path) -> None:
    for env in (gym.make("DreamGym/Replay-v1", world=folder, max_episode_steps=2),
                TimeLimit(gym.make("DreamGym/Replay-v1", world=folder), max_episode_steps=2)):
        env.reset()
        total = env.step([0, 0])[1]
        _, reward, term, trunc, _ = env.step([1, 0])
        assert trunc and not term
        assert total + reward == pytest.approx(env.unwrapped.session.value)


def test_flatten_observation(folder: Path) -> None:
    env = FlattenObservation(gym.make("DreamGym/Replay-v1", world=folder))
    obs, _ = env.reset()
    n = env.unwrapped.max_nodes
    assert obs.shape == (n * len(NODE_COLUMNS) + n + len(GLOBAL_COLUMNS),)
    obs, *_ = env.step([0, 0])
    assert env.observation_space.contains(obs)


# -- render ------------------------------------------------------------------------------------------------
def test_render_ansi_draws_the_tree(folder: Path) -> None:
    env = gym.make("DreamGym/Replay-v1", world=folder, render_mode="ansi")
    env.reset()
    env.step([0, 0])
    env.step([1, 0])
    text = env.render()
    assert text.splitlines() == [
        "round 2  attempts 4  W=2  baseline 1  frontier [3, 4]",
        " 0: 1",
        "├─  1: 2",
        "│  └─ *3: 3",
        "├─  2: invalid  [SyntaxError: nope]",
        "└─ *4: 1.5",
    ]
    assert ReplayEnv(folder).render() is None
    with pytest.raises(ValueError, match="render_mode must be None, 'human', 'ansi' or 'rgb_array', got 'rgb'"):
        ReplayEnv(folder, render_mode="rgb")


def test_render_human_prints_the_tree_after_reset_and_every_step(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Gymnasium's make wraps an env without "human" in its HumanRendering, which needs pygame
    env = gym.make("DreamGym/Replay-v1", world=folder, render_mode="human")
    assert type(env.unwrapped) is ReplayEnv and env.render_mode == "human"
    env.reset()
    assert capsys.readouterr().out.startswith("round 0  attempts 0  W=2")
    env.step([0, 0])
    _, reward, *_ = env.step([1, 0])
    drawn = capsys.readouterr().out.split("\n\n")
    assert [part.splitlines()[0] for part in drawn if part] == [
        "round 1  attempts 2  W=2  baseline 1  frontier [0, 1]",
        "round 2  attempts 4  W=2  baseline 1  frontier [3, 4]",
    ]
    assert env.render() is None and capsys.readouterr().out.startswith("round 2")
    copied = pickle.loads(pickle.dumps(env.unwrapped))  # a copy draws too, and continues the episode
    copied.step([])
    assert capsys.readouterr().out.startswith("round 2  attempts 4")


def test_render_handles_a_deep_chain() -> None:
    recs = [node("root", None, 0.0)] + [node(f"n{i}", "root" if i == 1 else f"n{i - 1}", float(i)) for i in range(1, 1500)]
    session = ReplaySession(make_world(recs, workers=1))
    while not session.done:
        view = session.view()
        session.step([view.frontier[-1]] if view.frontier else [])
    from dream_gym.replay.view import render_tree

    assert len(render_tree(session.view()).splitlines()) == 1 + 1500


def test_a_long_episode_leaves_no_object_per_step_for_the_collector() -> None:
    """What a step keeps for its episode (the revealed nodes, the batches) is ints and shared
    world data, never a new container per step: on a large world the collector would otherwise
    rescan a growing heap (a third of a step at 100,000 nodes)."""
    import gc

    from dream_gym.world.tree import build_world
    from dream_gym.world.writer import new_meta

    records = [{"id": "root", "parent": None, "score": 0.0}]
    records += [{"id": f"n{i}", "parent": "root" if i <= 4 else f"n{i - 4}", "score": float(i)} for i in range(1, 2001)]
    env = ReplayEnv(build_world(new_meta("long", "toy", workers=4), records), max_nodes=2001)
    _, info = env.reset()
    steps = 0
    gc.collect()
    before = len(gc.get_objects())
    while True:
        batch = [i for i in info["frontier"] for _ in range(info["frontier"][i])][:4]
        _, _, terminated, truncated, info = env.step(batch)
        steps += 1
        if terminated or truncated:
            break
    del batch
    gc.collect()
    assert steps >= 400  # the episode reveals the whole world, four nodes a step
    assert len(gc.get_objects()) - before < 50
