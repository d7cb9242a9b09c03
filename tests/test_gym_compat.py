"""dream_gym from other people's Gymnasium / SB3 code: what the training guide's recipe runs.

On gym.make of a shipped world: SB3's check_env; make_vec_env with DummyVecEnv (SB3 asks for
render_mode="rgb_array") and with SubprocVecEnv; MaskablePPO with ActionMasker for a few hundred
steps; gym.make_vec in the "sync", "async" and "vector_entry_point" modes, all giving the same
episodes; pickling and deep copies of the env, its observations and infos; env.spec.to_json();
the ids scheme (behaviour version in the id, dataset reference in the kwargs, old ids kept);
Taxi-style action masks; rgb_array frames drawn without pyplot; the default capacity and its
error; and MaskablePPO training on each registered RL training env through gym.make.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from sb3_contrib import MaskablePPO
from sb3_contrib.common.wrappers import ActionMasker
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from worldgen import frontier_st, make_world, node, random_batch_sequence, workers_st, world_records

import dream_gym  # noqa: F401  (registers the envs)
from dream_gym.envs.env import DEFAULT_MAX_NODES, ReplayEnv
from dream_gym.envs.ids import SHIPPED_MODELS_POOL, shipped_world_ids
from dream_gym.envs.tree_image import HEIGHT, WIDTH
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.world.registry import DEFAULT_DATASET

WORLD = "cp26-fixed-w4-s0"
ENV_ID = f"DreamGym/{WORLD}-v1"
SMALL_POOL = {"worlds": "cp26-fixed-w4-s0,sd-fixed-s0", "prefixes": [50]}  # two worlds and their prefixes

torch.set_num_threads(1)  # tiny networks on a shared machine: more threads only contend


def mask_fn(env: gym.Env) -> np.ndarray:
    """The training guide's ActionMasker function (module level, so that SubprocVecEnv can pickle it)."""
    return env.unwrapped.action_masks()  # type: ignore[attr-defined, no-any-return]


def frontier_actions(num_envs: int, infos: Any, workers: int, pad: int) -> np.ndarray:
    """A deterministic legal action per sub-env from its info: the last frontier node, else pad."""
    actions = np.full((num_envs, workers), pad)
    for i in range(num_envs):
        frontier = list(infos[i]["frontier"])
        if frontier:
            actions[i, 0] = frontier[-1]
    return actions


def play(env: gym.Env, steps: int) -> list[Any]:
    """Observations, rewards and flags of a fixed policy (the last frontier id each step)."""
    obs, info = env.reset(seed=0)
    seen: list[Any] = [{k: v.tolist() for k, v in obs.items()}]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step([info["view"].frontier[-1]] if info["view"].frontier
                                                            else [])
        seen.append(({k: v.tolist() for k, v in obs.items()}, reward, terminated, truncated))
        if terminated or truncated:
            obs, info = env.reset()
    return seen


# -- SB3 ---------------------------------------------------------------------------------------
def test_sb3_check_env_passes_on_gym_make_of_a_shipped_world() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(ENV_ID))  # raises on any breach of the Gymnasium API SB3 relies on
    # the one remark: the (max_nodes, 5) node matrix is neither an image nor a vector
    assert all("unconventional shape" in str(w.message) or "out of date" in str(w.message) for w in caught)


