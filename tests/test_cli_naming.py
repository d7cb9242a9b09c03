"""One naming across the CLI: -W/--workers is W (attempts per round) in every command, -j/--jobs
is processes; replay, eval and demo replay at any W; old spellings stop with an error naming the
new one."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from worldgen import random_records, write_folder

from dream_gym.cli import build_parser, main

W_COMMANDS = {
    "replay": ["replay", "some-world"],
    "eval": ["eval", "-p", "greedy", "-w", "some-world"],
    "demo": ["demo"],
    "grow": ["grow", "--task", "sum-difference", "--out", "x"],
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_folder(tmp_path_factory.mktemp("naming") / "w3", random_records(random.Random(4), 60), workers=3)


@pytest.mark.parametrize("command", sorted(W_COMMANDS))
def test_minus_w_and_workers_mean_w_in_every_command(command: str) -> None:
    parser = build_parser()
    base = W_COMMANDS[command]
    assert parser.parse_args([*base, "-W", "3"]).workers == 3
    assert parser.parse_args([*base, "--workers", "5"]).workers == 5


@pytest.mark.parametrize("command", ["eval", "demo"])
def test_minus_j_and_jobs_mean_processes(command: str) -> None:
    parser = build_parser()
    base = W_COMMANDS[command]
    args = parser.parse_args([*base, "-j", "2"])
    assert args.jobs == 2 and args.workers is None
    assert parser.parse_args([*base, "--jobs", "3"]).jobs == 3


@pytest.mark.parametrize("old", ["--processes", "--n-jobs", "--num-workers", "--n-workers", "--procs"])
@pytest.mark.parametrize("command", ["eval", "demo"])
def test_old_spellings_name_the_new_option(command: str, old: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*W_COMMANDS[command], old, "2"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"{old} is not an option: use -j/--jobs" in err and "-W/--workers is W" in err


@pytest.mark.parametrize(("argv", "field", "spellings"), [
    (["eval", "-p", "greedy", "-w", "some-world", "--rank-by"], "rank_by", {"V": "V", "v": "V", "V2": "v2"}),
    (["dream", "-p", "greedy", "-M", "2", "--history", "h", "--out", "x", "--select"], "select", {"v": "V", "v2": "v2"}),
    (["train", "--out", "x", "--objective"], "objective", {"V": "v", "v": "v", "V2": "v2"}),
])
def test_the_score_is_named_in_either_case_in_every_command(argv: list[str], field: str, spellings: dict[str, str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """V is V in eval and dream and v in train: each takes both, and refuses other names listing its own."""
    parser = build_parser()
    for given, meant in spellings.items():
        assert getattr(parser.parse_args([*argv, given]), field) == meant
    with pytest.raises(SystemExit):
        parser.parse_args([*argv, "auc"])
    assert "invalid choice: 'auc'" in capsys.readouterr().err


def test_held_out_worlds_are_spelt_as_worlds_pack_spells_them(capsys: pytest.CaptureFixture[str]) -> None:
    """train's --held-out, as worlds pack's; its old --heldout still works and is not listed."""
    parser = build_parser("train")
    assert parser.parse_args(["train", "--out", "x", "--held-out", "a,b"]).heldout == "a,b"
    assert parser.parse_args(["train", "--out", "x", "--heldout", "c"]).heldout == "c"
    assert parser.parse_args(["train", "--out", "x"]).heldout == "heldout"
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--help"])
    shown = capsys.readouterr().out
    assert "--held-out WORLDS" in shown and "--heldout" not in shown


def test_eval_takes_quiet_as_grow_and_dream_do() -> None:
    parser = build_parser("eval")
    assert parser.parse_args([*W_COMMANDS["eval"], "--quiet"]).no_progress is True
    assert parser.parse_args([*W_COMMANDS["eval"], "--no-progress"]).no_progress is True
    assert parser.parse_args(W_COMMANDS["eval"]).no_progress is False


def test_training_script_refuses_eval_workers(capsys: pytest.CaptureFixture[str]) -> None:
    from agents.train_ppo import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--eval-workers", "2"])
    assert "use --eval-jobs" in capsys.readouterr().err
    assert parse_args(["--eval-jobs", "3"]).eval_jobs == 3


def test_replay_at_any_w(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for w in (1, 5):
        assert main(["replay", str(world), "--policy", "fixed", "-W", str(w), "--json"]) == 0
        record = json.loads(capsys.readouterr().out)
        assert max(len(b) for b in record["batches"]) == w  # fixed fills its rounds to W


def test_eval_replays_every_world_at_the_given_w(world: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    rows = {}
    for w in (None, 1, 6):
        out = tmp_path / f"w{w}.jsonl"
        argv = ["eval", "-p", "fixed", "-w", str(world), "--betas", "0.5", "-j", "1", "-o", str(out), "--no-progress"]
        assert main(argv + ([] if w is None else ["-W", str(w)])) == 0
        rows[w] = json.loads(out.read_text().splitlines()[0])
    capsys.readouterr()
    assert max(len(b) for b in rows[None]["batches"]) == 3  # the world's recorded W
    assert max(len(b) for b in rows[1]["batches"]) == 1 and rows[1]["workers"] == 1
    assert max(len(b) for b in rows[6]["batches"]) == 6 and rows[6]["workers"] == 6
    assert rows[6]["attempts"] > rows[1]["attempts"]  # W=6 opens more branches at once
    # the plots replay each episode at the W it was run with
    assert main(["plot", str(tmp_path / "w6.jsonl"), "--out", str(tmp_path / "figs")]) == 0


@pytest.mark.slow
def test_demo_replays_at_the_given_w(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    split = "ac-ucb-w4-s1,cp32-fixed-w8-s0"  # two held-out worlds, recorded at W = 4 and W = 8
    assert main(["demo", "-W", "2", "-j", "2", "--split", split, "--out", str(tmp_path / "demo")]) == 0
    assert "━" not in capsys.readouterr().err  # no progress bar drawn into stderr that is no terminal
    rows = [json.loads(line) for line in (tmp_path / "demo" / "results.jsonl").read_text().splitlines()]
    assert {r["world"] for r in rows} == set(split.split(",")) and all(r["workers"] == 2 and max((len(b) for b in r["batches"]), default=0) <= 2 for r in rows)
    from dream_gym.policies import POLICIES, RECORDERS

    # the exploration policies: the coverage recorder ranked last with a warning about itself
    assert {r["policy"] for r in rows} == set(POLICIES) - set(RECORDERS) and "coverage" in RECORDERS


@pytest.mark.parametrize(("args", "said"), [
    (["replay", "sd-fixed-s0", "-W", "0"], "argument -W/--workers: must be at least 1, got 0"),
    (["eval", "-p", "greedy", "-w", "sd-fixed-s0", "--max-rounds", "0"], "argument --max-rounds: must be at least 1, got 0"),
    (["grow", "--task", "sum-difference", "-W", "two", "--out", "x"], "argument -W/--workers: not a whole number: 'two'"),
    (["grow", "--task", "sum-difference", "-W", "0", "--out", "x"], "argument -W/--workers: must be at least 1, got 0"),
    (["deploy", "--system", "openevolve", "--task", "sum-difference", "--budget", "0", "--out", "x"],
     "argument --budget: must be at least 1, got 0"),
    (["openevolve", "run", "--task", "sum-difference", "--iterations", "0", "--out", "x"],
     "argument --iterations: must be at least 1, got 0"),
    (["worlds", "import", "runs", "--out", "x", "-W", "0"], "argument -W/--workers: must be at least 1, got 0"),
    (["worlds", "stats", "heldout", "-W", "0"], "argument -W/--workers: must be at least 1, got 0"),
    (["eval", "-p", "greedy", "-w", "sd-fixed-s0", "-j", "0"], "argument -j/--jobs: must be at least 1, got 0"),
    (["demo", "-j", "-1"], "argument -j/--jobs: must be at least 1, got -1"),
    (["dream", "--history", "sd-fixed-s0", "--policy", "greedy", "-M", "2", "-j", "0", "--out", "x"],
     "argument -j/--jobs: must be at least 1, got 0"),
    (["dream", "--history", "sd-fixed-s0", "--policy", "greedy", "-M", "2", "--memory-mb", "-1", "--out", "x"],
     "argument --memory-mb: must be at least 32 (a policy process needs about 24 MB to start), got -1"),
    (["grow", "--task", "sum-difference", "--max-attempts", "0", "--out", "x"],
     "argument --max-attempts: must be at least 1, got 0"),
    # it said "at least 1", and --memory-mb 1 then "at least 32"
    (["eval", "-p", "greedy", "-w", "sd-fixed-s0", "--memory-mb", "0"],
     "argument --memory-mb: must be at least 32 (a policy process needs about 24 MB to start), got 0"),
    # below what a policy process needs to start: its import failed with a traceback of the child's
    (["replay", "sd-fixed-s0", "--memory-mb", "10"],
     "argument --memory-mb: must be at least 32 (a policy process needs about 24 MB to start), got 10"),
    (["eval", "-p", "greedy", "-w", "sd-fixed-s0", "--max-attempts", "0"],
     "argument --max-attempts: must be at least 1, got 0"),
    (["grow", "--task", "sum-difference", "--rounds", "0", "--out", "x"], "argument --rounds: must be at least 1, got 0"),
    (["dream", "--history", "sd-fixed-s0", "--policy", "greedy", "-M", "0", "--out", "x"],
     "argument --revisions/-M: must be at least 1, got 0"),
    (["fidelity", "--task", "sum-difference", "-p", "greedy", "-n", "0", "--out", "x"],
     "argument --iterations/-n: must be at least 1, got 0"),
    # it crashed with a ZeroDivisionError after making --out
    (["openevolve", "run", "--task", "sum-difference", "--checkpoint-interval", "0", "--iterations", "2", "--out", "x"],
     "argument --checkpoint-interval: must be at least 1, got 0"),
    # values refused by the library's checks, which named its Python argument ("beta1 must be ...")
    (["eval", "-p", "greedy", "-w", "sd-fixed-s0", "--beta1", "-1"], "argument --beta1: must be a number >= 0, got -1"),
    (["eval", "-p", "greedy", "-w", "sd-fixed-s0", "--lam", "nan"], "argument --lam: must be a finite number, got nan"),
    (["worlds", "stats", "--beta2", "-0.5"], "argument --beta2: must be a number >= 0, got -0.5"),
    (["replay", "sd-fixed-s0", "--beta", "2"], "argument --beta: must be a number in [0, 1], got 2"),
    (["deploy", "--task", "sum-difference", "--beta", "-1", "--out", "x"],
     "argument --beta: must be a number in [0, 1], got -1"),
    (["dream", "--history", "sd-fixed-s0", "--policy", "greedy", "-M", "2", "--held-out-margin", "-1", "--out", "x"],
     "argument --held-out-margin: must be a number >= 0 (or inf: report only), got -1"),
    (["rsi", "--task", "sum-difference", "--policy", "greedy", "-M", "2", "--carry", "-1", "--out", "x"],
     "argument --carry: must be at least 0, got -1"),
    (["serve-agent", "--task", "sum-difference", "--port", "70000"],
     "argument --port: must be a port from 0 to 65535, got 70000"),
    (["eval", "-p", "greedy", "-w", "sd-fixed-s0", "--decision-timeout", "0"],
     "argument --decision-timeout: must be a number > 0, got 0"),
])
def test_a_count_below_one_is_refused_naming_the_option(args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    # the library's check said "workers must be an integer >= 1 or None": its Python argument
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2 and capsys.readouterr().err.rstrip().endswith(said)


def test_replay_and_grow_take_dash_p_as_eval_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "sd-fixed-s0", "-p", "greedy"]) == 0
    assert "policy greedy" in capsys.readouterr().out
    grow = next(a for a in build_parser("grow")._subparsers._group_actions[0].choices["grow"]._actions
                if a.dest == "policy")
    assert "-p" in grow.option_strings
