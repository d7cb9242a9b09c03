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

The factories take these as keywords only (:class:`PoolSpec`; an unknown one is a TypeError);
below them the replay settings travel as one :class:`~dream_gym.replay.settings.ReplaySettings`
(:func:`pool_of`), with the betas drawn per episode beside it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from gymnasium.vector import AutoresetMode

from dream_gym.evaluation.world_specs import resolve_worlds
from dream_gym.replay.objectives import DEFAULT_PRICE_HIGH, DEFAULT_PRICE_LOW, ValueFn, make_objective
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, DEFAULT_BETA_GRID
from dream_gym.replay.settings import STANDARD_WORKERS, ReplaySettings
from dream_gym.rl.macro_env import MacroReplayEnv
from dream_gym.rl.node_env import DEFAULT_CAPACITY, NodeReplayEnv
from dream_gym.rl.options_env import OptionsReplayEnv
from dream_gym.rl.vector import MacroVectorEnv
from dream_gym.world.tree import World, prefix_world

WorldSpec = str | Sequence[str]


class PoolSpec(TypedDict, total=False):
    """The kwargs every id takes (see the module docstring): plain, JSON-able values."""

    worlds: WorldSpec
    prefixes: Sequence[int] | str
    objective: str
    price_high: float | None
    price_low: float | None
    betas: float | Sequence[float] | None
    workers: int
    beta1: float
    beta2: float
    max_rounds: int | None


#: Each kwarg's default when a factory is called without it (the registered ids name the pool).
SPEC_DEFAULTS: dict[str, Any] = {
    "worlds": "train", "prefixes": (), "objective": "v2", "price_high": None, "price_low": None, "betas": None,
    "workers": STANDARD_WORKERS, "beta1": DEFAULT_BETA1, "beta2": DEFAULT_BETA2, "max_rounds": None,
}


def training_worlds(worlds: WorldSpec, prefixes: Sequence[int] | str = ()) -> list[World]:
    """The worlds of a spec and, per n in ``prefixes`` shorter than a world, that world stopped
    after n attempts (as ``dream-gym train --prefixes`` builds its pool)."""
    entries = [n for n in prefixes.split(",") if n.strip()] if isinstance(prefixes, str) else list(prefixes)
    try:
        counts = [int(n) for n in entries if not isinstance(n, (bool, float))]
    except (TypeError, ValueError):
        counts = []
    if len(counts) != len(entries) or any(n < 1 for n in counts):
        raise ValueError(f"prefixes must be attempt counts >= 1 (a list, or a comma list), got {prefixes!r}")
    if not isinstance(worlds, (str, os.PathLike, World, Iterable)):
        raise TypeError(f"worlds must be a world spec (a split, folder, dataset id, comma list) or a list of them, "
                        f"got {type(worlds).__name__}")
    pool = resolve_worlds(worlds)
    return [*pool, *(prefix_world(w, n) for w in pool for n in counts if n < w.size - 1)]


def objective_of(objective: str, price_high: float | None, price_low: float | None) -> ValueFn:
    if objective == "v2":
        return make_objective("v2", price_high=DEFAULT_PRICE_HIGH if price_high is None else price_high,
                              price_low=DEFAULT_PRICE_LOW if price_low is None else price_low)
    if price_high is not None or price_low is not None:
        raise ValueError(f"price_high and price_low belong to objective 'v2', not {objective!r}")
    return make_objective(objective)


def pool_of(factory: str, spec: Mapping[str, object]) -> tuple[list[World], dict[str, Any]]:
    """The worlds of a factory's kwargs and the keywords of its env: the replay settings as one
    :class:`~dream_gym.replay.settings.ReplaySettings`, the betas drawn per episode and the
    objective (TypeError naming a kwarg that is none of :class:`PoolSpec`'s)."""
    spec = dict(spec)
    render_mode = spec.pop("render_mode", None)  # gym.make's keyword, given to every env
    if render_mode is not None:  # a TypeError, as for any keyword a creator does not take: SB3's
        # make_vec_env asks for "rgb_array" and, on a TypeError, makes the env without it
        raise TypeError(f"{factory}: render_mode {render_mode!r}: the training envs render nothing (their "
                         "metadata's render_modes is empty); DreamGym/Replay-v1 renders 'human', 'ansi' and 'rgb_array'")
    unknown = sorted(set(spec) - set(SPEC_DEFAULTS))
    if unknown:
        raise TypeError(f"{factory}() got an unexpected keyword argument {', '.join(map(repr, unknown))}")
    given = {**SPEC_DEFAULTS, **spec}
    worlds = training_worlds(given["worlds"], given["prefixes"])
    settings = ReplaySettings(given["workers"], beta1=given["beta1"], beta2=given["beta2"],
                              max_rounds=given["max_rounds"])
    return worlds, {
        "settings": settings, "beta": list(DEFAULT_BETA_GRID) if given["betas"] is None else given["betas"],
        "value_fn": objective_of(given["objective"], given["price_high"], given["price_low"]),
    }


def macro_env(**spec: Unpack[PoolSpec]) -> MacroReplayEnv:
    """``DreamGym/Macro-v0``: a :class:`MacroReplayEnv` on the pool (see the module docstring)."""
    worlds, pool = pool_of("macro_env", spec)
    return MacroReplayEnv(worlds, **pool)


def macro_vector_env(num_envs: int = 1, *, autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                     **spec: Unpack[PoolSpec]) -> MacroVectorEnv:
    """``gym.make_vec("DreamGym/Macro-v0", num_envs=N, vectorization_mode="vector_entry_point")``
    (and ``autoreset_mode=``, as Gymnasium's vector envs take it)."""
    worlds, pool = pool_of("macro_vector_env", spec)
    return MacroVectorEnv(worlds, num_envs, autoreset_mode=autoreset_mode, **pool)


def node_env(*, max_candidates: int = DEFAULT_CAPACITY, **spec: Unpack[PoolSpec]) -> NodeReplayEnv:
    """``DreamGym/Node-v0``: a :class:`NodeReplayEnv` on the pool (see the module docstring)."""
    worlds, pool = pool_of("node_env", spec)
    return NodeReplayEnv(worlds, max_candidates=max_candidates, **pool)


def options_env(**spec: Unpack[PoolSpec]) -> OptionsReplayEnv:
    """``DreamGym/Options-v0``: an :class:`OptionsReplayEnv` on the pool (see the module docstring)."""
    worlds, pool = pool_of("options_env", spec)
    return OptionsReplayEnv(worlds, **pool)


__all__ = ["PoolSpec", "SPEC_DEFAULTS", "macro_env", "macro_vector_env", "node_env", "objective_of", "options_env",
           "pool_of", "training_worlds"]