@pytest.mark.slow
def test_make_vec_env_dummy_and_subproc_give_the_same_episodes() -> None:
    runs = []
    # "dream_gym:<id>": gym.make imports dream_gym first, so that a worker process started by
    # forkserver or spawn (which has not imported it) knows the id
    for vec_env_cls, env_id in ((DummyVecEnv, ENV_ID), (SubprocVecEnv, f"dream_gym:{ENV_ID}")):
        venv = make_vec_env(env_id, n_envs=2, vec_env_cls=vec_env_cls, seed=0)  # SB3 asks for rgb_array first
        assert venv.render_mode == "rgb_array"
        obs = venv.reset()
        trace, infos = [obs["nodes"].tolist()], [{"frontier": {0: 1}}] * 2
        pad = DEFAULT_MAX_NODES
        for _ in range(12):
            obs, rewards, dones, infos = venv.step(frontier_actions(2, infos, 4, pad))
            assert all("view" in info and "action_mask" in info for info in infos)  # infos crossed processes
            # DummyVecEnv keeps rewards in float32, SubprocVecEnv returns the env's float64
            trace.append((obs["nodes"].tolist(), rewards.astype(np.float32).tolist(), dones.tolist()))
        frames = venv.get_images()
        assert [f.shape for f in frames] == [(HEIGHT, WIDTH, 3)] * 2
        venv.close()
        runs.append(trace)
    assert runs[0] == runs[1]


@pytest.mark.slow
def test_maskable_ppo_with_action_masker_trains_and_acts_within_the_masks() -> None:
    venv = make_vec_env(ENV_ID, n_envs=2, seed=0, wrapper_class=ActionMasker, wrapper_kwargs={"action_mask_fn": mask_fn})
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256
    env = ActionMasker(gym.make(ENV_ID), mask_fn)
    obs, info = env.reset()
    for _ in range(10):
        masks = env.action_masks()
        assert masks.tolist() == info["action_mask"].reshape(-1).astype(bool).tolist()  # the two layouts agree
        action, _ = model.predict(obs, action_masks=masks, deterministic=False)
        per_slot = masks.reshape(len(action), -1)
        assert all(per_slot[slot, value] for slot, value in enumerate(action))
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()


# -- Gymnasium vector envs ---------------------------------------------------------------------------
def test_make_vec_sync_async_and_vector_entry_point_give_the_same_episodes() -> None:
    runs = {}
    for mode in ("sync", "async", "vector_entry_point"):
        envs = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode=mode)
        assert envs.single_observation_space["nodes"].shape == (DEFAULT_MAX_NODES, 5)
        obs, info = envs.reset(seed=0)
        rng = np.random.default_rng(0)
        trace = [obs["nodes"].tolist()]
        for _ in range(15):
            masks = envs.unwrapped.call("action_masks") if mode != "vector_entry_point" else envs.unwrapped.action_masks()
            masks = np.asarray(masks).reshape(2, 4, -1)
            actions = np.array([[rng.choice(np.flatnonzero(masks[e, j])) for j in range(4)] for e in range(2)])
            obs, rewards, terminated, truncated, info = envs.step(actions)
            if mode != "vector_entry_point":  # one array per sub-env: Gymnasium stacks them
                assert info["action_mask"].shape == (2, 4, DEFAULT_MAX_NODES + 1)
                now = np.asarray(envs.unwrapped.call("action_masks"))
                assert (info["action_mask"].reshape(2, -1).astype(bool) == now).all()
            trace.append((obs["nodes"].tolist(), obs["score"].tolist(), rewards.tolist(), terminated.tolist(),
                          truncated.tolist(), info["attempts"].tolist()))
        envs.close()
        runs[mode] = trace
    assert runs["sync"] == runs["async"] == runs["vector_entry_point"]


# -- copies --------------------------------------------------------------------------------------------
def test_the_env_its_observations_and_infos_pickle_and_deep_copy_mid_episode() -> None:
    env = gym.make(ENV_ID)
    obs, info = env.reset(seed=0)
    for _ in range(6):
        obs, reward, terminated, truncated, info = env.step(list(info["view"].frontier[:2]))
    copies = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env), copy.deepcopy(env.unwrapped)]
    again = pickle.loads(pickle.dumps(info))
    assert again["view"] == info["view"] and again["view"].to_dict() == info["view"].to_dict()
    assert [m.tolist() for m in again["action_mask"]] == [m.tolist() for m in info["action_mask"]]
    assert copy.deepcopy(info)["view"] is info["view"]  # immutable: SB3's per-step deepcopy costs nothing
    assert pickle.loads(pickle.dumps(obs))["nodes"].tolist() == obs["nodes"].tolist()
    original = play_on(env, 20)
    for other in copies:
        assert play_on(other, 20) == original  # the copy continues the same episode


