"""The recorded world: its format and loader, how its files are read, its writer, the reveal rules, the
registry of worlds and where the shipped data lives (the lowest layer of replay).

The module ``dream_gym.world`` of earlier versions is :mod:`dream_gym.world.tree` now; its names are
still found here (imported when first asked for, so importing a submodule stays light).
"""

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    module = importlib.import_module("dream_gym.world.tree")  # not ``from . import``: that asks here again
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
