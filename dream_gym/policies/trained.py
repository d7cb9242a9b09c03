"""The shipped trained models: ``--policy ppo-options`` (v2; also what ``recommended`` names) and
``ppo-options-v`` (plain V) everywhere.

Beside the heuristics of this package, by name; built by :func:`dream_gym.rl.model_policy`
(extra ``rl``). Only the names and paths live here, so resolving a spec imports no torch.

They are small SB3 zips in ``agents/models/`` (of the repository, or of the installed package's data:
:func:`dream_gym.shipped.models_dir`; ``DREAM_GYM_MODELS`` moves the folder), trained
by ``dream-gym train`` with the command recorded beside them (``agents/models/README.md``).
``dream_gym.policy_files.load_policy`` resolves the names, so ``eval``, ``replay``, ``grow``,
``dream`` and ``rsi`` accept them like built-in names. An SB3 zip holds pickled objects: these
are trusted files of this repository, loaded in-process.
"""

from __future__ import annotations

from pathlib import Path

from dream_gym.shipped import models_dir

SHIPPED_MODELS: dict[str, str] = {
    # the options arch (a meta-controller over the built-ins' proposals; docs/results/rl.md, "Options over the built-ins"),
    # the two models that earned a place on the real validation runs (experiments/recommended/PROTOCOL.md)
    "ppo-options": "ppo-options.zip",  # beta-priced objective: recommended; v2 (compare over beta)
    "ppo-options-v": "ppo-options-v.zip",  # plain V: one beta, V at beta 0.5 (an online run)
}
# Shipped before the recommended experiment and removed by its shipping rule (no validation slot won):
# ppo-macro, ppo-node (a five-seed ensemble), ppo-macro-v, ppo-node-v, ppo-options-long. Their recorded
# commands are in agents/models/README.md: `dream-gym train` makes them again.


def shipped_files(name: str) -> list[Path]:
    """The zips of a shipped model (one, or the members of a seed ensemble: ``a.zip+b.zip``);
    LookupError for an unknown name, FileNotFoundError when a file is missing."""
    try:
        filenames = SHIPPED_MODELS[name].split("+")
    except KeyError:
        raise LookupError(f"unknown shipped model {name!r}; known: {', '.join(SHIPPED_MODELS)}") from None
    paths = [models_dir() / filename for filename in filenames]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(
                f"shipped model {name!r} is missing: {path} does not exist (set DREAM_GYM_MODELS to the "
                "folder holding it, or train one with dream-gym train)"
            )
    return paths


__all__ = ["SHIPPED_MODELS", "models_dir", "shipped_files"]
