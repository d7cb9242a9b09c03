"""Built-in discovery agents: LLM-like improvement operators that need no LLM, one module per task.

``builtin_agent(task_name)`` returns the agent of a built-in task; :class:`GenericAgent`
(:mod:`.generic`) edits any program without knowing its task. Every agent follows the
:class:`~dream_gym.online.agent_base.Agent` protocol of the LLM agent, reads the parent's program
as text (never running it), and imitates an LLM's incremental progress (mostly small local edits,
rare large changes, realistic slips); :mod:`dream_gym.online.agents.common` holds what they share.
"""

from __future__ import annotations

from dream_gym.online.agent_base import Agent
from dream_gym.online.agents.autocorrelation import AutocorrelationAgent
from dream_gym.online.agents.circle_packing import CirclePackingAgent
from dream_gym.online.agents.common import EditAgent, read_literal
from dream_gym.online.agents.generic import GenericAgent
from dream_gym.online.agents.lasso_path import LassoPathAgent
from dream_gym.online.agents.sleep_task import SleepTaskAgent
from dream_gym.online.agents.sum_difference import SumDifferenceAgent

BUILTIN_AGENTS: dict[str, type] = {
    "circle-packing": CirclePackingAgent,
    "sum-difference": SumDifferenceAgent,
    "lasso-path": LassoPathAgent,
    "autocorrelation": AutocorrelationAgent,
    "sleep-task": SleepTaskAgent,
}


def builtin_agent(task_name: str) -> Agent:
    """The built-in (no-LLM) agent of a built-in task; ValueError for other tasks."""
    family = "circle-packing" if task_name.startswith("circle-packing-") else task_name
    try:
        agent: Agent = BUILTIN_AGENTS[family]()
    except KeyError:
        known = ", ".join("circle-packing-<n>" if k == "circle-packing" else k for k in BUILTIN_AGENTS)
        raise ValueError(f"no built-in agent for task {task_name!r}; built-in agents exist for {known}") from None
    return agent


__all__ = ["BUILTIN_AGENTS", "AutocorrelationAgent", "CirclePackingAgent", "EditAgent", "GenericAgent", "LassoPathAgent",
           "SleepTaskAgent", "SumDifferenceAgent", "builtin_agent", "read_literal"]
