"""Built-in discovery tasks and their registry.

``TASKS`` maps a task name to a factory; :func:`get_task` builds one by name and
:func:`list_tasks` names the discovery tasks (``sleep-task``, a measurement tool, is available
by name but not listed).
"""

from __future__ import annotations

from collections.abc import Callable

from dream_gym.online.tasks.autocorrelation import Autocorrelation
from dream_gym.online.tasks.base import (
    HARD,
    REPAIRABLE,
    Check,
    Evaluation,
    HarnessTask,
    Limits,
    Task,
    env_digest,
)
from dream_gym.online.tasks.circle_packing import CirclePacking
from dream_gym.online.tasks.lasso_path import LassoPath
from dream_gym.online.tasks.sleep_task import SleepTask
from dream_gym.online.tasks.sum_difference import SumDifference

TASKS: dict[str, Callable[[], Task]] = {
    "circle-packing-26": lambda: CirclePacking(26),
    "circle-packing-32": lambda: CirclePacking(32),
    "sum-difference": SumDifference,
    "lasso-path": LassoPath,
    "autocorrelation": Autocorrelation,
    "sleep-task": SleepTask,
}
HIDDEN = frozenset({"sleep-task"})


def list_tasks(include_hidden: bool = False) -> list[str]:
    """Names of the registered tasks (measurement tools only with ``include_hidden``)."""
    return [name for name in TASKS if include_hidden or name not in HIDDEN]


def get_task(name: str, files_too: bool = False) -> Task:
    """Build the task called ``name``; a KeyError lists the known names (``files_too``: and says
    that a task may be given as its two files, for a caller that takes them)."""
    try:
        factory = TASKS[name]
    except KeyError:
        files = "; or a task of your own as its two files, initial_program.py,evaluator.py" if files_too else ""
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(sorted(list_tasks()))}{files}") from None
    return factory()


__all__ = ["TASKS", "HARD", "REPAIRABLE", "Check", "Evaluation", "HarnessTask", "Limits", "Task",
           "Autocorrelation", "CirclePacking", "LassoPath", "SleepTask", "SumDifference", "env_digest", "get_task", "list_tasks"]
