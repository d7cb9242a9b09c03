"""``--policy recommended``: the one policy to run when you do not know which to pick.

``recommended`` is a name, like a built-in's, accepted wherever a policy spec goes (``eval``,
``replay``, ``grow``, ``dream``/``rsi``, ``dream-gym openevolve run``, :func:`dream_gym.policy_files.load_policy`,
``PolicySource``) and the default of the commands that need a policy and had a default (``replay``,
``grow``). It stands for :data:`RECOMMENDED`, chosen by the rule of
``experiments/recommended_cv/PROTOCOL.md`` (written down before the runs that decided it): every
real run of the project's collection (43 runs in 8 task families) scored by leave-one-family-out
cross-validation, V at beta 0.5 averaged over W = 2, 4, 10 and W = 10 without a parallel bonus; a
learned candidate replaces the best built-in (``openevolve``, CV mean 0.865 [0.801, 0.918]) only if it
passes a guard (a gain whose bootstrap CI excludes zero, no held-out family more than 0.05 below, no
setting below). One passed: ``cv-node-v``, the node-arch PPO recipe trained on a pool of the real runs
(and their prefixes) mixed with the synthetic worlds, W and V's prices drawn per episode, retrained
inside each fold: CV mean 0.910 [0.882, 0.936], gain +0.045 with a CI of [+0.001, +0.105]
(``experiments/recommended_cv/logs/cv_tables.md``). It ships as the shipped model ``cv-node-v``, the
same recipe trained on all 8 families; it needs the ``rl`` extra (torch). Like every policy it reads
its budget preference beta from the run context.

Resolving the name imports nothing heavy: :func:`recommended_spec` only says which spec it is.
"""

from __future__ import annotations

from dream_gym.world.shipped import models_dir

NAME = "recommended"

#: The spec ``recommended`` stands for: a built-in name, a shipped model's name
#: (:data:`dream_gym.policies.trained.SHIPPED_MODELS`) or a file name in :func:`dream_gym.world.shipped.models_dir`.
RECOMMENDED = "cv-node-v"  # experiments/recommended_cv/cv_table.json, "choice"


#: ``recommended`` as the incumbent of ``dream``/``rsi``, which rewrite it as an isolated policy file (an
#: SB3 model cannot run isolated): the chosen policy when it can be one, else the best built-in by CV
#: (here: the chosen policy is a model, so the best built-in).
RECOMMENDED_FILE = "openevolve"


def _path_or_name(spec: str) -> str:
    return str(models_dir() / spec) if spec.endswith((".py", ".zip")) else spec


def recommended_spec() -> str:
    """The policy spec ``recommended`` names (a file is given by its path in the models folder)."""
    return _path_or_name(RECOMMENDED)


def recommended_incumbent() -> str:
    """The spec ``recommended`` names as the incumbent of the dreaming loop (a built-in or a file)."""
    return _path_or_name(RECOMMENDED_FILE)


def resolve(spec: str) -> str:
    """``spec``, with the name ``recommended`` replaced by the spec it stands for."""
    return recommended_spec() if spec == NAME else spec


def resolve_incumbent(spec: str) -> str:
    """``spec``, with ``recommended`` replaced by the spec it stands for as a dreaming incumbent."""
    return recommended_incumbent() if spec == NAME else spec


__all__ = ["NAME", "RECOMMENDED", "RECOMMENDED_FILE", "recommended_incumbent", "recommended_spec", "resolve",
           "resolve_incumbent"]
