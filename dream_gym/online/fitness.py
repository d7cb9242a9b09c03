"""A task's score as a higher-is-better, positive fitness, and back.

Evolution systems maximise one number (OpenEvolve's ``combined_score``, the ``- Fitness:`` its
prompts show): the task's score when it maximises, ``1 / score`` when it minimises (every built-in
minimised score is positive: seconds, an autocorrelation constant). The OpenEvolve evaluator files
(:mod:`dream_gym.integrations.openevolve.evaluator`) report it and the agent server
(:mod:`dream_gym.online.agent_server`) reads it back.
"""

from __future__ import annotations


def combined_score(score: float, direction: str) -> float:
    """The task's score turned higher-is-better and positive."""
    if direction == "maximize":
        return float(score)
    return 1.0 / score if score > 0 else -float(score)


def task_score(combined: float, direction: str) -> float:
    """The inverse of :func:`combined_score` (for a valid candidate)."""
    if direction == "maximize":
        return float(combined)
    return 1.0 / combined if combined > 0 else -float(combined)


__all__ = ["combined_score", "task_score"]