def test_a_copy_draws_from_generators_of_its_own_as_the_original_would() -> None:
    """The deep copy shared the env's generator with the original (a draw in either moved both),
    and made its action space a fresh one, whatever it had been seeded with."""
    env = ReplayEnv(WORLD)
    env.reset(seed=5)
    env.action_space.seed(0)
    for copied in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        assert copied.np_random is not env.np_random
        state = env.np_random.bit_generator.state, env.action_space.np_random.bit_generator.state
        assert copied.np_random.integers(1000) == env.np_random.integers(1000)  # the same stream, each its own
        assert copied.action_space.sample().tolist() == env.action_space.sample().tolist()
        env.np_random.bit_generator.state, env.action_space.np_random.bit_generator.state = state


def play_on(env: gym.Env, steps: int) -> list[Any]:
    """Continue an episode (no reset) with a fixed policy, then one more."""
    out: list[Any] = []
    info = {"view": env.unwrapped.session.view()}  # type: ignore[attr-defined]
    for _ in range(steps):
        frontier = info["view"].frontier
        obs, reward, terminated, truncated, info = env.step(list(frontier[-2:]))
        out.append(({k: v.tolist() for k, v in obs.items()}, reward, terminated, truncated, info["new_ids"]))
        if terminated or truncated:
            obs, info = env.reset()
    return out


def test_a_copy_of_a_stopped_or_fresh_env_is_in_the_same_state() -> None:
    env = ReplayEnv(WORLD)
    fresh = pickle.loads(pickle.dumps(env))
    assert fresh._episode == 0 and fresh.reset()[0]["nodes"].tolist() == env.reset()[0]["nodes"].tolist()
    env.step([0])
    env.step([])  # the empty batch stops
    stopped = copy.deepcopy(env)
    assert stopped.session.done and stopped.session.terminated and len(stopped.session.batches) == 1
    with pytest.raises(RuntimeError, match="reset"):
        stopped.step([0])


# -- ids, specs -----------------------------------------------------------------------------------------
def test_spec_to_json_round_trips_and_holds_the_dataset_reference() -> None:
    env = gym.make(ENV_ID)
    text = env.spec.to_json()
    assert json.loads(text)["kwargs"]["world"] == f"{DEFAULT_DATASET}/{WORLD}"
    again = gym.make(EnvSpec.from_json(text))
    assert again.unwrapped.world.id == WORLD and again.spec.id == ENV_ID
    for env_id in ("DreamGym/Macro-v0", "DreamGym/Node-v0", "DreamGym/Options-v0"):
        spec = gym.spec(env_id)
        assert json.loads(spec.to_json())["kwargs"] == SHIPPED_MODELS_POOL


def test_ids_carry_the_behaviour_version_and_old_ids_keep_working() -> None:
    ids = shipped_world_ids()
    assert ids[ENV_ID] == f"{DEFAULT_DATASET}/{WORLD}"
    assert ids["DreamGym/cp26-fixed-s0-v1"] == "dream-gym/recorded-v0/cp26-fixed-s0"  # a recorded-v0 world
    assert all(env_id.endswith("-v1") for env_id in ids)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = gym.make("DreamGym/cp26-fixed-s0-v0")  # the id recorded-v0 worlds had
        old_generic = gym.make("DreamGym/Replay-v0", world=WORLD)
    assert sum("out of date" in str(w.message) for w in caught) == 2
    assert old.unwrapped.world.id == "cp26-fixed-s0" and old.unwrapped.max_nodes == DEFAULT_MAX_NODES
    assert play(old_generic, 8) == play(gym.make(ENV_ID), 8)  # an alias of v1


