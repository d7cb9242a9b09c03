"""``--policy recommended`` (dream_gym.policies.recommended): the policy the cross-validated rule of
experiments/recommended_cv/PROTOCOL.md chose (tests/test_recommended_cv.py recomputes the rule). It
names what the recorded choice names, resolves through the spec machinery like any spec, is
deterministic, reads its beta, and works in eval, replay (its default), grow (its default), dream,
rsi and the OpenEvolve bridge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dream_gym.cli import main as cli_main
from dream_gym.evaluation.evaluate import evaluate
from dream_gym.policies import POLICIES
from dream_gym.policies.recommended import NAME, RECOMMENDED, recommended_spec, resolve
from dream_gym.policies.trained import SHIPPED_MODELS
from dream_gym.policy import run_episode
from dream_gym.policy_files import load_policy
from dream_gym.policy_files.specs import PolicySource, check_policy_spec, is_model_spec
from dream_gym.world.registry import resolve_world
from dream_gym.world.tree import load_world

REPO = Path(__file__).resolve().parents[1]
CV_TABLE = REPO / "experiments" / "recommended_cv" / "cv_table.json"
WORLDS = ("cp32-fixed-s0", "sd-fixed-s1")


def episodes(spec: str, betas: tuple[float, ...] = (0.0, 0.5, 1.0)) -> list[tuple[str, float, list[list[int]], float]]:
    out = []
    for name in WORLDS:
        world = resolve_world(name)
        for beta in betas:
            result = run_episode(load_policy(spec), world, seed=0, beta=beta)
            assert result.error is None, result.error
            out.append((name, beta, result.batches, result.replay_score))
    return out


def test_recommended_is_what_the_recorded_rule_chose() -> None:
    choice = json.loads(CV_TABLE.read_text(encoding="utf-8"))["choice"]
    assert RECOMMENDED == choice["recommended_spec"]
    assert RECOMMENDED in POLICIES or RECOMMENDED in SHIPPED_MODELS or (REPO / "agents" / "models" / RECOMMENDED).is_file()
    assert resolve(NAME) == recommended_spec() != NAME
    assert resolve("greedy") == "greedy"  # other specs pass through


def test_recommended_loads_from_the_spec_machinery_as_the_policy_it_names() -> None:
    check_policy_spec(NAME)
    assert is_model_spec(NAME) == is_model_spec(recommended_spec())
    assert episodes(NAME) == episodes(recommended_spec())
    fresh = PolicySource(NAME).new()
    assert callable(fresh.act) and callable(fresh.reset)


@pytest.mark.slow
def test_recommended_is_deterministic_across_processes() -> None:
    serial = evaluate([NAME], ",".join(WORLDS), "0,0.5,1", jobs=1, progress=False)
    pooled = evaluate([NAME], ",".join(WORLDS), "0,0.5,1", jobs=2, progress=False)
    assert [r.to_dict() for r in serial] == [r.to_dict() for r in pooled]
    assert all(r.error is None and r.policy == NAME for r in serial)
    assert episodes(NAME) == episodes(NAME)


def test_recommended_takes_beta_as_its_budget_preference() -> None:
    runs = episodes(NAME, betas=(0.0, 1.0))
    attempts = {(w, b): sum(len(batch) for batch in batches) for w, b, batches, _ in runs}
    # a higher beta (wider, more patient) spends at least as much on every world, more on one
    assert all(attempts[(w, 1.0)] >= attempts[(w, 0.0)] for w in WORLDS), attempts
    assert any(attempts[(w, 1.0)] > attempts[(w, 0.0)] for w in WORLDS), attempts


@pytest.mark.slow
def test_eval_accepts_recommended(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    assert cli_main(["eval", "--policy", NAME, "--policy", "greedy", "--worlds", WORLDS[0], "--betas", "0.5",
                     "-j", "1", "--no-progress", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["policy"] for r in rows} == {NAME, "greedy"} and all(r["error"] is None for r in rows)
    assert NAME in capsys.readouterr().out


def test_replay_runs_recommended_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["replay", WORLDS[0], "--beta", "0.5", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert cli_main(["replay", WORLDS[0], "--beta", "0.5", "--json", "--policy", recommended_spec()]) == 0
    named = json.loads(capsys.readouterr().out)
    assert default["policy"] == NAME and default["error"] is None and default["attempts"] > 0
    assert default["batches"] == named["batches"] and default["replay_score"] == named["replay_score"]


def test_grow_runs_recommended_online_by_default(tmp_path: Path) -> None:
    out = tmp_path / "world"
    assert cli_main(["grow", "--task", "sum-difference", "--agent", "builtin", "--workers", "2", "--rounds", "3",
                     "--beta", "0.5", "--out", str(out), "--backend", "serial", "--quiet"]) == 0
    world = load_world(out)
    assert world.size > 1 and world.meta["policy"] == NAME


@pytest.mark.slow
def test_dream_and_rsi_take_recommended_as_the_incumbent(tmp_path: Path) -> None:
    dream = tmp_path / "dream"
    assert cli_main(["dream", "--history", "sd-fixed-s0", "--policy", NAME, "--developer", "builtin", "--revisions", "2",
                     "--betas", "0.5", "-j", "1", "--quiet", "--out", str(dream)]) == 0
    assert (dream / "revisions" / "1" / "0.py").is_file() and (dream / "chosen.py").is_file()
    rsi = tmp_path / "rsi"
    assert cli_main(["rsi", "--task", "sum-difference", "--policy", NAME, "--iterations", "1", "--revisions", "2",
                     "--workers", "2", "--rounds", "2", "--betas", "0.5", "-j", "1", "--backend", "serial", "--quiet",
                     "--out", str(rsi)]) == 0
    assert (rsi / "worlds" / "iter-1" / "world.json").is_file()
    assert json.loads((rsi / "worlds" / "iter-1" / "world.json").read_text())["policy"] == NAME


@pytest.mark.slow
def test_the_openevolve_bridge_runs_recommended(tmp_path: Path) -> None:
    pytest.importorskip("openevolve")
    from dream_gym.integrations.openevolve import BridgeConfig, run_openevolve

    out = tmp_path / "world"
    run_openevolve(BridgeConfig(task="circle-packing-26", out=out, policy=NAME, workers=2, iterations=6, seed=0))
    meta = json.loads((out / "world.json").read_text())
    assert meta["policy"] == NAME
    assert load_world(out).size > 1
