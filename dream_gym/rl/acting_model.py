"""A trained model loaded to act: its optimizer's saved state kept, no optimizer built.

SB3 builds a model's optimizer whenever it loads one, and torch's optimizer imports
``torch._dynamo`` on its first parameter group: about a second of every process that loads a
model, a third of what ``dream-gym replay --policy recommended`` spends, though acting never
touches the optimizer. The policies of trained models (their models are shared, and only predict)
load a zip with :class:`SavedOptimizerState` standing where the optimizer goes: it keeps the
state the zip holds and gives it back unchanged, and refuses, naming the way to train, any use
that would step or tune it. :func:`dream_gym.rl.sb3.load_model` still loads a model that trains.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class SavedOptimizerState:
    """Where a model loaded to act has its optimizer: the optimizer's saved state, no optimizer."""

    def __init__(self, params: Any, **settings: Any) -> None:
        del params, settings  # what an optimizer would tune; acting tunes nothing
        self._saved: Any = None

    def load_state_dict(self, state_dict: Any, strict: bool = True) -> None:
        del strict  # SB3 passes it to whatever is not a torch optimizer
        self._saved = state_dict

    def state_dict(self) -> Any:
        """The state as loaded (a model saved again keeps its optimizer's state)."""
        return self._saved

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"this model was loaded to act and has no optimizer ({name!r}): load it with "
                             "dream_gym.rl.sb3.load_model to train it")


def load_to_act(load: Callable[[Mapping[str, Any]], Any], policy_kwargs: Mapping[str, Any] | None) -> Any:
    """``load(custom_objects)`` (SB3's ``load`` of one zip) with :class:`SavedOptimizerState` as the
    optimizer class of the zip's ``policy_kwargs``; the model it returns names the zip's own
    ``policy_kwargs`` and optimizer class again, so that saving it writes what the zip held."""
    import torch

    given = dict(policy_kwargs or {})
    model = load({"policy_kwargs": {**given, "optimizer_class": SavedOptimizerState}})
    model.policy_kwargs = given
    model.policy.optimizer_class = given.get("optimizer_class", torch.optim.Adam)
    return model


__all__ = ["SavedOptimizerState", "load_to_act"]
