"""Commands import only what they use: listing, help and replay load no RL stack."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numba", "torch", "stable_baselines3", "sb3_contrib")
PROBE = ("import sys, contextlib, io\n"
         "from dream_gym.cli import main\n"
         "shown = io.StringIO()\n"
         "with contextlib.redirect_stdout(shown):\n"
         "    try:\n"
         "        main(sys.argv[1:])\n"
         "    except SystemExit:\n"
         "        pass\n"
         "print('--algo' in shown.getvalue())\n"
         f"print(sorted(name for name in {HEAVY!r} if name in sys.modules))\n")


@pytest.mark.parametrize("command", [["--help"], ["worlds", "list"], ["replay", "--help"], ["eval", "--help"]])
def test_light_commands_import_no_rl_stack(command: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_train_still_has_its_options() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, "train", "--help"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-2] == "True"  # its options, from the training config
