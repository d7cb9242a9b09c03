"""dream_gym's built-in tasks as ShinkaEvolve task files (``initial.py`` and ``evaluate.py``).

ShinkaEvolve edits only the text between ``EVOLVE-BLOCK-START`` and ``EVOLVE-BLOCK-END``
comment lines, and evaluates each program by running ``python evaluate.py --program_path
gen_<g>/main.py --results_dir gen_<g>/results``, which must write ``correct.json``
(``{"correct": bool, "error": str | null}``) and ``metrics.json`` (``combined_score``,
``public``, ``private``, ``text_feedback``) there (``shinka.core.wrap_eval.save_json_results``).

:func:`write_task_files` writes a built-in task's baseline as ``initial.py``, the whole program
between the two markers (every line of it may evolve), and an ``evaluate.py`` that calls
:func:`main`: the candidate runs through the task's own evaluator (``Task.evaluate``: the
isolated harness, the sandbox, time and memory limits; the candidate never reports its own
score). The program file is read as data (a regular file of bounded size). What it writes:

* ``correct``: the task's verdict; ``error``: the evaluator's reason for an invalid candidate;
* ``combined_score``: the task's score when it maximises, ``1 / score`` when it minimises (every
  built-in minimised score is positive), so higher is better; 0.0 for an invalid candidate;
* ``public``: the task's ``score`` (its own direction, valid candidates only) and numeric
  metrics; ``text_feedback``: the error and the diagnostics, as ``### error`` and
  ``### diagnostics`` sections with fenced bodies (shown in ShinkaEvolve's prompts with
  ``use_text_feedback``); the same text is printed on stdout (stderr for an error), which its
  fix prompt shows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dream_gym.integrations import evaluator_files
from dream_gym.integrations.evaluator_files import (
    PROGRAM_MAX_BYTES,
    ProgramFileError,
    numeric_metrics,
    read_program,
)
from dream_gym.online.fitness import combined_score

START_MARKER = "# EVOLVE-BLOCK-START"
END_MARKER = "# EVOLVE-BLOCK-END"
INITIAL_FILE = "initial.py"
EVALUATE_FILE = "evaluate.py"
WORKDIR = "<workdir>"  # stands for the evaluation's work folder in error texts

EVALUATE_TEMPLATE = '''"""ShinkaEvolve evaluation script for the dream_gym task {task!r} (written by dream-gym).

Runs the candidate through dream_gym's own evaluator of the task (isolated, sandboxed, time- and
memory-limited) and writes correct.json and metrics.json into --results_dir.
"""

from dream_gym.integrations.shinkaevolve.evaluator import main

TASK = {task!r}

if __name__ == "__main__":
    main(TASK)
'''


def marked_program(code: str) -> str:
    """``code`` between the two EVOLVE-BLOCK markers: all of it may evolve."""
    return f"{START_MARKER}\n{code.rstrip()}\n{END_MARKER}\n"


def feedback_text(error: str | None, diagnostics: str) -> str:
    """The text feedback of one evaluation: ``### error`` (when invalid) and ``### diagnostics``."""
    parts = []
    if error:
        parts.append(f"### error\n```\n{error.strip()}\n```")
    if diagnostics.strip():
        parts.append(f"### diagnostics\n```\n{diagnostics.strip()}\n```")
    return "\n".join(parts)


