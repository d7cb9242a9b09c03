"""The RL training envs as Gymnasium ids: ``gym.make("DreamGym/Macro-v0")``, ``"DreamGym/Node-v0"``,
``"DreamGym/Options-v0"`` (registered by ``import dream_gym``).

Each id builds the pool env the shipped models were trained on (:class:`~dream_gym.rl.MacroReplayEnv`,
:class:`~dream_gym.rl.NodeReplayEnv`, :class:`~dream_gym.rl.OptionsReplayEnv`) from plain,
JSON-able kwargs, so that ``env.spec.to_json()`` works and SB3's ``make_vec_env`` and
Gymnasium's ``make_vec`` can build copies in other processes:

* ``worlds``: a world spec (what ``--worlds`` takes: ``"dream-gym/recorded-v1:train"``, a
  dataset id, world names or folders, a comma list, or a list of them). Default (the registered
  kwargs): ``"dream-gym/recorded-v1:train,dream-gym/recorded-v0:train"``.
* ``prefixes``: attempt counts n; each world of ``worlds`` is also in the pool stopped after its
  first n attempts (runs of every length). Default ``[50, 100, 200]``; ``[]`` for none.
* ``objective``: ``"v2"`` (the beta-conditioned :class:`~dream_gym.replay.objectives.PricedAttainment`,
  with ``price_high`` / ``price_low``) or ``"v"`` (the replay score V). Default ``"v2"``.
* ``betas``: the betas drawn per episode (default the evaluation grid 0, 0.1, ..., 1), ``workers``
  (W, default 4), ``beta1``, ``beta2``, ``max_rounds``; ``max_candidates`` for Node-v0 (16).

These defaults are ``dream-gym train --worlds train,dream-gym/recorded-v0:train --prefixes
50,100,200`` with the default objective, the configuration of ``agents/models/``. Every action
is valid and each env has ``action_masks()``, which MaskablePPO finds through the wrappers.
``DreamGym/Macro-v0`` also has a ``vector_entry_point``: :class:`~dream_gym.rl.MacroVectorEnv`,
the N-episode engine the macro models were trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dream_gym.evaluation.world_specs import resolve_worlds
from dream_gym.replay.objectives import DEFAULT_PRICE_HIGH, DEFAULT_PRICE_LOW, ValueFn, make_objective
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, DEFAULT_BETA_GRID
from dream_gym.replay.settings import STANDARD_WORKERS
from dream_gym.rl.macro_env import MacroReplayEnv
from dream_gym.rl.node_env import DEFAULT_CAPACITY, NodeReplayEnv
from dream_gym.rl.options_env import OptionsReplayEnv
from dream_gym.rl.vector import MacroVectorEnv
from dream_gym.world.tree import World, prefix_world

WorldSpec = str | Sequence[str]


def training_worlds(worlds: WorldSpec, prefixes: Sequence[int] | str = ()) -> list[World]:
    """The worlds of a spec and, per n in ``prefixes`` shorter than a world, that world stopped
    after n attempts (as ``dream-gym train --prefixes`` builds its pool)."""
    counts = [int(n) for n in prefixes.split(",") if n.strip()] if isinstance(prefixes, str) else \
        [int(n) for n in prefixes]
    pool = resolve_worlds(worlds)
    return [*pool, *(prefix_world(w, n) for w in pool for n in counts if n < w.size - 1)]


def objective_of(objective: str, price_high: float | None, price_low: float | None) -> ValueFn:
    if objective == "v2":
        return make_objective("v2", price_high=DEFAULT_PRICE_HIGH if price_high is None else price_high,
                              price_low=DEFAULT_PRICE_LOW if price_low is None else price_low)
    if price_high is not None or price_low is not None:
        raise ValueError(f"price_high and price_low belong to objective 'v2', not {objective!r}")
    return make_objective(objective)


def _pool_arguments(worlds: WorldSpec, prefixes: Sequence[int] | str, objective: str, price_high: float | None,
                    price_low: float | None, betas: float | Sequence[float] | None, workers: int, beta1: float,
                    beta2: float, max_rounds: int | None) -> dict[str, Any]:
    return {
        "worlds": training_worlds(worlds, prefixes), "workers": workers,
        "beta": list(DEFAULT_BETA_GRID) if betas is None else betas, "beta1": beta1, "beta2": beta2,
        "max_rounds": max_rounds, "value_fn": objective_of(objective, price_high, price_low),
    }


def macro_env(worlds: WorldSpec = "train", prefixes: Sequence[int] | str = (), objective: str = "v2",
              price_high: float | None = None, price_low: float | None = None,
              betas: float | Sequence[float] | None = None, workers: int = STANDARD_WORKERS, beta1: float = DEFAULT_BETA1,
              beta2: float = DEFAULT_BETA2, max_rounds: int | None = None) -> MacroReplayEnv:
    """``DreamGym/Macro-v0``: a :class:`MacroReplayEnv` on the pool (see the module docstring)."""
    pool = _pool_arguments(worlds, prefixes, objective, price_high, price_low, betas, workers, beta1, beta2,
                           max_rounds)
    return MacroReplayEnv(pool.pop("worlds"), **pool)


def macro_vector_env(num_envs: int = 1, worlds: WorldSpec = "train", prefixes: Sequence[int] | str = (),
                     objective: str = "v2", price_high: float | None = None, price_low: float | None = None,
                     betas: float | Sequence[float] | None = None, workers: int = STANDARD_WORKERS, beta1: float = DEFAULT_BETA1,
                     beta2: float = DEFAULT_BETA2, max_rounds: int | None = None) -> MacroVectorEnv:
    """``gym.make_vec("DreamGym/Macro-v0", num_envs=N, vectorization_mode="vector_entry_point")``."""
    pool = _pool_arguments(worlds, prefixes, objective, price_high, price_low, betas, workers, beta1, beta2,
                           max_rounds)
    return MacroVectorEnv(pool.pop("worlds"), num_envs, **pool)


def node_env(worlds: WorldSpec = "train", prefixes: Sequence[int] | str = (), objective: str = "v2",
             price_high: float | None = None, price_low: float | None = None,
             betas: float | Sequence[float] | None = None, workers: int = STANDARD_WORKERS, beta1: float = DEFAULT_BETA1,
             beta2: float = DEFAULT_BETA2, max_rounds: int | None = None,
             max_candidates: int = DEFAULT_CAPACITY) -> NodeReplayEnv:
    """``DreamGym/Node-v0``: a :class:`NodeReplayEnv` on the pool (see the module docstring)."""
    pool = _pool_arguments(worlds, prefixes, objective, price_high, price_low, betas, workers, beta1, beta2,
                           max_rounds)
    return NodeReplayEnv(pool.pop("worlds"), max_candidates=max_candidates, **pool)


def options_env(worlds: WorldSpec = "train", prefixes: Sequence[int] | str = (), objective: str = "v2",
                price_high: float | None = None, price_low: float | None = None,
                betas: float | Sequence[float] | None = None, workers: int = STANDARD_WORKERS, beta1: float = DEFAULT_BETA1,
                beta2: float = DEFAULT_BETA2, max_rounds: int | None = None) -> OptionsReplayEnv:
    """``DreamGym/Options-v0``: an :class:`OptionsReplayEnv` on the pool (see the module docstring)."""
    pool = _pool_arguments(worlds, prefixes, objective, price_high, price_low, betas, workers, beta1, beta2,
                           max_rounds)
    return OptionsReplayEnv(pool.pop("worlds"), **pool)


__all__ = ["macro_env", "macro_vector_env", "node_env", "objective_of", "options_env", "training_worlds"]
