"""dream_gym's task evaluators as SkyDiscover evaluator files.

SkyDiscover imports an evaluator file and calls ``evaluate(program_path)`` (in a thread of its
own process); it takes a dict of metrics or its own ``EvaluationResult`` (metrics plus artifacts,
which its prompts show under the parent's code as ``## <key>`` sections). :func:`evaluate_program`
runs the candidate through the task's own evaluator (``Task.evaluate``: the isolated harness, the
sandbox, time and memory limits; the candidate never reports its own score), with the metrics of
the OpenEvolve evaluator files (:mod:`dream_gym.integrations.evaluator_files`):

* ``combined_score``: the task's score when it maximises, ``1 / score`` when it minimises, so it is
  higher-is-better and positive; 0.0 for an invalid candidate, which also gets ``error`` (the
  evaluator's reason), the pair SkyDiscover's loop reads as a failed evaluation;
* ``score``: the task's own score (its direction), only when valid; the task's numeric metrics;
* artifacts ``diagnostics`` (what was measured or what failed, written for the agent),
  ``error`` and ``fail_class`` (``repairable`` | ``hard``).

:func:`write_task_files` writes ``initial_program.py`` and ``evaluator.py`` for a built-in task,
the two files ``skydiscover-run`` takes. For a task given as files, :func:`write_files_evaluator`
writes the evaluator SkyDiscover gets: the task's own, run in dream_gym's sandbox
(:mod:`dream_gym.integrations.files_task`), where SkyDiscover would run it in a thread of its own
process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dream_gym.integrations import evaluator_files
from dream_gym.integrations.evaluator_files import PROGRAM_MAX_BYTES, program_metrics

MODULE = "dream_gym.integrations.skydiscover.evaluator"
RESULT_MODULE = "skydiscover.evaluation.evaluation_result"  # where SkyDiscover's EvaluationResult lives
EVALUATOR_TEMPLATE = evaluator_files.function_evaluator("SkyDiscover", MODULE)
FILES_TEMPLATE = evaluator_files.files_function_evaluator("SkyDiscover", MODULE)
FILES_FUNCTION = '''

def {name}(program_path):
    return files_evaluate(TASK, {name!r}, program_path)
'''


def evaluate_program(task_name: str, program_path: str) -> Any:
    """SkyDiscover's ``evaluate(program_path)``: its ``EvaluationResult`` (metrics with
    ``combined_score``, and artifacts) when SkyDiscover is installed, else the metrics dict. The
    program file is read as data (a regular file of at most :data:`PROGRAM_MAX_BYTES`); anything
    else is an invalid program, with the reason."""
    return evaluator_files.system_result(RESULT_MODULE, *program_metrics(task_name, program_path))


def write_files_evaluator(task: Any, folder: str | Path) -> Path:
    """Write ``folder/evaluator.py``: SkyDiscover's evaluator of a task given as files
    (:class:`~dream_gym.integrations.files_task.FilesTask`), whose ``evaluate`` (and the
    ``evaluate_stage1/2/3`` the task's evaluator defines, for SkyDiscover's cascade) run the task's
    own function in dream_gym's sandbox. The task's file is not changed."""
    return task.write_wrapper(Path(folder) / "evaluator.py", FILES_TEMPLATE, FILES_FUNCTION)


def files_evaluate(settings: dict[str, Any], function: str, program_path: str) -> Any:
    """One call of the task's ``function`` on ``program_path`` in the sandbox: SkyDiscover's
    ``EvaluationResult`` (the evaluator's metrics and artifacts, or ``combined_score`` 0 and
    ``error`` when the evaluation failed), or the metrics dict when SkyDiscover is not installed."""
    from dream_gym.integrations.files_task import FilesTask

    evaluation = FilesTask.from_settings(settings).evaluate(program_path, function)
    return evaluator_files.system_result(RESULT_MODULE, evaluation.metrics, evaluation.artifacts)


def write_task_files(task_name: str, folder: str | Path) -> tuple[Path, Path]:
    """Write ``initial_program.py`` (the task's baseline) and ``evaluator.py`` into ``folder``."""
    return evaluator_files.write_task_files(task_name, folder, initial_name="initial_program.py",
                                            evaluator_name="evaluator.py", template=EVALUATOR_TEMPLATE)


__all__ = ["EVALUATOR_TEMPLATE", "PROGRAM_MAX_BYTES", "evaluate_program", "files_evaluate", "write_files_evaluator",
           "write_task_files"]
