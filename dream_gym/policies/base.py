"""Small helpers shared by the built-in policies."""

from __future__ import annotations

from dream_gym.policy import RunContext
from dream_gym.replay import ROOT
from dream_gym.view import NodeView, PrefixView


class BasePolicy:
    """Keeps the run context; subclasses implement ``act``."""

    name = "base"

    def __init__(self) -> None:
        self.context: RunContext | None = None

    def reset(self, context: RunContext) -> None:
        self.context = context

    @property
    def beta(self) -> float:
        return self.context.beta if self.context else 0.5


def open_nodes(view: PrefixView) -> list[NodeView]:
    """The non-root nodes a batch may select."""
    return [view.nodes[i] for i in view.frontier if i != ROOT]


def score_key(node: NodeView) -> tuple[int, float]:
    """Sort key: valid before invalid, then higher score first (use with reverse=True)."""
    return (1, node.score) if node.score is not None else (0, float("-inf"))


def interpolate(low: float, high: float, beta: float) -> float:
    """Linear map of the budget preference beta in [0, 1] onto [low, high]."""
    return low + (high - low) * beta
