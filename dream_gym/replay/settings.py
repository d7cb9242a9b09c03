"""The settings of a replay episode, in one value: :class:`ReplaySettings`.

Six numbers decide an episode besides the world and the policy: W (``workers``, attempts per
round), the budget preference ``beta`` the policy is shown, V's coefficients ``beta1`` and
``beta2``, the round limit ``max_rounds`` and the ``frontier`` rule; ``requests`` switches on
request mode (docs/concepts/coverage.md: the policy chooses among what an online run could
continue, and what the record cannot answer is refused and counted). Another bounds the work
one episode may do: ``max_attempts`` (:data:`DEFAULT_MAX_ATTEMPTS`), a limit of the machinery
rather than a rule of the game (the oracle does not see it). Their defaults are defined here
once; every layer above (the session, the envs, evaluation and its result rows, the oracle, the
plots) takes or builds this value instead of re-listing them.

Two of the defaults depend on the world: ``workers=None`` is the W the world was recorded at and
``frontier=None`` its frontier rule. :meth:`ReplaySettings.resolved` fills them in, so what is
recorded about an episode is always the W and rule it was actually replayed at.

A pool of worlds (the vector envs) replays every world at one W: :meth:`ReplaySettings.pool_workers`
(the worlds' one recorded W unless given). Where no recorded world gives W, it is
:data:`STANDARD_WORKERS`, written out as the default of those signatures: online runs and the
dreaming loop (no world is recorded yet), and the RL training envs and ``dream-gym train`` (a
pool of worlds recorded at different W, and a model whose action space is sized by W).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.world.tree import MAX_WORKERS, World

#: The budget preference a policy is shown when none is given.
DEFAULT_BETA = 0.5
#: The most attempts one episode may make (``max_attempts``): a batch that would take an episode
#: past it is not applied and ends the episode, truncated, with :class:`EpisodeLimitError`'s
#: message (an error of the policy in evaluation; ``truncated`` in the Gymnasium env). Ten times
#: the largest shipped world (1,000 attempts) and fifty times the largest imported real run, so
#: no real world is cut; at the bound, a policy file that takes one attempt per decision costs
#: about 2 s of replay (docs/reference/replay-env.md).
DEFAULT_MAX_ATTEMPTS = 10_000
#: W where no recorded world gives it (online runs, the RL training envs and their models):
#: the W most shipped worlds were recorded at and every shipped model was trained at.
STANDARD_WORKERS = 4
#: The recorder (the policy that grows the worlds replay runs on, docs/concepts/recorders.md) that
#: ``dream-gym grow``, ``deploy`` and ``openevolve run`` record with when no ``--policy`` is given;
#: None keeps each command's own: grow's ``recommended``, the bridges' ``native`` (the system's own
#: parent selection). The fidelity of replay per recorder decides it.
DEFAULT_RECORDER: str | None = None


def recorder_or(command_default: str) -> str:
    """The ``--policy`` default of a recording command: :data:`DEFAULT_RECORDER`, else its own."""
    return DEFAULT_RECORDER or command_default


def is_whole(value: object) -> bool:
    """A whole number, numpy's included; not a bool (True is 1), a float (3.9 would be cut to 3) or text."""
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


def whole_at_least_one(value: object) -> bool:
    """A whole number >= 1 (:func:`is_whole`): W, a count, a round limit."""
    return is_whole(value) and int(value) >= 1  # type: ignore[call-overload]


def check_flags(**flags: object) -> None:
    """Refuse a flag argument that is not True or False (a numpy bool is one): ``bool("false")``
    is True, so a text would turn the flag on unseen."""
    for name, value in flags.items():
        if not isinstance(value, bool) and getattr(getattr(value, "dtype", None), "kind", "") != "b":
            raise ValueError(f"{name} must be True or False, got {value!r}")


