"""Use a dream_gym exploration policy inside OpenEvolve 0.4 (extra ``openevolve``).

``run_openevolve(BridgeConfig(...))`` (``dream-gym openevolve run``) runs OpenEvolve with the
parents chosen by any policy ``dream-gym eval`` takes (a built-in, a policy file, run isolated
as always, a shipped or trained model, a dreamed ``chosen.py``) and records the run as a world
folder as it goes. How the hook works: :mod:`.bridge`. The evaluator files of the built-in
tasks: :mod:`.evaluator`. Supported OpenEvolve versions: :data:`SUPPORTED_OPENEVOLVE`.
"""

from __future__ import annotations

from dream_gym.integrations.openevolve.evaluator import evaluate_program, write_task_files
from dream_gym.integrations.openevolve.run import (
    NATIVE_POLICY,
    SUPPORTED_OPENEVOLVE,
    BridgeConfig,
    BridgeResult,
    check_openevolve,
    run_openevolve,
)
from dream_gym.online.fitness import combined_score, task_score

__all__ = [
    "NATIVE_POLICY", "SUPPORTED_OPENEVOLVE", "BridgeConfig", "BridgeResult", "check_openevolve",
    "combined_score", "evaluate_program", "run_openevolve", "task_score", "write_task_files",
]
