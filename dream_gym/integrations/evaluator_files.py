"""What the bridges' evaluator files share: reading the program a system hands over, scoring it on
a built-in task, and writing a built-in task's files.

OpenEvolve and SkyDiscover call ``evaluate(program_path)`` of an evaluator file and take a dict of
metrics or their own ``EvaluationResult``; ShinkaEvolve runs an evaluation script. Every bridge
reads the program file as data (:func:`read_program`: a regular file of at most
:data:`PROGRAM_MAX_BYTES`, no link followed; anything else is an invalid program, with the reason)
and, for a built-in task, runs it through the task's own evaluator (:func:`evaluate_builtin`: the
isolated harness, the sandbox, time and memory limits; the candidate never reports its own score).
:func:`evaluation_metrics` is the metrics of one evaluation in the form OpenEvolve and SkyDiscover
read (``combined_score`` higher-is-better, ``error`` when invalid); :func:`function_evaluator` and
:func:`files_function_evaluator` are the texts of the evaluator files the two systems get.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.limits import LeftoverError, read_leftover, size_text
from dream_gym.infrastructure.work_folders import work_folder
from dream_gym.online.fitness import combined_score

#: Bytes of a program file a system hands over (OpenEvolve's ``max_code_length`` counts
#: characters: 100,000 in the config dream-gym writes, at most 400 KB of UTF-8).
PROGRAM_MAX_BYTES = 1 << 20

FUNCTION_EVALUATOR = '''"""{system} evaluator for the dream_gym task {{task!r}} (written by dream-gym).

Runs each candidate through dream_gym's own evaluator of the task (isolated, sandboxed,
time- and memory-limited); combined_score is higher-is-better.
"""

from {module} import evaluate_program

TASK = {{task!r}}


def evaluate(program_path):
    return evaluate_program(TASK, program_path)
'''

FILES_FUNCTION_EVALUATOR = '''"""{system} evaluator written by dream-gym: the task's evaluator, run in dream_gym's sandbox.