@dataclass(frozen=True)
class ReplaySettings:
    """What decides a replay episode besides the world and the policy.

    Args:
        workers: W, the most selections one batch may hold (None: the world's recorded W).
        beta: the policy's budget preference in [0, 1] (shown to the policy; not used by V).
        beta1, beta2: cost and parallelism coefficients of V.
        max_rounds: K2, the round limit (None: no limit).
        frontier: "leaves" or "any" (None: the world's rule).
        max_attempts: the most attempts one episode may make (see :data:`DEFAULT_MAX_ATTEMPTS`).
        requests: request mode (:class:`dream_gym.replay.mechanics.Replay`): the frontier an online run of
            the rule has; selections the record cannot answer are refused, not charged, and
            counted (coverage). Off: the rule's frontier, as the paper's replay.
    """

    workers: int | None = None
    beta: float = DEFAULT_BETA
    beta1: float = DEFAULT_BETA1
    beta2: float = DEFAULT_BETA2
    max_rounds: int | None = None
    frontier: str | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    requests: bool = False

    def __post_init__(self) -> None:
        # a float W or round limit would be cut to an int unseen; True is 1, "4" no number
        if self.workers is not None and not (whole_at_least_one(self.workers) and self.workers <= MAX_WORKERS):
            raise ValueError(f"workers must be an integer from 1 to {MAX_WORKERS} or None, got {self.workers!r}")
        if isinstance(self.beta, bool) or not isinstance(self.beta, numbers.Real) or not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {self.beta!r}")
        for name in ("beta1", "beta2"):  # NaN or inf would make every reward NaN or inf
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= float(value) < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.max_rounds is not None and not whole_at_least_one(self.max_rounds):
            raise ValueError(f"max_rounds must be an integer >= 1 or None, got {self.max_rounds!r}")
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        if not isinstance(self.requests, bool):
            raise ValueError(f"requests must be True or False, got {self.requests!r}")

    @classmethod
    def of(cls, settings: ReplaySettings | None = None, **changes: Any) -> ReplaySettings:
        """``settings`` (default: the defaults) with some fields changed (TypeError naming an
        unknown one)."""
        base = cls() if settings is None else _checked(settings)
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"unknown replay settings: {', '.join(unknown)}")
        return dataclasses.replace(base, **changes) if changes else base

    @classmethod
    def combined(cls, settings: ReplaySettings | None = None, **fields: Any) -> ReplaySettings:
        """One value from a ``settings=`` argument and the same fields given as keywords (the
        signatures that take both): ``settings`` with the keywords' fields set. A field
        ``settings`` sets (away from its default) and a keyword gives differently is a
        ValueError; an unknown field a TypeError."""
        if settings is not None:
            given = _checked(settings).set_fields()
            clashes = sorted(name for name, value in fields.items() if name in given and given[name] != value)
            if clashes:
                both = "; ".join(f"{n}={fields[n]!r} against settings.{n}={given[n]!r}" for n in clashes)
                raise ValueError(f"replay settings given twice, differently: {both}")
        return cls.of(settings, **fields)

    def set_fields(self) -> dict[str, Any]:
        """The fields this value sets away from their defaults: what it gives, where a signature
        takes the same fields as keywords too (a field left at its default is not given)."""
        unset = ReplaySettings()
        return {name: value for name, value in self.as_dict().items() if value != getattr(unset, name)}

    def replace(self, **changes: Any) -> ReplaySettings:
        return ReplaySettings.of(self, **changes)

    def resolved(self, world: World) -> ReplaySettings:
        """These settings on ``world``: W and the frontier rule filled from it where None."""
        if self.workers is not None and self.frontier is not None:
            return self
        return dataclasses.replace(self, workers=self.workers_on(world), frontier=self.frontier_on(world))

    def workers_on(self, world: World) -> int:
        """W on ``world``: ``workers``, or the W it was recorded at."""
        return world.workers if self.workers is None else int(self.workers)

    def frontier_on(self, world: World) -> str:
        """The frontier rule on ``world``: ``frontier``, or the world's rule."""
        return world.frontier_rule if self.frontier is None else self.frontier

    def pool_workers(self, worlds: Iterable[World]) -> int:
        """The one W a pool of worlds is replayed at: ``workers``, or the worlds' recorded W
        (ValueError when they were recorded at different W)."""
        if self.workers is not None:
            return int(self.workers)
        recorded = {w.workers for w in worlds}
        if len(recorded) != 1:
            raise ValueError(f"the worlds were recorded with different W {sorted(recorded)}: pass workers=")
        return recorded.pop()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ReplaySettings:
        """The settings a result row (or any mapping) records; a field it lacks or holds as
        null takes its default (rows written before W was recorded when defaulted: the world's)."""
        return cls(**{f.name: row[f.name] for f in dataclasses.fields(cls) if row.get(f.name) is not None})

    def as_dict(self) -> dict[str, Any]:
        """The fields, by name (what result rows and run identities record)."""
        return dataclasses.asdict(self)


def _checked(settings: Any) -> ReplaySettings:
    """``settings`` if it is a :class:`ReplaySettings`; else a TypeError that says how to give them
    (a dict was read field by field and failed deep inside, an AttributeError)."""
    if not isinstance(settings, ReplaySettings):
        raise TypeError(f"settings must be a ReplaySettings, got {type(settings).__name__}; give the fields as "
                        "keywords instead (workers=2, beta=0.5)")
    return settings


__all__ = ["DEFAULT_BETA", "DEFAULT_MAX_ATTEMPTS", "DEFAULT_RECORDER", "STANDARD_WORKERS", "ReplaySettings", "check_flags",
           "is_whole", "recorder_or", "whole_at_least_one"]
