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
    assert run.stderr.strip() == ("dream-gym demo: error: the built-in developer needs optuna, an optional "
                                  "dependency: pip install 'dream-gym[dream]'")
    assert run.stdout == "" and not (tmp_path / "out").exists()


def test_dream_without_the_dream_extra_writes_nothing(tmp_path: Path) -> None:
    command, env = interpreter_without(tmp_path, "optuna")
    run = subprocess.run([*command, "dream", "--history", "sd-ucb-w4-s1", "--policy", "greedy", "--developer",
                          "builtin", "-M", "2", "--out", str(tmp_path / "dream")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "pip install 'dream-gym[dream]'" in run.stderr and run.stderr.count("error:") == 1
    assert "Traceback" not in run.stderr and not (tmp_path / "dream").exists()


def test_eval_of_a_model_without_the_rl_extra_fails_once_before_its_episodes(tmp_path: Path) -> None:
    command, env = interpreter_without(tmp_path, "torch", "stable_baselines3", "sb3_contrib")
    run = subprocess.run([*command, "eval", "-p", "greedy", "-p", "recommended", "-w", "sd-ucb-w4-s1",
                          "--betas", "0.5", "--no-progress", "--out", str(tmp_path / "r.jsonl")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == (
        "dream-gym eval: error: policy 'recommended (cv-node-v)' is a trained model, which needs the rl extra: "
        "pip install 'dream-gym[rl]' (no module 'sb3_contrib')")
    assert run.stdout == "" and not (tmp_path / "r.jsonl").exists()  # no episode ran


@pytest.mark.parametrize("argv", [
    ["grow", "--task", "sum-difference", "--agent", "openai/any-model", "-W", "2", "--rounds", "1", "--out", "{out}"],
    ["dream", "--history", "sd-ucb-w4-s1", "--policy", "greedy", "--developer", "openai/any-model", "-M", "2",
     "--out", "{out}"],
    ["rsi", "--task", "sum-difference", "--agent", "openai/any-model", "--policy", "greedy", "-T", "1", "-M", "2",
     "--out", "{out}"],
])
def test_an_llm_agent_or_developer_without_the_llm_extra_writes_nothing(tmp_path: Path, argv: list[str]) -> None:
    command, env = interpreter_without(tmp_path, "litellm")
    out = tmp_path / "run"
    run = subprocess.run([*command, *(a.replace("{out}", str(out)) for a in argv)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == (f"dream-gym {argv[0]}: error: LLM agents and developers need litellm, an "
                                  "optional dependency: pip install 'dream-gym[llm]'")
    assert not out.exists()


def test_train_without_the_rl_extra_writes_nothing(tmp_path: Path) -> None:
    command, env = interpreter_without(tmp_path, "torch", "stable_baselines3", "sb3_contrib")
    out = tmp_path / "run"
    run = subprocess.run([*command, "train", "--worlds", "sd-ucb-w4-s1", "--timesteps", "64", "--out", str(out)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == ("dream-gym train: error: training needs the rl extra: pip install "
                                  "'dream-gym[rl]' (no module 'sb3_contrib')")
    assert not out.exists()


@pytest.mark.parametrize("argv", [
    ["grow", "--task", "sum-difference", "-W", "2", "--rounds", "1", "--backend", "ray", "--out", "{out}"],
    ["rsi", "--task", "sum-difference", "--policy", "greedy", "-T", "1", "-M", "2", "--backend", "ray", "--out", "{out}"],
])
def test_the_ray_backend_without_the_ray_extra_writes_nothing(tmp_path: Path, argv: list[str]) -> None:
    command, env = interpreter_without(tmp_path, "ray")
    out = tmp_path / "run"
    run = subprocess.run([*command, *(a.replace("{out}", str(out)) for a in argv)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == f"dream-gym {argv[0]}: error: backend 'ray' needs the ray extra: pip install 'dream-gym[ray]'"
    assert not out.exists()
