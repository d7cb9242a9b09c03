"""The modules that moved into the layer packages, importable by their earlier names.

``import dream_gym.env`` gives :mod:`dream_gym.envs.env` (with a :class:`DeprecationWarning` naming the
new place): code written against the flat layout keeps working. A moved package (``dream_gym.sandbox``)
is a stand-in that hands out the package's names, its submodules the modules themselves. Installed by ``import dream_gym``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

#: Earlier module (below ``dream_gym.``) -> where it lives now.
MOVED = {
    "datasets.hub_card": "datasets.hub.card",
    "durable": "infrastructure.durable",
    "env": "envs.env",
    "env_ids": "envs.ids",
    "episode_engine": "replay.engine",
    "eval_journal": "evaluation.journal",
    "evaluate": "evaluation.evaluate",
    "isolation": "infrastructure.isolation",
    "jobs": "infrastructure.jobs",
    "leaderboard": "evaluation.leaderboard",
    "limits": "infrastructure.limits",
    "llm": "infrastructure.llm",
    "locks": "infrastructure.locks",
    "objectives": "replay.objectives",
    "oracle": "replay.oracle",
    "plots": "evaluation.plots",
    "printable": "infrastructure.printable",
    "redact": "infrastructure.redact",
    "registry": "world.registry",
    "results": "evaluation.results",
    "reveal_rules": "world.reveal_rules",
    "rl.gym_envs": "training.gym_envs",
    "rl.training": "training.trainer",
    "sandbox": "infrastructure.sandbox",
    "score": "replay.score",
    "session": "replay.session",
    "settings": "replay.settings",
    "shipped": "world.shipped",
    "tree_image": "envs.tree_image",
    "vector_engine": "replay.vector_engine",
    "vector_env": "envs.vector_env",
    "vector_episodes": "envs.vector_episodes",
    "vector_replay": "replay.vector",
    "view": "replay.view",
    "work_folders": "infrastructure.work_folders",
    "world_specs": "evaluation.world_specs",
    "world_writer": "world.writer",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.target}", DeprecationWarning, stacklevel=2)
        target = importlib.import_module(self.target)
        if not hasattr(target, "__path__"):
            return target
        # A package gets a stand-in that hands out its names: importing a submodule by its earlier
        # name binds the submodule onto the stand-in, never over a name of the package itself
        # (dream_gym.sandbox.launch, the module, beside the package's function ``launch``).
        stand_in = ModuleType(spec.name, target.__doc__)
        stand_in.__path__ = list(target.__path__)
        stand_in.__dict__["__getattr__"] = lambda name: getattr(target, name)
        return stand_in

    def exec_module(self, module: ModuleType) -> None:
        """The module is the one at its new place, already executed."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds ``dream_gym.<old>`` and its submodules at their new place (the same module objects)."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        package, _, rest = fullname.partition(".")
        if package != "dream_gym" or not rest:
            return None
        parts = rest.split(".")
        for cut in range(len(parts), 0, -1):  # the longest moved name the module is, or lies below
            old = ".".join(parts[:cut])
            if old in MOVED:
                new = ".".join([f"dream_gym.{MOVED[old]}", *parts[cut:]])
                return importlib.machinery.ModuleSpec(fullname, _Alias(new))
        return None


if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())  # before the path finder, which would load a second copy of a submodule
