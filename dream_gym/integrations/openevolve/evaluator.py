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

from pathlib import Path
from typing import Any

from dream_gym.integrations import evaluator_files
from dream_gym.integrations.evaluator_files import (
    PROGRAM_MAX_BYTES,
    evaluate_code,
    evaluation_metrics,
    program_metrics,
)

MODULE = "dream_gym.integrations.openevolve.evaluator"
RESULT_MODULE = "openevolve.evaluation_result"  # where OpenEvolve's EvaluationResult lives
EVALUATOR_TEMPLATE = evaluator_files.function_evaluator("OpenEvolve", MODULE)
FILES_TEMPLATE = evaluator_files.files_function_evaluator("OpenEvolve", MODULE)
FILES_FUNCTION = '''

def {name}(program_path, **evaluator_args):
    return files_evaluate(TASK, {name!r}, program_path, evaluator_args)
'''


def evaluate_program(task_name: str, program_path: str) -> Any:
    """OpenEvolve's ``evaluate(program_path)``: an ``EvaluationResult`` (metrics with
    ``combined_score``, and artifacts) when OpenEvolve is installed, else the metrics dict. The
    program file is read as data (a regular file of at most :data:`PROGRAM_MAX_BYTES`); anything
    else is an invalid program, with the reason."""
    return evaluator_files.system_result(RESULT_MODULE, *program_metrics(task_name, program_path))


def write_task_files(task_name: str, folder: str | Path) -> tuple[Path, Path]:
    """Write ``initial_program.py`` (the task's baseline) and ``evaluator.py`` into ``folder``."""
    return evaluator_files.write_task_files(task_name, folder, initial_name="initial_program.py",
                                            evaluator_name="evaluator.py", template=EVALUATOR_TEMPLATE)


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
    return evaluator_files.system_result(RESULT_MODULE, evaluation.metrics, evaluation.artifacts)


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
# every program as it is made, in <output>/evolution_trace.jsonl: `dream-gym worlds import` reads
# it (OpenEvolve's checkpoints come only every checkpoint_interval iterations, 100 by default)
evolution_trace:
  enabled: true
  format: jsonl
  include_code: true
  include_prompts: false
"""


def write_config(path: str | Path, *, api_base: str, workers: int = 2) -> Path:
    """An OpenEvolve ``config.yaml`` whose model is the agent server at ``api_base``."""
    path = Path(path)
    path.write_text(CONFIG_TEMPLATE.format(api_base=api_base, workers=workers), encoding="utf-8")
    return path


__all__ = ["EVALUATOR_TEMPLATE", "PROGRAM_MAX_BYTES", "evaluate_code", "evaluate_program", "evaluation_metrics",
           "files_evaluate", "write_config", "write_files_evaluator", "write_task_files"]
