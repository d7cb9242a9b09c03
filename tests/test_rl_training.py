"""dream-gym train (dream_gym.training.trainer): the run folder, refusing another configuration, resuming
after kill -9 of a real process, and (slow) that short seeded runs learn: they beat `random` on a
tiny pool, and a beta-priced policy spends more at higher beta (one Pareto point per beta region)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from once import built_once

from dream_gym.evaluation.evaluate import resolve_worlds
from dream_gym.policies import make_policy
from dream_gym.policy import run_episode
from dream_gym.policy_files import load_policy
from dream_gym.training.trainer import TrainConfig, evaluate_policy, train

POOL = "sd-fixed-s0,lasso-greedy-s0,cp26-fixed-s0"  # shipped worlds


def tiny(tmp_path: Path, **changes) -> TrainConfig:
    options = {"worlds": POOL, "heldout": "sd-fixed-s1", "betas": "0,0.5,1", "timesteps": 1024, "seed": 0,
               "n_envs": 8, "n_steps": 64, "batch_size": 256, "n_epochs": 2, "eval_every": 512,
               "checkpoint_every": 512, "out": str(tmp_path / "run")}
    options.update(changes)
    return TrainConfig(**options)


@pytest.mark.parametrize(("algo", "arch"), [("maskable-ppo", "macro"), ("maskable-ppo", "node"), ("ppo", "node"),
                                           ("maskable-ppo", "options")])
@pytest.mark.slow
def test_a_run_folder_holds_model_checkpoint_evals_and_tensorboard_logs(tmp_path: Path, algo: str, arch: str) -> None:
    config = tiny(tmp_path, algo=algo, arch=arch, n_steps=64 if arch == "macro" else 32)
    summary = train(config, log=lambda _: None)
    out = Path(config.out)
    for name in ("config.json", "progress.json", "evals.jsonl", "model.zip", "summary.json"):
        assert (out / name).is_file(), name
    named = json.loads((out / "progress.json").read_text())["checkpoint"]  # the one checkpoint, named by progress
    assert [p.name for p in out.glob("checkpoint*.zip")] == [named] == [f"checkpoint-{summary['timesteps']}.zip"]
    assert list((out / "tb").glob("events.out.tfevents.*"))
    evals = [json.loads(line) for line in (out / "evals.jsonl").read_text().splitlines()]
    assert [e["timesteps"] for e in evals] == sorted({e["timesteps"] for e in evals}) and len(evals) >= 2
    assert {"train_v2", "train_mean_v", "heldout_v2", "heldout_mean_v", "heldout_limit_share"} <= set(evals[-1])
    assert summary["timesteps"] >= config.timesteps and summary["fps"] > 0
    assert summary["determinism"]["deterministic_algorithms"] is True
    policy = load_policy(str(out / "model.zip"))  # what eval, replay and grow take
    world = resolve_worlds("sd-fixed-s1")[0]
    assert run_episode(policy, world, workers=4, beta=0.5).error is None


@pytest.mark.slow
def test_a_run_folder_with_another_configuration_is_refused(tmp_path: Path) -> None:
    train(tiny(tmp_path, timesteps=512, eval_every=0), log=lambda _: None)
    with pytest.raises(ValueError, match="ent_coef"):
        train(tiny(tmp_path, timesteps=512, eval_every=0, ent_coef=0.5), log=lambda _: None)
    again = train(tiny(tmp_path, timesteps=1024, eval_every=0), log=lambda _: None)  # more steps: resumes
    assert again["timesteps"] >= 1024
    # the same run spelled otherwise: its folder by another path, betas 1.0 for 1, a shipped world by
    # its dataset's reference (each was "another configuration")
    moved = tmp_path / "moved"
    (tmp_path / "run").rename(moved)
    same = tiny(tmp_path, timesteps=1024, eval_every=0, out=f"{moved}/../moved/", betas="0,0.50,1.0",
                worlds=POOL.replace("sd-fixed-s0", "dream-gym/recorded-v0/sd-fixed-s0"))
    assert train(same, log=lambda _: None)["timesteps"] == again["timesteps"]  # as recorded: nothing trained
    with pytest.raises(ValueError, match=r"\(betas, worlds differ\)"):  # what they mean differs
        train(tiny(tmp_path, timesteps=1024, eval_every=0, out=str(moved), betas="0,1", worlds="sd-fixed-s0"),
              log=lambda _: None)


@pytest.mark.parametrize("options", [["--workers", "-2"], ["--worlds", "no-such-world"], ["--gamma", "1.5"],
                                     ["--n-epochs", "0"], ["--betas", "0,x"], ["--betas", "1.5"], ["--betas", ","],
                                     ["--held-out", POOL],  # held-out figures on the training pool
                                     ["--resume"]])  # nothing to continue
def test_arguments_are_refused_before_anything_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         options: list[str]) -> None:
    """A refused command leaves no run folder behind, so the corrected command is not refused
    for "another configuration" (it was before: the first command wrote config.json)."""
    from dream_gym.cli import main as cli_main

    out = tmp_path / "run"
    try:
        status = cli_main(["train", "--worlds", POOL, "--timesteps", "64", "--out", str(out), *options])
    except SystemExit as refused:  # a number out of its range: argparse names the option
        status = refused.code
    assert status == 2
    error = capsys.readouterr().err
    assert error.count("error:") == 1 and options[0].lstrip("-").replace("-", "_") in error.replace("-", "_")
    assert not out.exists()  # not even an empty folder (it was left by a check made after the lock)


def test_a_folder_that_holds_something_else_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """train wrote its summary.json, evals.jsonl and model.zip into any folder: a dream run's, a world's."""
    from dream_gym.cli import main as cli_main

    out = tmp_path / "dream"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    assert cli_main(["train", "--worlds", POOL, "--heldout", "", "--timesteps", "64", "--out", str(out)]) == 2
    assert "is not empty and holds no training run (config.json)" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["summary.json"]
    assert (out / "summary.json").read_text() == "{}"


@pytest.mark.slow
def test_training_resumes_after_kill_9(tmp_path: Path) -> None:
    """Kill a real `dream-gym train` process after its first checkpoint; the same command resumes
    from the checkpoint and finishes the run (steps, evaluations once each)."""
    out = tmp_path / "run"
    command = [sys.executable, "-m", "dream_gym", "train", "--arch", "node", "--worlds", POOL, "--heldout", "",
               "--betas", "0,1", "--timesteps", "3072", "--n-envs", "4", "--n-steps", "64", "--batch-size", "128",
               "--n-epochs", "1", "--checkpoint-every", "256", "--eval-every", "1024", "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and process.poll() is None:
            progress = out / "progress.json"
            if progress.is_file() and json.loads(progress.read_text())["timesteps"] >= 512:
                break
            time.sleep(0.2)
        assert process.poll() is None, "the run ended before it could be killed"
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    done_before = json.loads((out / "progress.json").read_text())["timesteps"]
    assert 512 <= done_before < 3072 and not (out / "model.zip").exists()
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert f"resuming {out} from step {done_before}" in finished.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["timesteps"] >= 3072
    steps = [json.loads(line)["timesteps"] for line in (out / "evals.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)), steps  # no evaluation twice
    assert load_policy(str(out / "model.zip")) is not None


@pytest.fixture()
def learned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder of a short seeded run (16k macro steps, no checkpoints or held-out worlds),
    trained once per session: the two learnability tests read the same run."""
    def learn(folder: Path) -> None:
        train(tiny(folder, timesteps=16_384, n_envs=16, n_steps=64, n_epochs=10, eval_every=0, checkpoint_every=0,
                   heldout=""), log=lambda _: None)

    return built_once(tmp_path_factory, "rl-training-learned", learn) / "run"