The task's evaluator: {{evaluator}}
Each call runs the task's own function of the same name on the program in dream_gym's sandbox (a fresh
workspace; the evaluator's folder and the --read folders readable; no network, no new process), with
`random` and `numpy.random` seeded from the run's seed and the program's text, and returns what it
returned (dream_gym.integrations.files_task).
"""

from {module} import files_evaluate

TASK = {{settings!r}}
'''


class ProgramFileError(ValueError):
    """The program file is not a regular file of at most :data:`PROGRAM_MAX_BYTES` (the message
    says what it is: ``program file is a FIFO, not a regular file``)."""


def read_program(program_path: str | os.PathLike[str]) -> bytes:
    """The bytes of the program file a system hands over, read as data; :class:`ProgramFileError`
    naming what is there instead (``FileNotFoundError`` when nothing is)."""
    try:
        return read_leftover(Path(program_path), PROGRAM_MAX_BYTES)
    except LeftoverError as exc:
        limit = f" ({size_text(PROGRAM_MAX_BYTES)} is the limit)" if exc.problem.startswith("is larger") else ""
        raise ProgramFileError(f"program file {exc.problem}{limit}") from None


def numeric_metrics(metrics: Mapping[Any, Any] | None, *, leave_out: tuple[str, ...] = ()) -> dict[str, float]:
    """The finite numbers of ``metrics`` (booleans are not numbers), as floats."""
    return {str(name): float(value) for name, value in (metrics or {}).items()
            if str(name) not in leave_out and isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value)}


def evaluate_builtin(task_name: str, code: str, folder_prefix: str) -> tuple[Any, Any, Path]:
    """(task, ``Evaluation``, the work folder it ran in, removed by now) of a candidate's source on
    the built-in task ``task_name``, evaluated by the task's own evaluator in a fresh work folder."""
    from dream_gym.online.tasks import get_task

    task = get_task(task_name)
    workdir = work_folder(folder_prefix)
    try:
        evaluation = task.evaluate(code, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return task, evaluation, workdir


def evaluation_metrics(task: Any, evaluation: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """(metrics, artifacts) of one dream_gym ``Evaluation`` in OpenEvolve's and SkyDiscover's form:
    the task's numeric metrics; ``score`` and ``combined_score`` (higher is better) when valid,
    else ``combined_score`` 0.0 and ``error``; artifacts ``diagnostics``, and ``error`` and
    ``fail_class`` when invalid."""
    metrics: dict[str, Any] = dict(numeric_metrics(evaluation.metrics))
    artifacts = {"diagnostics": str(evaluation.diagnostics or "")}
    if evaluation.valid and evaluation.score is not None:
        metrics["score"] = float(evaluation.score)
        metrics["combined_score"] = combined_score(float(evaluation.score), task.direction)
    else:
        metrics["combined_score"] = 0.0
        metrics["error"] = str(evaluation.error or "invalid")
        artifacts["error"] = str(evaluation.error or "invalid")
        artifacts["fail_class"] = str(evaluation.fail_class or "repairable")
    return metrics, artifacts


def evaluate_code(task_name: str, code: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(metrics, artifacts) of a candidate's source on a built-in task (:func:`evaluation_metrics`)."""
    task, evaluation, _ = evaluate_builtin(task_name, code, "openevolve_eval")
    return evaluation_metrics(task, evaluation)


def program_metrics(task_name: str, program_path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(metrics, artifacts) of the program file at ``program_path`` on a built-in task; a file
    that is not a program (:func:`read_program`) is an invalid program, with the reason."""
    try:
        code = read_program(program_path).decode("utf-8", errors="replace")
    except ProgramFileError as exc:
        error = str(exc)
        return {"combined_score": 0.0, "error": error}, {"diagnostics": error, "error": error,
                                                         "fail_class": "repairable"}
    return evaluate_code(task_name, code)


def system_result(result_module: str, metrics: dict[str, Any], artifacts: Mapping[str, str]) -> Any:
    """The system's ``EvaluationResult`` (from ``result_module``) of metrics and artifacts when the
    system is installed; else the plain dict of metrics (any other caller)."""
    try:
        result_class = importlib.import_module(result_module).EvaluationResult
    except ImportError:
        return metrics
    return result_class(metrics=metrics, artifacts=dict(artifacts))


def function_evaluator(system: str, module: str) -> str:
    """The template (a ``task`` field) of the evaluator file of a built-in task for ``system``,
    whose ``evaluate`` calls ``module``'s ``evaluate_program``."""
    return FUNCTION_EVALUATOR.format(system=system, module=module)


def files_function_evaluator(system: str, module: str) -> str:
    """The template (``evaluator`` and ``settings`` fields) of the evaluator file of a task given
    as files for ``system``, whose functions call ``module``'s ``files_evaluate``."""
    return FILES_FUNCTION_EVALUATOR.format(system=system, module=module)


def write_task_files(task_name: str, folder: str | os.PathLike[str], *, initial_name: str, evaluator_name: str,
                     template: str, program: Callable[[str], str] = str) -> tuple[Path, Path]:
    """Write a built-in task's baseline (``program`` of its text) as ``initial_name`` and its
    evaluator file (``template`` with the task's name) as ``evaluator_name`` into ``folder``."""
    from dream_gym.online.tasks import get_task

    task = get_task(task_name)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    initial, evaluator = folder / initial_name, folder / evaluator_name
    initial.write_text(program(task.initial_program()), encoding="utf-8")
    evaluator.write_text(template.format(task=task_name), encoding="utf-8")
    return initial, evaluator


__all__ = ["PROGRAM_MAX_BYTES", "ProgramFileError", "evaluate_builtin", "evaluate_code", "evaluation_metrics",
           "files_function_evaluator", "function_evaluator", "numeric_metrics", "program_metrics", "read_program",
           "system_result", "write_task_files"]