# -- masks and rendering ------------------------------------------------------------------------------
def test_info_action_mask_is_taxi_style_and_masked_samples_are_legal() -> None:
    env = gym.make(ENV_ID)
    env.action_space.seed(0)
    obs, info = env.reset(seed=0)
    pad = env.unwrapped.max_nodes
    for _ in range(40):
        mask = info["action_mask"]
        assert isinstance(mask, np.ndarray) and mask.dtype == np.int8 and mask.shape == (4, pad + 1)
        frontier, root_slots = set(info["view"].frontier), info["view"].root_slots
        for slot, m in enumerate(mask):
            allowed = {int(i) for i in np.flatnonzero(m)}
            assert allowed == (frontier - {0}) | {pad} | ({0} if slot < root_slots else set())
        action = env.action_space.sample(mask=tuple(mask))  # one mask per slot
        obs, _, terminated, truncated, info = env.step(action)
        # only duplicates of one non-root node can be dropped: per-slot masks cannot forbid them
        assert all("twice" in reason for _, reason in info["dropped"])
        if terminated or truncated:
            obs, info = env.reset()


def test_rgb_array_frames_change_with_the_tree() -> None:
    env = gym.make(ENV_ID, render_mode="rgb_array")
    env.reset()
    first = env.render()
    env.step([0, 0])
    second = env.render()
    assert first.shape == second.shape == (HEIGHT, WIDTH, 3) and first.dtype == np.uint8
    assert (first != second).any()
    assert gymnasium_check_env(env.unwrapped, skip_render_check=False) is None


