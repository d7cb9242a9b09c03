"""The options of eval, replay and dream that bound how policies run. ``--decision-timeout``:
how long a policy file may take for one decision before its process is killed and the episode
records the timeout; it reaches the isolated policy. ``-j``: processes. A value no run can use is
refused before any episode, and before a run folder is made."""

from __future__ import annotations

from pathlib import Path

import pytest

from dream_gym.cli import main as cli_main
from tests.test_cli_truth import dream_gym

WORLD = "sd-ucb-w4-s1"
SLOW = "import time\n\n\ndef act(view):\n    time.sleep(1.5)\n    return []\n"


@pytest.mark.parametrize("command", ["eval", "replay"])
def test_the_timeout_reaches_the_policy_file(tmp_path: Path, command: str) -> None:
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW)
    where = ["-w", WORLD, "--betas", "0.5", "--no-progress"] if command == "eval" else [WORLD]
    policy = ["-p" if command == "eval" else "--policy", str(slow)]
    cut = dream_gym(command, *policy, *where, "--decision-timeout", "0.5")
    assert cut.returncode == 1
    assert "PolicyTimeout: policy slow: act() took longer than the decision timeout of 0.5s" in cut.stderr
    waited = dream_gym(command, *policy, *where, "--decision-timeout", "20")  # the same decision, given time
    assert waited.returncode == 0, waited.stderr


EVAL = ["eval", "-p", "greedy", "-w", WORLD, "--betas", "0.5", "--no-progress", "--out", "{out}"]
DREAM = ["dream", "--history", WORLD, "--policy", "greedy", "--developer", "builtin", "-M", "2", "--out", "{out}"]


@pytest.mark.parametrize(("command", "options", "message"), [
    # with a policy file, whose decisions the decision timeout bounds (a built-in's it does not)
    (EVAL, ["--decision-timeout", "90", "-p", "{file}"], "--decision-timeout 90 s is not below --task-timeout 60 s, "
                                                         "the watchdog that ends a task making no decision: raise "
                                                         "--task-timeout"),
    # (--decision-timeout 0, with which dream ran the step, every episode timing out at 0 s, after
    # making its folder; --memory-mb and -j below 1; -j 0 once read as one process: refused by
    # argparse, tests/test_cli_naming.py)
])
def test_a_value_no_run_can_use_is_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                command: list[str], options: list[str],
                                                                message: str) -> None:
    out, policy_file = tmp_path / "out", tmp_path / "mine.py"
    policy_file.write_text(SLOW)
    filled = [part.replace("{out}", str(out)).replace("{file}", str(policy_file)) for part in [*command, *options]]
    assert cli_main(filled) == 2  # refused in this process
    assert capsys.readouterr().err.strip() == f"dream-gym {command[0]}: error: {message}"
    assert not out.exists()


def test_results_already_in_out_are_kept_unless_force_replaces_them(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``eval --out`` replaced an earlier evaluation's results without a word (220 episodes became
    11); it now refuses, before any episode, and ``--force`` replaces them."""
    out = tmp_path / "results.jsonl"
    first = ["eval", "-p", "greedy", "-p", "random", "-w", WORLD, "--betas", "0.5", "--no-progress", "--out", str(out)]
    assert cli_main(first) == 0
    kept = out.read_bytes()
    assert len(kept.splitlines()) == 2
    capsys.readouterr()
    again = ["eval", "-p", "greedy", "-w", WORLD, "--betas", "0.5", "--no-progress", "--out", str(out)]
    assert cli_main(again) == 2
    assert "holds the results of an earlier evaluation" in capsys.readouterr().err
    assert out.read_bytes() == kept
    assert cli_main([*again, "--force"]) == 0
    assert len(out.read_bytes().splitlines()) == 1
