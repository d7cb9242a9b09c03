"""The replay settings of the RL pool envs, declared once for all of them.

Every pool env (:class:`~dream_gym.rl.MacroReplayEnv`, :class:`~dream_gym.rl.NodeReplayEnv`,
:class:`~dream_gym.rl.OptionsReplayEnv`, :class:`~dream_gym.rl.MacroVectorEnv`) takes the same
replay keywords, :class:`PoolKwargs` (``workers``, ``beta``, ``beta1``, ``beta2``,
``max_rounds``), or the same settings as one value, ``settings=ReplaySettings(...)``, and hands
both to :func:`pool_settings`, which checks them and gives the one :class:`PoolSettings` the env
replays with; :func:`pool_signature` shows the keywords in the env's ``inspect.signature``. An
env's own arguments (``features``, ``value_fn``, ``draws``, ...) stay in its signature.

What the pool envs differ in from one replay episode: W is one number for the whole pool
(default :data:`~dream_gym.replay.settings.STANDARD_WORKERS`, also when ``settings.workers`` is
None: the pool's worlds may have been recorded at different W, and a model's action space is
sized by W), and ``beta`` may be a sequence, one drawn per episode. They replay at each world's
frontier rule, without request mode and with the default ``max_attempts``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.replay.settings import DEFAULT_BETA, STANDARD_WORKERS, ReplaySettings


class PoolKwargs(TypedDict, total=False):
    """The replay keywords of every pool env."""

    workers: int  # W for every world of the pool
    beta: float | Sequence[float]  # a fixed budget preference, or several, one drawn per episode
    beta1: float  # V's cost coefficient
    beta2: float  # V's parallelism coefficient
    max_rounds: int | None  # K2, the round limit (None: no limit)


#: Each pool keyword's default when neither it nor ``settings`` gives it.
POOL_DEFAULTS: dict[str, Any] = {"workers": STANDARD_WORKERS, "beta": DEFAULT_BETA, "beta1": DEFAULT_BETA1,
                                 "beta2": DEFAULT_BETA2, "max_rounds": None}


@dataclass(frozen=True)
class PoolSettings:
    """What a pool env replays with: ``settings`` (W filled in; its beta the first of ``betas``)
    and ``betas``, the budget preferences an episode draws from."""

    settings: ReplaySettings
    betas: tuple[float, ...]

    @property
    def workers(self) -> int:
        """W, the same for every world of the pool."""
        workers = self.settings.workers
        assert workers is not None  # pool_settings fills it in
        return workers


def pool_settings(owner: object, settings: ReplaySettings | None, given: Mapping[str, object]) -> PoolSettings:
    """The settings of ``owner``, a pool env, from its ``settings=`` and its replay keywords
    ``given``.

    TypeError for a keyword that is not a replay setting of the pool envs (as for any unknown
    keyword); ValueError when ``settings`` and a keyword give one setting different values, when
    ``settings`` holds a setting the pool envs do not take (``frontier``, ``max_attempts``,
    ``requests``), and for a beta outside [0, 1] (or none) or a round limit below 1.
    """
    name = type(owner).__name__
    unknown = sorted(set(given) - set(POOL_DEFAULTS))
    if unknown:
        raise TypeError(f"{name} got an unexpected keyword argument {', '.join(map(repr, unknown))} (its replay "
                        f"settings: {', '.join(POOL_DEFAULTS)})")
    chosen = dict(POOL_DEFAULTS)
    if settings is not None:
        chosen.update(_given_by(name, settings, given))
    chosen.update(given)
    betas = betas_of(chosen["beta"])
    replay = ReplaySettings(int(chosen["workers"]), betas[0], float(chosen["beta1"]), float(chosen["beta2"]),
                            chosen["max_rounds"])
    return PoolSettings(replay, betas)


def _given_by(name: str, settings: ReplaySettings, keywords: Mapping[str, object]) -> dict[str, Any]:
    """The fields ``settings`` gives (those away from their defaults), checked against the keywords."""
    fields = settings.set_fields()
    foreign = sorted(set(fields) - set(POOL_DEFAULTS))
    if foreign:
        raise ValueError(f"{name} replays at each world's frontier rule, without request mode and with the default "
                         f"max_attempts: settings gives {', '.join(f'{k}={fields[k]!r}' for k in foreign)}")
    for key, value in fields.items():
        if key in keywords and _differ(key, value, keywords[key]):
            raise ValueError(f"{name} was given {key} twice, differently: settings.{key}={value!r} and "
                             f"{key}={keywords[key]!r}")
    return fields


def _differ(key: str, value: object, keyword: object) -> bool:
    if key == "beta":  # the keyword may be a sequence of betas to draw from
        return betas_of(keyword) != (float(value),)  # type: ignore[arg-type]
    return keyword != value


EnvClass = TypeVar("EnvClass", bound=type)


def pool_signature(env_class: EnvClass) -> EnvClass:
    """Show the replay keywords, with their defaults, in ``inspect.signature`` of a pool env
    (``help()``, notebooks) where its ``__init__`` has ``**replay``: the signature it documents."""
    init = env_class.__init__  # type: ignore[misc]
    signature = inspect.signature(init)
    kept = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    annotations = {name: getattr(kind, "__forward_arg__", kind) for name, kind in PoolKwargs.__annotations__.items()}
    keywords = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotations[name])
                for name, default in POOL_DEFAULTS.items()]
    init.__signature__ = signature.replace(parameters=[*kept, *keywords])
    return env_class


def betas_of(beta: float | Sequence[float]) -> tuple[float, ...]:
    """The betas an episode draws from: one, or each of a sequence (ValueError outside [0, 1])."""
    betas = (float(beta),) if isinstance(beta, (int, float)) else tuple(float(b) for b in beta)
    if not betas or any(not 0.0 <= b <= 1.0 for b in betas):
        raise ValueError(f"betas must be in [0, 1], got {betas}")
    return betas


def settings_of(workers: int, beta1: float, beta2: float,
                draws: Sequence[tuple[int, float, float]] = ()) -> tuple[tuple[int, float, float], ...]:
    """The (W, beta1, beta2) settings an episode draws from: ``draws`` when given, else the one
    setting (workers, beta1, beta2). ValueError for a W below 1 or a negative price."""
    settings = tuple((int(w), float(b1), float(b2)) for w, b1, b2 in draws) or ((int(workers), float(beta1),
                                                                                float(beta2)),)
    if any(w < 1 or b1 < 0 or b2 < 0 for w, b1, b2 in settings):
        raise ValueError(f"settings need W >= 1 and beta1, beta2 >= 0, got {settings}")
    return settings


__all__ = ["POOL_DEFAULTS", "PoolKwargs", "PoolSettings", "betas_of", "pool_settings", "pool_signature",
           "settings_of"]
