"""The shipped trained models, by name everywhere: ``--policy ppo-macro-v`` (plain V, a macro
model trained on synthetic worlds only), ``ppo-options`` (v2: compare over beta) and ``ppo-options-v``
(plain V); and ``cv-node-v`` (plain V, trained on the real runs too), which ``recommended`` names
(:mod:`dream_gym.policies.recommended`): the one learned candidate that passed the guard of its
cross-validated choice.

Beside the heuristics of this package, by name; built by :func:`dream_gym.rl.model_policy`
(extra ``rl``). Only the names and paths live here, so resolving a spec imports no torch.

They are small SB3 zips in ``agents/models/`` (of the repository, or of the installed package's data:
:func:`dream_gym.world.shipped.models_dir`; ``DREAM_GYM_MODELS`` moves the folder), trained
by ``dream-gym train`` with the command recorded beside them (``agents/models/README.md``).
``dream_gym.policy_files.load_policy`` resolves the names, so ``eval``, ``replay``, ``grow``,
``dream`` and ``rsi`` accept them like built-in names. They load as data, like any model zip
(:mod:`dream_gym.rl.model_zips`).
"""

from __future__ import annotations

from pathlib import Path

from dream_gym.world.shipped import models_dir

SHIPPED_MODELS: dict[str, str] = {
    # what recommended names: the one learned candidate that passed the guard (node arch, plain V, trained on the
    # real runs and their prefixes mixed with the synthetic worlds, W and prices drawn; the recipe on all 8 families)
    "cv-node-v": "cv-node-v.zip",
    # scored on every real run of the cross-validated choice of recommended (experiments/recommended_cv/PROTOCOL.md,
    # section 6: the learned model with the best figure of a slot ships when it beats the best built-in's figure)
    "ppo-macro-v": "ppo-macro-v.zip",  # plain V; held the mean-V and W10i slots until the per-fold kinds were scored, kept
    "ppo-options": "ppo-options.zip",  # beta-priced objective: the slot of v2 (compare over beta)
    "ppo-options-v": "ppo-options-v.zip",  # plain V, an options model; fills no slot, kept (agents/models/README.md)
}
# Not shipped (no slot won, or not scored): ppo-macro, ppo-node (a five-seed ensemble), ppo-node-v,
# ppo-options-long. Their recorded commands, and the figures of those scored, are in agents/models/README.md:
# `dream-gym train` makes them again.


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
