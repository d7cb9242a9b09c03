"""Evaluator of the test task in initial_program.py, in OpenEvolve's evaluate(program_path) form.

combined_score (higher is better) is the mean of 1 / (1 + mean squared error) of the program's points
against the hidden curve 2.5 x^2 + 0.7 and the share of the 30 distinct points wanted that it gives; a program
that fails or returns no usable points gets combined_score 0 and an error. Like OpenEvolve's
function_minimization example, it draws from the unseeded global generator (a tiny jitter of the
score), so only a run that seeds each evaluation repeats exactly.
"""

import importlib.util
import math
import random

WANTED_POINTS = 30


def target(x):
    return 2.5 * x**2 + 0.7


def evaluate(program_path):
    try:
        spec = importlib.util.spec_from_file_location("candidate", program_path)
        program = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(program)
        points = [(float(x), float(y)) for x, y in program.run()]
    except Exception as exc:  # the candidate's own failure is its score
        return {"combined_score": 0.0, "error": f"{type(exc).__name__}: {exc}"}
    points = [(x, y) for x, y in points if math.isfinite(x) and math.isfinite(y) and 0.0 <= x <= 1.0]
    if not points:
        return {"combined_score": 0.0, "error": "no finite points on [0, 1]"}
    mse = sum((y - target(x)) ** 2 for x, y in points) / len(points)
    coverage = min(1.0, len({x for x, _ in points}) / WANTED_POINTS)
    jitter = random.random() * 1e-9
    return {"combined_score": (coverage + 1.0 / (1.0 + mse)) / 2 + jitter, "mse": mse, "coverage": coverage}
