"""The options of eval, replay and dream that bound how policies run. ``--decision-timeout``:
how long a policy file may take for one decision before its process is killed and the episode
records the timeout; it reaches the isolated policy. ``-j``: processes. A value no run can use is
refused before any episode, and before a run folder is made."""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.mark.parametrize(("options", "message"), [
    (["--decision-timeout", "0"], "--decision-timeout must be > 0 seconds, got 0.0"),
    (["--decision-timeout", "90"], "--decision-timeout 90 s is not below --task-timeout 60 s, the watchdog that "
                                   "ends a task making no decision: raise --task-timeout"),
])
def test_a_timeout_no_run_can_use_is_refused_before_any_episode(tmp_path: Path, options: list[str],
                                                                 message: str) -> None:
    out = tmp_path / "r.jsonl"
    run = dream_gym("eval", "-p", "greedy", "-w", WORLD, "--betas", "0.5", "--no-progress", "--out", str(out), *options)
    assert run.returncode == 2 and run.stderr.strip() == f"dream-gym eval: error: {message}"
    assert not out.exists()


def test_dream_refuses_a_zero_timeout_before_its_run_folder(tmp_path: Path) -> None:
    out = tmp_path / "dream"
    run = dream_gym("dream", "--history", WORLD, "--policy", "greedy", "--developer", "builtin", "-M", "2",
                    "--decision-timeout", "0", "--out", str(out))
    assert run.returncode == 2 and "the decision timeout" in run.stderr and run.stderr.count("error:") == 1
    assert not out.exists()  # every episode failed on it before, after the folder was made


@pytest.mark.parametrize("command", [
    ["eval", "-p", "greedy", "-w", WORLD, "--betas", "0.5", "--no-progress", "--out", "{out}"],
    ["dream", "--history", WORLD, "--policy", "greedy", "--developer", "builtin", "-M", "2", "--out", "{out}"],
])
def test_zero_jobs_is_refused_not_read_as_one(tmp_path: Path, command: list[str]) -> None:
    out = tmp_path / "out"
    run = dream_gym(*(part.replace("{out}", str(out)) for part in command), "-j", "0")
    assert run.returncode == 2
    assert run.stderr.strip() == f"dream-gym {command[0]}: error: jobs must be >= 1 (or None: the CPU count), got 0"
    assert not out.exists()
