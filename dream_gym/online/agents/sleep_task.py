"""Built-in agent for ``sleep-task`` (a measurement tool): a trivially different program each time."""

from __future__ import annotations

import numpy as np

from dream_gym.online.agent_base import ParentContext, Proposal, zero_cost
from dream_gym.online.tasks.base import Task


class SleepTaskAgent:
    """Writes a new constant into the program (its score is a hash of the text)."""

    name = "builtin-sleep-task"

    def propose(self, task: Task, parent: ParentContext, rng: np.random.Generator) -> Proposal:
        value = int(rng.integers(10**9))
        code = f'"""sleep-task program {value}."""\n\n\ndef payload():\n    return {value}\n'
        return Proposal(code=code, notes=f"payload {value}", cost=zero_cost(0.0))
