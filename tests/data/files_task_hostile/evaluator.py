"""An OpenEvolve-style evaluator written for dream_gym's tests of tasks given as files.

evaluate(program_path) imports the program and calls its run(); a number it returns is the
combined_score, any exception the program's error (as OpenEvolve's own examples report one). The
program's NOTE, when it has one, is returned as an artifact. The hostile programs beside this file
each try one thing a candidate must not do from inside the evaluation.
"""

import importlib.util


class EvaluationResult:
    """OpenEvolve's result shape (metrics and artifacts), without importing OpenEvolve."""

    def __init__(self, metrics, artifacts):
        self.metrics = metrics
        self.artifacts = artifacts


def evaluate(program_path):
    try:
        spec = importlib.util.spec_from_file_location("candidate", program_path)
        program = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(program)
        value = float(program.run())
    except Exception as exc:  # the candidate's own failure is its score
        return {"combined_score": 0.0, "error": f"{type(exc).__name__}: {exc}"}
    return EvaluationResult({"combined_score": value}, {"note": str(getattr(program, "NOTE", ""))})
