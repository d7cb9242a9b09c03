"""dream_gym.replay.settings: the episode settings in one value, resolved on a world once, and what the
layers above record of it (the env, the vector env, evaluation's result rows and limits)."""

from __future__ import annotations

import inspect
import json
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dream_gym.envs.env import ReplayEnv
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.evaluation.evaluate import evaluate
from dream_gym.evaluation.plots import replay_trace
from dream_gym.replay.oracle import oracle_limit, oracle_limit_at
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.settings import DEFAULT_BETA, ReplaySettings
from dream_gym.world.tree import World, load_world
from dream_gym.world.writer import new_meta, write_world


def make_world(folder: Path, n: int, seed: int, workers: int, frontier: str = "leaves") -> World:
    rng = random.Random(seed)
    records: list[dict[str, Any]] = [{"id": "r", "parent": None, "score": 0.0}]
    for i in range(1, n):
        parent = records[rng.randrange(i)]["id"] if rng.random() < 0.6 else records[i - 1]["id"]
        records.append({"id": f"n{i}", "parent": parent, "score": round(rng.uniform(-1.0, 2.0), 3)})
    meta = new_meta(f"w{seed}", "toy", workers=workers, frontier=frontier)
    return load_world(write_world(folder / f"w{seed}", meta, records))


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> list[World]:
    root = tmp_path_factory.mktemp("settings-worlds")
    return [make_world(root, 30, 0, workers=3), make_world(root, 40, 1, workers=5, frontier="any")]


def test_defaults_are_defined_once_and_resolved_from_the_world(worlds: list[World]) -> None:
    defaults = ReplaySettings()
    assert (defaults.workers, defaults.beta, defaults.beta1, defaults.beta2, defaults.max_rounds,
            defaults.frontier) == (None, DEFAULT_BETA, DEFAULT_BETA1, DEFAULT_BETA2, None, None)
    for world in worlds:
        resolved = defaults.resolved(world)
        assert (resolved.workers, resolved.frontier) == (world.workers, world.frontier_rule)
        assert resolved.resolved(world) is resolved  # resolving twice changes nothing
    given = ReplaySettings(2, 0.3, frontier="leaves").resolved(worlds[1])
    assert (given.workers, given.beta, given.frontier) == (2, 0.3, "leaves")  # what is given is kept


@pytest.mark.parametrize("target", [ReplayEnv.__init__, ReplayVectorEnv.__init__])
def test_public_keyword_defaults_are_the_settings_defaults(target: Any) -> None:
    parameters = inspect.signature(target).parameters
    for name, value in ReplaySettings().as_dict().items():
        assert parameters[name].default == value, name


def test_settings_reject_what_the_session_rejected_and_unknown_names() -> None:
    with pytest.raises(ValueError, match="beta must be in"):
        ReplaySettings(beta=1.5)
    with pytest.raises(ValueError, match="max_rounds must be an integer >= 1"):
        ReplaySettings(max_rounds=0)
    # what was cut, cast or let through unseen: a float W or round limit, text, True, NaN or
    # inf or a negative cost weight (every reward NaN, inf or reversed)
    for changed, message in (({"workers": 2.5}, "workers must be an integer from 1 to 4096 or None, got 2.5"),
                             ({"workers": 4097}, "workers must be an integer from 1 to 4096 or None, got 4097"),
                             ({"workers": "4"}, "workers must be an integer"), ({"workers": True}, "workers must be"),
                             ({"max_rounds": 2.5}, "max_rounds must be an integer"),
                             ({"beta1": float("nan")}, "beta1 must be a finite number >= 0, got nan"),
                             ({"beta2": float("inf")}, "beta2 must be a finite number"),
                             ({"beta1": -1.0}, "beta1 must be a finite number >= 0, got -1.0")):
        with pytest.raises(ValueError, match=re.escape(message)):
            ReplaySettings(**changed)
    assert ReplaySettings(workers=np.int64(3), max_rounds=np.int32(4), beta1=np.float64(0.1)).workers == 3
    with pytest.raises(TypeError, match="unknown replay settings: wrokers"):
        ReplaySettings.of(wrokers=2)


def test_session_env_and_vector_env_replay_the_resolved_settings(worlds: list[World]) -> None:
    world = worlds[1]
    expected = ReplaySettings(beta=0.2).resolved(world)
    session = ReplaySession(world, beta=0.2)
    env = ReplayEnv(world, beta=0.2)
    vector = ReplayVectorEnv(2, world, beta=0.2)
    assert session.settings == env.settings == expected
    assert session.replay.workers == env.workers == vector.workers == world.workers
    assert session.view().frontier_rule == "any"
    assert vector.settings.workers == world.workers
    with pytest.raises(ValueError, match="different W"):
        ReplayVectorEnv(2, worlds)  # a pool of worlds recorded at W 3 and 5 needs workers=
    assert ReplayVectorEnv(2, worlds, workers=2).settings.workers == 2


@pytest.mark.parametrize("workers", [None, 2])
def test_result_rows_record_the_settings_replayed(worlds: list[World], tmp_path: Path, workers: int | None) -> None:
    out = tmp_path / "results.jsonl"
    results = evaluate(["greedy"], worlds, (0.0, 1.0), backend="serial", task_timeout=None, progress=False,
                       workers=workers, max_rounds=6, out=out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(results) == 4
    by_id = {world.id: world for world in worlds}
    for row, result in zip(rows, results, strict=True):
        world = by_id[row["world"]]
        replayed_w = world.workers if workers is None else workers
        assert row["workers"] == replayed_w  # never null when defaulted
        assert row["frontier"] == world.frontier_rule
        assert (row["beta1"], row["beta2"], row["max_rounds"]) == (DEFAULT_BETA1, DEFAULT_BETA2, 6)
        assert max(len(batch) for batch in row["batches"]) <= replayed_w
        # the limit is the oracle's at the W and frontier rule replayed
        assert result.limit == oracle_limit(world, replayed_w, frontier=world.frontier_rule, max_rounds=6).value
        assert result.limit == oracle_limit_at(world, ReplaySettings(workers, max_rounds=6)).value
        # a row replays to its own numbers from what it records
        settings = ReplaySettings.from_row(row)
        assert settings == ReplaySettings(replayed_w, row["beta"], DEFAULT_BETA1, DEFAULT_BETA2, 6,
                                          world.frontier_rule)
        assert replay_trace(world, row).attempts[-1] == row["attempts"]
