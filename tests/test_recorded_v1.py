"""The default shipped dataset dream-gym/recorded-v1: shape, split, registration, and the targets its agents were built to meet.

The targets (medians over the worlds, at the default beta1, beta2) are computed here from the
shipped worlds with :func:`dream_gym.datasets.stats.world_stats`, as the card reports them.
"""

from __future__ import annotations

import json
import statistics

import gymnasium as gym
import pytest
from recorded_schedule import online_replay_score, replay_recorded_schedule, rounds_of

import dream_gym
from dream_gym.datasets.stats import STOP_ROUNDS, world_stats
from dream_gym.datasets.store import shipped_path, validate
from dream_gym.online.tasks import list_tasks
from dream_gym.world.registry import DEFAULT_DATASET, list_worlds, resolve_world

V1 = "dream-gym/recorded-v1"
ROOT = shipped_path(V1)
ROWS = list_worlds(V1)
NAMES = [row["name"] for row in ROWS]


@pytest.fixture(scope="module")
def stats():
    return {name: world_stats(resolve_world(name)) for name in NAMES}


def test_v1_is_the_default_dataset():
    assert DEFAULT_DATASET == V1 and shipped_path() == ROOT and ROOT.name == "recorded-v1"
    assert list_worlds()[0]["dataset"] == V1  # listed first; recorded-v0 follows


def test_at_least_30_worlds_over_5_tasks_w4_and_w8_and_enough_attempts():
    assert len(NAMES) >= 30
    assert {row["task"] for row in ROWS} == set(list_tasks()) and len(set(list_tasks())) >= 5
    assert {row["workers"] for row in ROWS} == {4, 8}
    assert len({row["policy"] for row in ROWS}) >= 5
    assert min(row["nodes"] for row in ROWS) >= 251
    assert sum(row["nodes"] >= 1001 for row in ROWS) >= 2


def test_worlds_are_stored_compressed_and_the_dataset_stays_small():
    for row in ROWS:
        folder = ROOT / row["name"]
        assert (folder / "nodes.jsonl.gz").is_file() and not (folder / "nodes.jsonl").exists()
    size = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert size < 40 * 2**20


def test_dataset_json_validates_and_split_is_fixed_by_task_and_seed():
    result = validate(V1)  # every file's sha256, the card, the split
    assert set(result.worlds) == set(NAMES)
    meta = json.loads((ROOT / "dataset.json").read_text())
    held, train = set(meta["split"]["held_out"]), set(meta["split"]["train"])
    assert held | train == set(NAMES) and not held & train
    assert held == {n for n in NAMES if n.startswith("cp32-") or n.endswith("-s1")}
    assert {resolve_world(n).task_name for n in train} == set(list_tasks()) - {"circle-packing-32"}


@pytest.mark.parametrize("row", ROWS[::3], ids=lambda row: row["name"])
def test_worlds_are_registered_as_v1_ids_and_replay_their_own_schedule(row):
    assert row["env_id"] == f"DreamGym/{row['name']}-v1"
    env = gym.make(row["env_id"])
    _, info = env.reset()
    assert info["frontier"] == {0: row["workers"]}
    world = resolve_world(f"{V1}/{row['name']}")
    assert dream_gym.resolve_world(row["name"]) is world  # a plain name finds it too
    session, revealed = replay_recorded_schedule(world)
    assert revealed == [set(v) for v in rounds_of(world).values()]
    assert session.value == pytest.approx(online_replay_score(world), abs=1e-12)


def test_card_lists_every_world_its_command_and_the_targets():
    card = (ROOT / "README.md").read_text()
    for name in NAMES:
        assert f"`{name}`" in card
    assert card.count("dream-gym grow") >= len(NAMES)
    assert "Growing took" in card and "successive new bests" in card


def test_the_agents_targets_hold_on_the_shipped_worlds(stats):
    rows = list(stats.values())
    assert statistics.median(s.q_first_w for s in rows) <= 0.5
    assert statistics.median(s.new_bests for s in rows) >= 8
    assert statistics.median(s.best_depth for s in rows) >= 6
    early_stop_far = [min(s.limit_minus_stop_r[r] for r in STOP_ROUNDS) >= 0.25 for s in rows]
    assert sum(early_stop_far) >= 0.8 * len(rows)


def test_recorded_v0_is_still_shipped_with_its_ids():
    v0 = list_worlds("dream-gym/recorded-v0")
    assert len(v0) >= 24 and all(row["env_id"].endswith("-v0") for row in v0)
    assert not set(NAMES) & {row["name"] for row in v0}  # names are unique across the shipped datasets
    assert gym.make(v0[0]["env_id"]).reset()[1]["frontier"]


@pytest.mark.slow
def test_make_dataset_resumes_a_world_after_kill_9(tmp_path):
    """The build (make dataset) is resumable: kill -9 mid-world, run again, the world finishes."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from dream_gym.world.tree import load_world

    build = Path(__file__).resolve().parents[1] / "recorded_worlds" / "recorded-v1" / "build.py"
    script = (f"import importlib.util, pathlib, sys\n"
              f"spec = importlib.util.spec_from_file_location('build', {str(build)!r})\n"
              "build = sys.modules['build'] = importlib.util.module_from_spec(spec)\n"
              "spec.loader.exec_module(build)\n"
              "plan = build.Plan('sd', 'fixed', 4, 0, attempts=40)\n"
              f"build.grow(plan, pathlib.Path({str(tmp_path)!r}))\n")
    folder = tmp_path / "sd-fixed-w4-s0"
    child = subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not ((folder / "nodes.jsonl").is_file()
                                          and len((folder / "nodes.jsonl").read_bytes().splitlines()) >= 9):
        time.sleep(0.2)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    assert not (folder / "nodes.jsonl.gz").exists()  # killed before it finished
    kept = len((folder / "nodes.jsonl").read_bytes().splitlines())
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=300)
    world = load_world(folder)  # finished, checksummed and stored compressed
    assert world.size == 41 and world.meta["sha256"] and (folder / "nodes.jsonl.gz").is_file()
    assert kept >= 9 and "(resumed)" in (tmp_path / "grow_times.txt").read_text()
