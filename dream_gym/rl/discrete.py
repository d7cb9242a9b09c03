"""The actions of the training envs (``Discrete`` spaces, batched for the vector env), checked
against their space."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces


def discrete_action(space: spaces.Space[Any], action: Any) -> int:
    """``action`` as the index it names, when it is an element of ``space`` (an int, a numpy
    integer or a 0-d integer array: ``space.contains``); anything else is a ValueError naming it.
    Without the check a negative index would pick an action from the end and a float or a text
    would be read as the int it rounds or parses to."""
    if not space.contains(action):
        raise ValueError(f"action {action!r} is not an element of the action space {space}")
    return int(action) - int(getattr(space, "start", 0))


def discrete_actions(space: spaces.Space[Any], actions: Any) -> np.ndarray:
    """The vector env's ``actions`` as int64 indices, when they are an element of ``space`` (the
    batched ``Discrete``: integers of its shape, each in range); else a ValueError naming them."""
    batch = np.asarray(actions)
    if batch.dtype.kind not in "iu" or not space.contains(batch):
        raise ValueError(f"actions {actions!r} are not an element of the action space {space}")
    return (batch - getattr(space, "start", 0)).astype(np.int64)


__all__ = ["discrete_action", "discrete_actions"]