def evaluation_files(task: Any, evaluation: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(correct.json, metrics.json) of one dream_gym ``Evaluation``."""
    public: dict[str, Any] = dict(numeric_metrics(evaluation.metrics))
    valid = bool(evaluation.valid and evaluation.score is not None)
    error = None if valid else str(evaluation.error or "invalid")
    if valid:
        public["score"] = float(evaluation.score)
    metrics = {
        "combined_score": combined_score(float(evaluation.score), task.direction) if valid else 0.0,
        "public": public,
        "private": {} if valid else {"fail_class": str(evaluation.fail_class or "repairable")},
        "text_feedback": feedback_text(error, str(evaluation.diagnostics or "")),
    }
    return {"correct": valid, "error": error}, metrics


def failed_files(error: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The files of a program that could not be read (no evaluation ran)."""
    metrics = {"combined_score": 0.0, "public": {}, "private": {"fail_class": "repairable"},
               "text_feedback": feedback_text(error, "")}
    return {"correct": False, "error": error}, metrics


def evaluate_file(task_name: str, program_path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(correct.json, metrics.json) of the program at ``program_path`` on the built-in task."""
    try:
        code = read_program(program_path).decode("utf-8", errors="replace")
    except ProgramFileError as exc:
        return failed_files(str(exc))
    except FileNotFoundError:
        return failed_files("program file does not exist")
    task, evaluation, workdir = evaluator_files.evaluate_builtin(task_name, code, "shinka_eval")
    correct, metrics = evaluation_files(task, evaluation)
    # the work folder's name (a pid, a random suffix) would make the text differ from run to run
    for path in {str(workdir.resolve()), str(workdir)}:
        correct["error"] = correct["error"].replace(path, WORKDIR) if correct["error"] else None
        metrics["text_feedback"] = metrics["text_feedback"].replace(path, WORKDIR)
    return correct, metrics


def write_results(results_dir: str | os.PathLike[str], correct: dict[str, Any], metrics: dict[str, Any]) -> None:
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "correct.json").write_text(json.dumps(correct, indent=2) + "\n", encoding="utf-8")
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")


def script_main(description: str, evaluate: Callable[[str], tuple[dict[str, Any], dict[str, Any]]],
                argv: list[str] | None) -> int:
    """An evaluation script as ShinkaEvolve runs it (``--program_path P --results_dir D``):
    ``evaluate(P)`` written as ``correct.json`` and ``metrics.json`` into D, and its text feedback
    printed (on stderr for an incorrect program)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--program_path", required=True)
    parser.add_argument("--results_dir", required=True)
    args = parser.parse_args(argv)
    correct, metrics = evaluate(args.program_path)
    write_results(args.results_dir, correct, metrics)
    print(metrics["text_feedback"], file=sys.stdout if correct["correct"] else sys.stderr)
    return 0


def main(task_name: str, argv: list[str] | None = None) -> int:
    """The ``evaluate.py`` entry point of a built-in task: ``--program_path P --results_dir D``."""
    return script_main(f"Evaluate a program on the dream_gym task {task_name}.",
                       lambda program_path: evaluate_file(task_name, program_path), argv)


FILES_TEMPLATE = '''"""ShinkaEvolve evaluation script written by dream-gym: the task's evaluator, run in dream_gym's sandbox.

The task's evaluator: {evaluator} ({form})
Takes --program_path and --results_dir as ShinkaEvolve gives them, runs the task's evaluator on the
program in dream_gym's sandbox (a fresh workspace; the evaluator's folder and the --read folders
readable; no network, no new process), with `random` and `numpy.random` seeded from the run's seed
and the program's text, and writes correct.json and metrics.json (dream_gym.integrations.files_task).
"""

from dream_gym.integrations.shinkaevolve.evaluator import files_main

TASK = {settings!r}

if __name__ == "__main__":
    raise SystemExit(files_main(TASK, {contract!r}))
'''


def files_contract(task: Any) -> str:
    """How a task's evaluator file is called: OpenEvolve's ``evaluate(program_path)`` when it
    defines ``evaluate`` at its top level, else ShinkaEvolve's evaluation script."""
    from dream_gym.integrations.files_task import FUNCTION, SCRIPT

    return FUNCTION if "evaluate" in task.functions() else SCRIPT


def write_files_evaluate(task: Any, folder: str | os.PathLike[str]) -> Path:
    """Write ``folder/evaluate.py``: ShinkaEvolve's evaluation script of a task given as files
    (:class:`~dream_gym.integrations.files_task.FilesTask`), which runs the task's evaluator in
    dream_gym's sandbox. The task's file is not changed."""
    from dream_gym.integrations.files_task import FUNCTION

    contract = files_contract(task)
    form = "OpenEvolve's evaluate(program_path)" if contract == FUNCTION else "ShinkaEvolve's evaluation script"
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / EVALUATE_FILE
    path.write_text(FILES_TEMPLATE.format(evaluator=task.evaluator, form=form, settings=task.settings(),
                                          contract=contract), encoding="utf-8")
    return path


def files_results(evaluation: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(correct.json, metrics.json) of one sandboxed evaluation of a task given as files: the
    script's own files (their shape checked), or for OpenEvolve's form its metrics read the way
    dream_gym reads an OpenEvolve program (valid when it has a finite ``combined_score`` and
    reports no error), the numeric metrics as ``public`` and the artifacts as text feedback."""
    diagnostics = "\n".join(f"{key}:\n{text}" for key, text in evaluation.artifacts.items() if key != "error")
    if evaluation.failure is not None:
        return {"correct": False, "error": evaluation.failure}, {
            "combined_score": 0.0, "public": {}, "private": {"fail_class": "repairable"},
            "text_feedback": feedback_text(evaluation.failure, diagnostics)}
    if evaluation.correct is not None:
        return script_results(evaluation.correct, evaluation.metrics)
    error = openevolve_error(evaluation.metrics, evaluation.artifacts)
    public = numeric_metrics(evaluation.metrics, leave_out=("combined_score",))
    score = evaluation.metrics.get("combined_score")
    metrics = {"combined_score": float(score) if error is None else 0.0, "public": public,
               "private": {} if error is None else {"fail_class": "repairable"},
               "text_feedback": feedback_text(error, diagnostics)}
    return {"correct": error is None, "error": error}, metrics


def openevolve_error(metrics: dict[str, Any], artifacts: dict[str, str]) -> str | None:
    """Why an OpenEvolve-form evaluation has no valid score (None when it has one), by the rule
    dream_gym reads OpenEvolve's programs with."""
    from dream_gym.datasets.importers.openevolve import _program

    parsed = _program({"id": "program", "metrics": metrics, "artifacts_json": json.dumps(artifacts)},
                      "combined_score", None, None)
    return None if parsed.score is not None else (parsed.error or "no valid combined_score")


def script_results(correct: dict[str, Any], metrics: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The evaluation script's own correct.json and metrics.json, with the fields ShinkaEvolve
    reads checked: ``correct`` a bool, ``combined_score`` a finite number (else the program is
    incorrect, saying why), ``public``/``private`` objects, ``text_feedback`` text."""
    error = correct.get("error") if isinstance(correct.get("error"), str) else None
    score = metrics.get("combined_score")
    valid = correct.get("correct") is True
    if not (isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)):
        valid, error, score = False, error or "metrics.json holds no finite combined_score", 0.0
    checked = dict(metrics, combined_score=float(score))
    for key in ("public", "private"):
        if not isinstance(checked.get(key), dict):
            checked[key] = {}
    if not isinstance(checked.get("text_feedback"), str):
        checked["text_feedback"] = feedback_text(error if not valid else None, "")
    return {"correct": valid, "error": None if valid else (error or "the evaluation script found it incorrect")}, checked


def files_main(settings: dict[str, Any], contract: str, argv: list[str] | None = None) -> int:
    """The ``evaluate.py`` entry point of a task given as files: ``--program_path P --results_dir D``."""
    from dream_gym.integrations.files_task import FilesTask

    task = FilesTask.from_settings(settings)
    return script_main(f"Evaluate a program with {settings['evaluator']} in dream_gym's sandbox.",
                       lambda program_path: files_results(task.evaluate(program_path, contract=contract)), argv)


def write_task_files(task_name: str, folder: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write ``initial.py`` (the task's baseline between the markers) and ``evaluate.py``."""
    return evaluator_files.write_task_files(task_name, folder, initial_name=INITIAL_FILE, evaluator_name=EVALUATE_FILE,
                                            template=EVALUATE_TEMPLATE, program=marked_program)


__all__ = ["END_MARKER", "PROGRAM_MAX_BYTES", "START_MARKER", "evaluate_file", "evaluation_files", "feedback_text", "files_main",
           "files_results", "main", "marked_program", "write_files_evaluate", "write_task_files"]
