"""The shipped dataset dream-gym/recorded-v0 (recorded_worlds/recorded-v0/): still loadable, listed and
registered beside v1, with its shape, card, split and the score defaults (ids are immutable)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from recorded_schedule import online_replay_score, replay_recorded_schedule, rounds_of

import dream_gym
from dream_gym.datasets.store import validate
from dream_gym.online.tasks import list_tasks
from dream_gym.policies import POLICIES, make_policy
from dream_gym.policy import run_episode
from dream_gym.world.registry import list_worlds, resolve_world, shipped_dataset_dir

V0 = "dream-gym/recorded-v0"
ROOT = shipped_dataset_dir(V0)
ROWS = list_worlds(V0)
NAMES = [row["name"] for row in ROWS]


def reveal_everything(view):
    """Fill every batch with legal selections until nothing is left."""
    slots = [0] * view.root_slots + [i for i in view.frontier if i != 0]
    return slots[: view.workers]


def test_at_least_24_worlds_over_the_four_v0_tasks_under_50_mb():
    assert len(NAMES) >= 24
    assert {row["task"] for row in ROWS} == set(list_tasks()) - {"autocorrelation"}  # added in v1
    assert {row["policy"] for row in ROWS} >= {"fixed", "greedy", "random"}
    assert len({row["policy"] for row in ROWS}) >= 4
    size = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert size < 50 * 2**20


@pytest.mark.parametrize("name", NAMES)
def test_each_world_has_150_nodes_with_code_diagnostics_durations(name):
    world = resolve_world(name)
    assert world.size >= 151  # root + 150 attempts
    assert world.meta["sha256"] and world.meta["command"].startswith("dream-gym grow")
    for record in world.records[1:]:
        assert record["code"] and "diagnostics" in record and record["duration_s"] > 0


@pytest.mark.parametrize("name", NAMES)
def test_each_world_is_registered_and_steps(name):
    env = gym.make(f"DreamGym/{name}-v0")  # v0 worlds keep their ids
    obs, info = env.reset()
    assert info["frontier"] == {0: 4}
    obs, reward, terminated, truncated, info = env.step([0, 0])
    assert info["attempts"] == 2 and not terminated


@pytest.mark.parametrize("name", NAMES)
def test_each_world_replays_its_own_schedule(name):
    world = resolve_world(name)
    session, revealed = replay_recorded_schedule(world)
    assert revealed == [set(v) for v in rounds_of(world).values()]
    assert session.value == pytest.approx(online_replay_score(world), abs=1e-12)


def test_dataset_json_validates_and_split_is_fixed_by_task_and_seed():
    result = validate(str(ROOT))  # raises, naming the file, on a bad digest or a bad card
    assert result.kind == "dataset" and set(result.worlds) == set(NAMES)
    meta = json.loads((ROOT / "dataset.json").read_text())
    assert meta["id"] == V0 and ROOT.name == "recorded-v0"
    held = set(meta["split"]["held_out"])
    train = set(meta["split"]["train"])
    assert held and train and not held & train and held | train == set(NAMES)
    assert all(n.startswith("cp32-") or n.endswith("-s1") for n in held)
    assert dream_gym.resolve_world("dream-gym/recorded-v0/" + sorted(held)[0]).size >= 151


def test_card_lists_every_world_with_its_command():
    card = (ROOT / "README.md").read_text()
    for name in NAMES:
        assert f"`{name}`" in card
    assert card.count("dream-gym grow") >= len(NAMES)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_default_betas_make_neither_extreme_optimal(name):
    """At the default beta1/beta2, stopping at once and revealing everything are both beaten."""
    world = resolve_world(name)
    stop_at_once = run_episode(lambda view: [], world).replay_score
    everything = run_episode(reveal_everything, world)
    assert everything.attempts == world.size - 1
    best_policy = max(
        run_episode(make_policy(policy), world, beta=beta).replay_score
        for policy in sorted(POLICIES) for beta in (0.1, 0.5, 0.9)
    )
    assert best_policy > stop_at_once
    assert best_policy > everything.replay_score


def test_list_worlds_names_a_dataset_it_does_not_ship() -> None:
    """It returned [] for an unknown, unversioned or store dataset, as if the dataset held no world."""
    from dream_gym import list_worlds

    for bad in ("nope/x-v0", "dream-gym/recorded"):
        with pytest.raises(LookupError, match="is not a dataset dream_gym ships .it ships: dream-gym/recorded-v1"):
            list_worlds(bad)
    with pytest.raises(TypeError, match="dataset must be a shipped dataset's id"):
        list_worlds(5)  # type: ignore[arg-type]
    assert len(list_worlds("dream-gym/recorded-v1")) == 32
