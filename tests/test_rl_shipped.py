"""The shipped trained models (agents/models/: cv-node-v.zip, which recommended names, and ppo-macro-v.zip,
ppo-options.zip, ppo-options-v.zip; the slots of experiments/recommended_cv/PROTOCOL.md): they load by name, run in
replay and eval (the same results with 1 and 2 processes), and run online in `grow` with the built-in agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from once import built_once

from dream_gym.cli import main as cli_main
from dream_gym.evaluation.evaluate import evaluate
from dream_gym.policies.trained import SHIPPED_MODELS, models_dir
from dream_gym.policy_files import load_policy
from dream_gym.rl import NodeSB3Policy, OptionsSB3Policy, SB3Policy
from dream_gym.world.tree import load_world

KINDS = {"cv-node-v": NodeSB3Policy, "ppo-macro-v": SB3Policy, "ppo-options": OptionsSB3Policy,
         "ppo-options-v": OptionsSB3Policy}


def test_every_shipped_model_is_in_the_repository_with_its_command() -> None:
    notes = (models_dir() / "README.md").read_text(encoding="utf-8")
    for name, filenames in SHIPPED_MODELS.items():
        for filename in filenames.split("+"):
            path = models_dir() / filename
            assert path.is_file() and path.stat().st_size < 1_000_000, path  # small zips
            assert f"`{filename}`" in notes and "dream-gym train" in notes
        policy = load_policy(name)
        assert isinstance(policy, KINDS[name]) and policy.name == name
    assert set(SHIPPED_MODELS) == set(KINDS)  # recommended's model and at most three others


@pytest.fixture(scope="module")
def shipped_grids(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Every shipped model evaluated with 1 and with 2 processes, once per test session: one grid
    of the four models each time, so a job process imports the model stack once, not once a model."""
    def grids(folder: Path) -> None:
        worlds, names = "cp32-fixed-s0,sd-fixed-s1", sorted(SHIPPED_MODELS)
        rows = {f"jobs{jobs}": [r.to_dict() for r in evaluate(names, worlds, "0,0.5,1", jobs=jobs, progress=False)]
                for jobs in (1, 2)}
        (folder / "grids.json").write_text(json.dumps(rows))

    return json.loads((built_once(tmp_path_factory, "rl-shipped-grids", grids) / "grids.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHIPPED_MODELS))
def test_a_shipped_model_replays_and_evaluates_deterministically(
        name: str, shipped_grids: dict[str, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["replay", "cp32-fixed-s0", "--policy", name, "--beta", "0.5", "--json"]) == 0
    episode = json.loads(capsys.readouterr().out)
    assert episode["error"] is None and episode["policy"] == name and episode["attempts"] > 0
    serial = [row for row in shipped_grids["jobs1"] if row["policy"] == name]
    pooled = [row for row in shipped_grids["jobs2"] if row["policy"] == name]
    assert len(serial) == 2 * 3 and serial == pooled  # two worlds x three betas
    assert all(row["error"] is None for row in serial)


@pytest.mark.parametrize("name", sorted(SHIPPED_MODELS))
def test_a_shipped_model_grows_a_world_online_with_the_builtin_agent(name: str, tmp_path: Path) -> None:
    out = tmp_path / "world"
    code = cli_main(["grow", "--task", "sum-difference", "--agent", "builtin", "--policy", name, "--workers", "2",
                     "--rounds", "3", "--beta", "0.8", "--out", str(out), "--backend", "serial", "--quiet"])
    assert code == 0
    world = load_world(out)
    summary = json.loads((out / "run_summary.json").read_text())
    assert world.size > 1 and summary["nodes"] == world.size
    assert name in json.dumps(world.meta)  # the policy that grew it is recorded
