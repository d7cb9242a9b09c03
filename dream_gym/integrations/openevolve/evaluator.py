"""dream_gym's task evaluators as OpenEvolve evaluator files.

OpenEvolve imports an evaluator file and calls ``evaluate(program_path)``; it expects a dict of
metrics with ``combined_score`` (higher is better) or an ``EvaluationResult`` (metrics plus
artifacts, which its prompt shows under "Last Execution Output"). :func:`evaluate_program` runs
the candidate through the task's own evaluator (``Task.evaluate``: the isolated harness, the
sandbox, time and memory limits; the candidate never reports its own score) and returns:

* ``combined_score``: the task's score when it maximises, ``1 / score`` when it minimises (every
  built-in minimised score is positive: seconds, an autocorrelation constant), so it is higher-is-
  better and positive; 0.0 for an invalid candidate, which also gets ``error`` (the evaluator's
  reason), as OpenEvolve's own examples do;
* ``score``: the task's own score (its direction), only when valid; the task's numeric metrics;
* artifacts ``diagnostics`` (what was measured or what failed, written for the agent),
  ``error`` and ``fail_class`` (``repairable`` | ``hard``).

:func:`write_task_files` writes ``initial_program.py`` and ``evaluator.py`` for a built-in task,
the two files ``openevolve-run`` takes. For a task given as files, :func:`write_files_evaluator`
writes the evaluator OpenEvolve gets: the task's own, run in dream_gym's sandbox
(:mod:`dream_gym.integrations.files_task`).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.limits import LeftoverError, read_leftover, size_text
from dream_gym.infrastructure.work_folders import work_folder
from dream_gym.online.fitness import combined_score

#: Bytes of a program file OpenEvolve hands over (its ``max_code_length`` counts characters:
#: 100,000 in the config written here, at most 400 KB of UTF-8).
PROGRAM_MAX_BYTES = 1 << 20

EVALUATOR_TEMPLATE = '''"""OpenEvolve evaluator for the dream_gym task {task!r} (written by dream-gym).

Runs each candidate through dream_gym's own evaluator of the task (isolated, sandboxed,
time- and memory-limited); combined_score is higher-is-better.
"""

from dream_gym.integrations.openevolve.evaluator import evaluate_program

TASK = {task!r}


def evaluate(program_path):
    return evaluate_program(TASK, program_path)
'''


def evaluation_metrics(task: Any, evaluation: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """(metrics, artifacts) of one dream_gym ``Evaluation`` in OpenEvolve's form."""
    metrics: dict[str, Any] = {}
    for name, value in (evaluation.metrics or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            metrics[str(name)] = float(value)
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
    """Evaluate a candidate's source with the task's evaluator, in a fresh work folder."""
    from dream_gym.online.tasks import get_task

    task = get_task(task_name)
    workdir = work_folder("openevolve_eval")
    try:
        evaluation = task.evaluate(code, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return evaluation_metrics(task, evaluation)


def evaluate_program(task_name: str, program_path: str) -> Any:
    """OpenEvolve's ``evaluate(program_path)``: an ``EvaluationResult`` (metrics with
    ``combined_score``, and artifacts) when OpenEvolve is installed, else the metrics dict. The
    program file is read as data (a regular file of at most :data:`PROGRAM_MAX_BYTES`); anything
    else is an invalid program, with the reason."""
    try:
        code = read_leftover(Path(program_path), PROGRAM_MAX_BYTES).decode("utf-8", errors="replace")
    except LeftoverError as exc:
        problem = exc.problem + (f" ({size_text(PROGRAM_MAX_BYTES)} is the limit)" if exc.problem.startswith("is larger") else "")
        error = f"program file {problem}"
        metrics: dict[str, Any] = {"combined_score": 0.0, "error": error}
        artifacts = {"diagnostics": error, "error": error, "fail_class": "repairable"}
    else:
        metrics, artifacts = evaluate_code(task_name, code)
    try:
        from openevolve.evaluation_result import EvaluationResult
    except ImportError:  # any other caller: the plain dict of metrics
        return metrics
    return EvaluationResult(metrics=metrics, artifacts=dict(artifacts))


def write_task_files(task_name: str, folder: str | Path) -> tuple[Path, Path]:
    """Write ``initial_program.py`` (the task's baseline) and ``evaluator.py`` into ``folder``."""
    from dream_gym.online.tasks import get_task

    task = get_task(task_name)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    initial = folder / "initial_program.py"
    evaluator = folder / "evaluator.py"
    initial.write_text(task.initial_program(), encoding="utf-8")
    evaluator.write_text(EVALUATOR_TEMPLATE.format(task=task_name), encoding="utf-8")
    return initial, evaluator


FILES_TEMPLATE = '''"""OpenEvolve evaluator written by dream-gym: the task's evaluator, run in dream_gym's sandbox.

The task's evaluator: {evaluator}
Each call runs the task's own function of the same name on the program in dream_gym's sandbox (a fresh
workspace; the evaluator's folder and the --read folders readable; no network, no new process), with
`random` and `numpy.random` seeded from the run's seed and the program's text, and returns what it
returned (dream_gym.integrations.files_task).
"""

from dream_gym.integrations.openevolve.evaluator import files_evaluate

TASK = {settings!r}
'''

FILES_FUNCTION = '''

def {name}(program_path, **evaluator_args):
    return files_evaluate(TASK, {name!r}, program_path, evaluator_args)
'''


def write_files_evaluator(task: Any, folder: str | Path) -> Path:
    """Write ``folder/evaluator.py``: OpenEvolve's evaluator of a task given as files
    (:class:`~dream_gym.integrations.files_task.FilesTask`), whose ``evaluate`` (and the
    ``evaluate_stage1/2/3`` the task's evaluator defines, for OpenEvolve's cascade) run the task's
    own function in dream_gym's sandbox. The task's file is not changed."""
    return task.write_wrapper(Path(folder) / "evaluator.py", FILES_TEMPLATE, FILES_FUNCTION)


def files_evaluate(settings: dict[str, Any], function: str, program_path: str, kwargs: dict[str, Any]) -> Any:
    """One call of the task's ``function`` on ``program_path`` in the sandbox: an OpenEvolve
    ``EvaluationResult`` (its metrics and artifacts, or ``combined_score`` 0 and ``error`` when the
    evaluation failed), or the metrics dict when OpenEvolve is not installed."""
    from dream_gym.integrations.files_task import FilesTask

    evaluation = FilesTask.from_settings(settings).evaluate(program_path, function, kwargs)
    try:
        from openevolve.evaluation_result import EvaluationResult
    except ImportError:  # any other caller: the plain dict of metrics
        return evaluation.metrics
    return EvaluationResult(metrics=evaluation.metrics, artifacts=dict(evaluation.artifacts))


CONFIG_TEMPLATE = """# OpenEvolve config for a dream_gym task served by `dream-gym serve-agent` (written by dream-gym)
max_iterations: 20
random_seed: 0
max_code_length: 100000
llm:
  api_base: {api_base}
  api_key: sk-no-key-required
  models:
    - name: dream-gym-builtin
      weight: 1.0
evaluator:
  parallel_evaluations: {workers}
  cascade_evaluation: false
"""


def write_config(path: str | Path, *, api_base: str, workers: int = 2) -> Path:
    """An OpenEvolve ``config.yaml`` whose model is the agent server at ``api_base``."""
    path = Path(path)
    path.write_text(CONFIG_TEMPLATE.format(api_base=api_base, workers=workers), encoding="utf-8")
    return path
