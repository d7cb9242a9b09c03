"""Shared types of discovery agents (built-in ones and the LLM agent implement the same thing).

A discovery agent turns a parent candidate (its program, score and the evaluator's feedback)
into a new candidate program. It never evaluates the program for the record: the task's
evaluator does that, isolated, after ``propose`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from dream_gym.online.tasks.base import Task


@dataclass
class ParentContext:
    """What the agent knows about the node it starts from.

    ``history`` is the branch from the root to the parent (root first, parent last), one dict per
    node with keys ``score``, ``error``, ``fail_class``, ``diagnostics`` and ``code`` (the node's program:
    a workspace's earlier versions, which an agent may go back to).
    """

    code: str
    score: float | None
    diagnostics: str = ""
    error: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Proposal:
    """A new candidate program and what it cost to write.

    ``cost`` has at least ``seconds``, ``tokens_in``, ``tokens_out`` and ``usd``.
    ``prompt`` is the text sent to an LLM (None for built-in agents).
    """

    code: str
    notes: str
    cost: dict[str, float]
    prompt: str | None = None


@runtime_checkable
class Agent(Protocol):
    """A discovery agent: ``propose`` writes one child program from a parent."""

    name: str

    def propose(self, task: Task, parent: ParentContext, rng: np.random.Generator) -> Proposal:
        """Write a new candidate program; must not run the parent's code in this process."""
        ...


def zero_cost(seconds: float) -> dict[str, float]:
    """The cost record of an agent that uses no tokens."""
    return {"seconds": float(seconds), "tokens_in": 0.0, "tokens_out": 0.0, "usd": 0.0}