@pytest.mark.slow
def test_a_short_seeded_run_beats_random_on_a_tiny_pool(learned: Path) -> None:
    """Learnability: 16k macro steps on three shipped worlds beat `random` there on v2 and mean V
    (measured with price 2 -> 0.5, 2 shared cores: seeds 0-2 reach v2 0.76-0.87 and V 0.90-0.97; random 0.55 / 0.65)."""
    trained = json.loads((learned / "summary.json").read_text())["final"]
    worlds = resolve_worlds(POOL)
    baseline = evaluate_policy(make_policy("random"), worlds, [0, 0.5, 1], 4)
    assert trained["train_v2"] > baseline["v2"] + 0.05, (trained, baseline)
    assert trained["train_mean_v"] > baseline["mean_v"], (trained, baseline)


@pytest.mark.slow
def test_a_beta_priced_policy_spends_more_at_higher_beta(learned: Path) -> None:
    """The Pareto front has one point per beta region: trained with work priced by beta, the policy's
    work on held-out worlds rises from beta 0 to 0.5 to 1 (a V-trained policy's would not move)."""
    policy = load_policy(str(learned / "model.zip"))
    heldout = resolve_worlds("sd-fixed-s1,lasso-fixed-s1,cp32-fixed-s0")
    work = {beta: sum(run_episode(policy, w, workers=4, beta=beta).work for w in heldout) for beta in (0.0, 0.5, 1.0)}
    assert work[0.0] < work[0.5] < work[1.0], work


def test_the_training_pool_adds_prefixes_shorter_than_each_world(tmp_path: Path) -> None:
    from dream_gym.training.trainer import training_pool

    pool = training_pool(tiny(tmp_path, prefixes="50,100,150,1000"))  # the POOL worlds have 151 nodes
    names = [w.id for w in pool]
    worlds = POOL.split(",")
    assert names == worlds + [f"{w}@{n}" for w in worlds for n in (50, 100)]
    with pytest.raises(ValueError, match="prefixes must be a comma list of positive attempt counts"):
        tiny(tmp_path, prefixes="50,x")
    with pytest.raises(ValueError, match="prefixes must be a comma list"):
        tiny(tmp_path, prefixes="0")


def test_an_interrupt_before_the_first_checkpoint_says_nothing_is_kept(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C in a train before its first checkpoint said "what was finished is kept": nothing was,
    and the same command starts at step 0."""
    import argparse

    from dream_gym.cli import _run

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    args = argparse.Namespace(command="train", func=interrupted, out=str(tmp_path / "run"), resume=False,
                              continues=True, progress_file="progress.json")
    assert _run(args) == 130
    assert capsys.readouterr().err.strip() == (f"interrupted before anything was kept in {tmp_path / 'run'}: the same "
                                               "command starts again")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "progress.json").write_text("{}")  # a checkpoint: what it names is kept
    assert _run(args) == 130
    assert capsys.readouterr().err.strip().startswith(f"interrupted: what was finished is kept in {tmp_path / 'run'}")
