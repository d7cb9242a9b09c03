"""The shipped trained models: ``--policy ppo-macro``, ``ppo-node``, ``ppo-options``,
``ppo-options-long`` (v2) and ``ppo-macro-v``, ``ppo-node-v``, ``ppo-options-v`` (plain V) everywhere.

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
    "ppo-macro": "ppo-macro.zip",  # MaskablePPO on the macro env, beta-priced objective
    # MaskablePPO with the node-level scorer, beta-priced objective: a seed ensemble of five (README, "Seed ensembles")
    "ppo-node": "+".join(f"ppo-node-{i}.zip" for i in range(1, 6)),
    "ppo-macro-v": "ppo-macro-v.zip",  # the macro arch trained on plain V (--objective v): for mean V
    "ppo-node-v": "ppo-node-v.zip",  # the node arch trained on plain V
    # the options arch (a meta-controller over the built-ins' proposals; README "Options over the built-ins")
    "ppo-options": "ppo-options.zip",  # beta-priced objective
    "ppo-options-v": "ppo-options-v.zip",  # plain V
    # beta-priced at the range chosen on long runs (README "Options priced for long runs")
    "ppo-options-long": "ppo-options-long.zip",
}


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