@pytest.mark.slow
def test_rgb_array_never_imports_pyplot_or_changes_the_backend() -> None:
    code = (
        "import sys, matplotlib; matplotlib.use('svg')\n"
        "import gymnasium as gym, dream_gym\n"
        f"env = gym.make('{ENV_ID}', render_mode='rgb_array'); env.reset(); frame = env.render()\n"
        "assert frame.shape == (480, 640, 3), frame.shape\n"
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


# -- capacity -------------------------------------------------------------------------------------------
def test_a_world_bigger_than_the_default_capacity_is_an_error_naming_max_nodes() -> None:
    records = [node("root", None, 0.0)] + [node(f"n{i}", "root" if i == 1 else f"n{i - 1}", float(i))
                                           for i in range(1, DEFAULT_MAX_NODES + 1)]
    world = make_world(records, workers=2)
    with pytest.raises(ValueError, match=f"max_nodes={DEFAULT_MAX_NODES}"):
        ReplayEnv(world)
    with pytest.raises(ValueError, match="max_nodes"):
        ReplayVectorEnv(2, world=world)
    assert ReplayEnv(world, max_nodes=world.size).max_nodes == DEFAULT_MAX_NODES + 1
    fits = make_world(records[:DEFAULT_MAX_NODES], workers=2)
    assert ReplayEnv(fits).max_nodes == DEFAULT_MAX_NODES


# -- the RL training envs ---------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["DreamGym/Macro-v0", "DreamGym/Node-v0", "DreamGym/Options-v0"])
def test_maskable_ppo_trains_on_each_training_env_through_gym_make(env_id: str) -> None:
    env = gym.make(env_id, **SMALL_POOL)
    assert len(env.unwrapped.worlds) == 4  # two worlds and each one's 50-attempt prefix
    assert json.loads(env.spec.to_json())["kwargs"]["worlds"] == SMALL_POOL["worlds"]
    env.reset(seed=0)
    twin = pickle.loads(pickle.dumps(env))  # a pickled copy plays the same episode on
    action = int(np.flatnonzero(env.unwrapped.action_masks())[0])
    assert plain_step(env.step(action)) == plain_step(twin.step(action))
    venv = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs=SMALL_POOL)  # render_mode refused, SB3 retries
    policy = "MultiInputPolicy" if isinstance(env.observation_space, gym.spaces.Dict) else "MlpPolicy"
    model = MaskablePPO(policy, venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256


def plain_step(result: tuple[Any, ...]) -> Any:
    obs, reward, terminated, truncated, info = result
    arrays = obs.items() if isinstance(obs, dict) else [("obs", obs)]
    return {k: v.tolist() for k, v in arrays}, reward, terminated, truncated, info["batch"]


@pytest.mark.parametrize("env_id", ["DreamGym/Macro-v0", "DreamGym/Node-v0", "DreamGym/Options-v0"])
def test_the_training_envs_take_every_element_of_their_space_and_refuse_what_is_not_one(env_id: str) -> None:
    """A negative index would pick an action from the end, a float or a text the int it rounds or
    parses to: each is a ValueError naming it, before the episode changes; numpy integers and 0-d
    arrays (what SB3's predict gives) are elements."""
    env = gym.make(env_id, **SMALL_POOL).unwrapped
    env.reset(seed=0)
    n = env.action_space.n
    for outside in (-1, n, 10**30, 1.0, "1", np.array([1]), np.float32(1)):
        with pytest.raises(ValueError, match="not an element of the action space"):
            env.step(outside)
    assert env.step(np.int64(n - 1))[4] is not None and env.reset(seed=0) and env.step(np.array(0))


def test_the_macro_vector_env_refuses_actions_that_are_not_an_element_of_its_space() -> None:
    vector = gym.make_vec("DreamGym/Macro-v0", num_envs=2, vectorization_mode="vector_entry_point", **SMALL_POOL)
    vector.reset(seed=0)
    for outside in ([-1, 0], [10, 0], [1.0, 0.0], [[0, 0]]):
        with pytest.raises(ValueError, match="not an element of the action space"):
            vector.step(outside)
    vector.step(np.array([1, 0], dtype=np.int32))


def test_the_training_envs_default_to_the_shipped_models_pool() -> None:
    from dream_gym.training.trainer import TrainConfig, training_pool

    shipped = TrainConfig(worlds="train,dream-gym/recorded-v0:train", prefixes="50,100,200")  # agents/models/README.md
    env = gym.make("DreamGym/Macro-v0")
    assert [w.id for w in env.unwrapped.worlds] == [w.id for w in training_pool(shipped)]
    assert env.unwrapped.betas == tuple(shipped.beta_grid)
    assert env.unwrapped.value_fn == shipped.value_fn()
    vector = gym.make_vec("DreamGym/Macro-v0", num_envs=3, vectorization_mode="vector_entry_point", **SMALL_POOL)
    assert vector.reset(seed=0)[0].shape == (3, env.observation_space.shape[0])
    same_step = gym.make_vec("DreamGym/Macro-v0", num_envs=3, vectorization_mode="vector_entry_point",
                             autoreset_mode="SameStep", **SMALL_POOL)  # passed on, as Gymnasium's vector envs take it
    assert same_step.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP


@settings(max_examples=40, deadline=None)
@given(records=world_records(min_nodes=1, max_nodes=30), workers=workers_st, frontier=frontier_st,
       rng=st.randoms(use_true_random=False))
def test_the_action_mask_equals_one_computed_from_the_view(records, workers, frontier, rng) -> None:
    """The mask's columns are written step by step, like the observation rows: at every step of two
    episodes (the second starts from what the first wrote) it is the one the view implies."""
    world = make_world(records, workers=workers, frontier=frontier)
    env = ReplayEnv(world, workers=workers, frontier=frontier, max_nodes=rng.choice([None, 40]))
    for _episode in range(2):
        obs, info = env.reset()
        assert info["action_mask"].tolist() == mask_from_scratch(info["view"], env.max_nodes).tolist()
        for batch in random_batch_sequence(world, workers, frontier, rng, max_rounds=10):
            obs, _, terminated, truncated, info = env.step(batch)
            assert info["action_mask"].tolist() == mask_from_scratch(info["view"], env.max_nodes).tolist()
            assert env.action_masks().tolist() == info["action_mask"].reshape(-1).astype(bool).tolist()
            if terminated or truncated:
                break


def mask_from_scratch(view: Any, capacity: int) -> np.ndarray:
    mask = np.zeros((view.workers, capacity + 1), dtype=np.int8)
    mask[:, capacity] = 1
    for node_id in view.frontier:
        if node_id:
            mask[:, node_id] = 1
    mask[: view.root_slots, 0] = 1
    return mask


@pytest.mark.slow
def test_the_docs_recipe_runs(tmp_path: Path) -> None:
    """The "Using dream_gym from your own SB3 / Gymnasium code" block of the training guide, saved
    as a script and run as users run it (the docs examples test compiles it and leaves running it
    to this test): as ``python -c`` it passed without its ``__main__`` guard, which a script's
    worker processes need, since they import the script again."""
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "train.md").read_text(encoding="utf-8")
    section = guide.split("## Using dream_gym from your own SB3 / Gymnasium code", 1)[1]
    code = section.split("```python {.no-run}\n", 1)[1].split("```", 1)[0]
    assert "MaskablePPO" in code and "SubprocVecEnv" in code and 'mask=tuple(info["action_mask"])' in code
    script = tmp_path / "recipe.py"
    script.write_text(code, encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # tiny networks, shared cores
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, env=env,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


_SUBPROC = """
import dream_gym  # noqa: F401
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv
venv = make_vec_env({env_id!r}, n_envs=2, vec_env_cls=SubprocVecEnv)
venv.reset()
print(venv.observation_space.shape)
venv.close()
"""


@pytest.mark.parametrize("prefixed", [True, False], ids=["dream_gym-prefix", "control-no-prefix"])
def test_worker_processes_find_the_envs_by_the_dream_gym_prefix(prefixed: bool, tmp_path: Path) -> None:
    """From ``python -c`` (as from a notebook), SB3's worker processes start without dream_gym
    imported: ``dream_gym:<id>`` makes ``gym.make`` import it (what the README says); the bare id
    is not found there (the control)."""
    env_id = ("dream_gym:" if prefixed else "") + "DreamGym/cp26-fixed-w4-s0-v1"
    done = subprocess.run([sys.executable, "-c", _SUBPROC.format(env_id=env_id)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    if prefixed:
        assert done.returncode == 0, done.stderr[-2000:]
    else:
        assert done.returncode != 0 and "NamespaceNotFound" in done.stderr, done.stderr[-2000:]


def test_reset_options_and_a_beta_that_is_no_number_are_refused_naming_them() -> None:
    # both were taken silently: an option ignored (beta=0.3 replayed at 0.5), "0.5" a TypeError
    env = gym.make("DreamGym/cp26-fixed-w4-s0-v1")
    env.reset(options=None)
    env.reset(options={})  # what vector envs pass with no options
    with pytest.raises(ValueError, match="takes no options, got 'beta': W, beta and the other replay settings"):
        env.reset(options={"beta": 0.3})
    with pytest.raises(ValueError, match="beta must be in \\[0, 1\\], got '0.5'"):
        gym.make("DreamGym/cp26-fixed-w4-s0-v1", beta="0.5")


def test_an_unknown_world_is_one_short_error_with_the_nearest_names() -> None:
    """It listed every shipped world (over a thousand characters) and no nearest name."""
    with pytest.raises(LookupError) as error:
        gym.make("DreamGym/Replay-v1", world="cp26-puct-w4-s2")
    message = str(error.value)
    assert len(message) < 300 and "did you mean 'cp26-puct-w4-s1'" in message, message
    assert "dream_gym.list_worlds() lists them" in message
