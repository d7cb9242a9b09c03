"""Without an optional extra, what needs it says so once, before any work: ``pip install
dream-gym`` holds the core only, and the demo's dreaming step needs ``dream`` (Optuna), a trained
model ``rl`` (torch, SB3). Each command runs as users run it, in an interpreter where the extra's
packages are really absent: its site-packages is a folder of links to this environment's, less
those packages."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RL = ("torch", "stable_baselines3", "sb3_contrib")
#: without torch, the rl extra's hint installs PyTorch's CPU build first (pip's default is CUDA's)
TORCH_CPU = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def install(extra: str) -> str:
    """The hint of a source checkout: pip given the checkout again, editable (``dream-gym`` on a
    package index is not what a checkout's user installed)."""
    return f"pip install -e '{REPO}[{extra}]'"


NEEDS_OPTUNA = f"the built-in developer needs optuna, an optional dependency: {install('dream')}"
NEEDS_LITELLM = f"LLM agents and developers need litellm, an optional dependency: {install('llm')}"
NEEDS_RAY = f"backend 'ray' needs the ray extra: {install('ray')}"
GROW = ["grow", "--task", "sum-difference", "-W", "2", "--rounds", "1"]
RSI = ["rsi", "--task", "sum-difference", "--policy", "greedy", "-T", "1", "-M", "2"]
DREAM = ["dream", "--history", "sd-ucb-w4-s1", "--policy", "greedy", "-M", "2"]


def interpreter_without(root: Path, *packages: str) -> tuple[list[str], dict[str, str]]:
    """A command prefix and environment for a Python that finds this checkout and every installed
    package but ``packages`` (and their dist-info)."""
    site = root / "site-packages"
    site.mkdir()
    hidden = {name.lower() for name in packages}
    for folder in dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib")):
        for entry in Path(folder).iterdir():
            top = entry.name.partition("-")[0].partition(".")[0].lower()
            if top in hidden or entry.suffix == ".pth" or (site / entry.name).exists():
                continue
            (site / entry.name).symlink_to(entry)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{site}", "COLUMNS": "80"}
    # -S: no site-packages of this environment (and no .pth file of it), only the folder above
    return [sys.executable, "-S", "-m", "dream_gym"], env


def test_the_hidden_packages_are_really_absent(tmp_path: Path) -> None:
    command, env = interpreter_without(tmp_path, "optuna")
    probe = "import importlib.util as u; print(u.find_spec('optuna') is None, u.find_spec('gymnasium') is None)"
    shown = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert shown.stdout.split() == ["True", "False"]


def test_the_demo_without_the_dream_extra_stops_before_its_evaluation(tmp_path: Path) -> None:
    pytest.importorskip("optuna")  # the control: with it, the demo's dreaming step runs (tests/test_demo.py)
    command, env = interpreter_without(tmp_path, "optuna")
    run = subprocess.run([*command, "demo"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == f"dream-gym demo: error: {NEEDS_OPTUNA}"
    assert run.stdout == "" and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("hidden", "argv", "message"), [
    (("optuna",), [*DREAM, "--developer", "builtin"], NEEDS_OPTUNA),
    (("litellm",), [*GROW, "--agent", "openai/any-model"], NEEDS_LITELLM),
    (("litellm",), [*DREAM, "--developer", "openai/any-model"], NEEDS_LITELLM),
    (("litellm",), [*RSI, "--agent", "openai/any-model"], NEEDS_LITELLM),
    (("ray",), [*GROW, "--backend", "ray"], NEEDS_RAY),
    (("ray",), [*RSI, "--backend", "ray"], NEEDS_RAY),
    (RL, ["train", "--worlds", "sd-ucb-w4-s1", "--timesteps", "64"],
     f"training needs the rl extra: {TORCH_CPU} && {install('rl')} (no module 'sb3_contrib')"),
])
def test_a_command_without_its_extra_says_which_and_writes_nothing(tmp_path: Path, hidden: tuple[str, ...],
                                                                    argv: list[str], message: str) -> None:
    """Each was a traceback, or an error after the run folder was made (so the corrected command
    was refused as "already holds a run")."""
    command, env = interpreter_without(tmp_path, *hidden)
    out = tmp_path / "run"
    run = subprocess.run([*command, *argv, "--out", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == f"dream-gym {argv[0]}: error: {message}"
    assert not out.exists()


def test_eval_of_a_model_without_the_rl_extra_fails_once_before_its_episodes(tmp_path: Path) -> None:
    command, env = interpreter_without(tmp_path, *RL)
    run = subprocess.run([*command, "eval", "-p", "greedy", "-p", "recommended", "-w", "sd-ucb-w4-s1",
                          "--betas", "0.5", "--no-progress", "--out", str(tmp_path / "r.jsonl")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == (
        "dream-gym eval: error: policy 'recommended (cv-node-v)' is a trained model, which needs the rl extra: "
        f"{TORCH_CPU} && {install('rl')} (no module 'sb3_contrib')")
    assert run.stdout == "" and not (tmp_path / "r.jsonl").exists()  # no episode ran
