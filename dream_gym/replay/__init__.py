"""Replay mechanics on one world, pure Python and numpy: the reveal rules played, the replay score V,
the oracle limit, the prefix view a policy sees, the episode session and the compiled engines behind
the envs.

The module ``dream_gym.replay`` of earlier versions is :mod:`dream_gym.replay.mechanics` now; its names are
still found here (imported when first asked for, so importing a submodule stays light).
"""

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    module = importlib.import_module("dream_gym.replay.mechanics")  # not ``from . import``: that asks here again
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
