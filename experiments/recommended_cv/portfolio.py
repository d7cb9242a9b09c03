"""The portfolio P of PROTOCOL.md §4: 59 configurations of the built-ins, each a policy class.

A configuration is a built-in (or ``AdaptiveSpend``) whose budget parameters are set from β and W
when an episode starts:

* ``<name>_r<s>`` / ``<name>_a<s>`` (``openevolve``, ``ucb``, ``puct``, ``shinka``, ``stagnation``):
  the round budget ``round(8 + 32 β)`` and the patience ``round(2 + 6 β)`` (the defaults) times s,
  in rounds (``r``), or times s · 4 / W (``a``: the same number of attempts at every W as the default
  buys at W = 4); at least 1 round. s in {0.5, 1, 2, 4}, written ×100 (``ucb_r100`` is ``ucb``).
* ``greedy_r<s>`` / ``greedy_a<s>``: greedy's patience ``1 + round(5 β)`` scaled the same ways.
* ``fixed_d<s>``: fixed's depth ``round(3 + 7 β)`` times s.
* ``hyperband_p<k>``: Hyperband with s_max = ``1 + round(2 β) + k``, k in {0, 1, 2}.
* ``adaptive_c<s>``: ``AdaptiveSpend`` with its price per attempt times s in {0.25, 0.5, 1, 2}.

Each is an attribute of this module, so ``experiments.recommended_cv.portfolio:ucb_a200`` is a
policy spec (``dream-gym eval --policy ...``). :data:`CONFIGS` lists them in P's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dream_gym.policies import make_policy
from dream_gym.policies.base import default_patience, default_round_budget
from dream_gym.policy import Policy, RunContext
from dream_gym.replay.view import PrefixView
from experiments.recommended.adaptive import AdaptiveSpend

SCALES = (0.5, 1.0, 2.0, 4.0)
BUDGETED = ("openevolve", "ucb", "puct", "shinka", "stagnation")


def _count(value: float) -> int:
    return max(1, round(value))


def _budgeted(name: str, scale: float, per_attempt: bool) -> Callable[[RunContext], Policy]:
    def make(context: RunContext) -> Policy:
        unit = scale * (4.0 / context.workers if per_attempt else 1.0)
        return make_policy(name, rounds=_count(default_round_budget(context.beta) * unit),
                           patience=_count(default_patience(context.beta) * unit))
    return make


def _greedy(scale: float, per_attempt: bool) -> Callable[[RunContext], Policy]:
    def make(context: RunContext) -> Policy:
        unit = scale * (4.0 / context.workers if per_attempt else 1.0)
        return make_policy("greedy", patience=_count((1 + round(5 * context.beta)) * unit))
    return make


def _fixed(scale: float) -> Callable[[RunContext], Policy]:
    def make(context: RunContext) -> Policy:
        return make_policy("fixed", depth=_count(round(3 + 7 * context.beta) * scale))
    return make


def _hyperband(extra: int) -> Callable[[RunContext], Policy]:
    def make(context: RunContext) -> Policy:
        return make_policy("hyperband", max_bracket=1 + round(2 * context.beta) + extra)
    return make


class _PricedSpend(AdaptiveSpend):
    factor = 1.0

    def price(self) -> float:
        return super().price() * self.factor


def _adaptive(factor: float) -> Callable[[RunContext], Policy]:
    def make(context: RunContext) -> Policy:
        policy = _PricedSpend()
        policy.factor = factor
        return policy
    return make


def _tag(scale: float) -> str:
    return f"{round(scale * 100):03d}"


def _configs() -> dict[str, Callable[[RunContext], Policy]]:
    out: dict[str, Callable[[RunContext], Policy]] = {}
    for name in BUDGETED:
        for mode in ("r", "a"):
            for s in SCALES:
                out[f"{name}_{mode}{_tag(s)}"] = _budgeted(name, s, mode == "a")
    for mode in ("r", "a"):
        for s in SCALES:
            out[f"greedy_{mode}{_tag(s)}"] = _greedy(s, mode == "a")
    for s in SCALES:
        out[f"fixed_d{_tag(s)}"] = _fixed(s)
    for k in (0, 1, 2):
        out[f"hyperband_p{k}"] = _hyperband(k)
    for s in (0.25, 0.5, 1.0, 2.0):
        out[f"adaptive_c{_tag(s)}"] = _adaptive(s)
    return out


MAKERS = _configs()
CONFIGS: tuple[str, ...] = tuple(MAKERS)
STOP = "stop"


class Configured:
    """A configuration of P as a policy: the inner policy is built at ``reset`` from the context."""

    config = ""

    def __init__(self) -> None:
        self.name = self.config
        self.inner: Policy | None = None

    def reset(self, context: RunContext) -> None:
        self.inner = MAKERS[self.config](context)
        self.inner.reset(context)

    def act(self, view: PrefixView) -> Any:
        assert self.inner is not None, "reset() first"
        return self.inner.act(view)


def configured(config: str) -> Configured:
    """A fresh policy of configuration ``config``."""
    policy = globals()[config]()
    assert isinstance(policy, Configured)
    return policy


def spec(config: str) -> str:
    return f"experiments.recommended_cv.portfolio:{config}"


for _name in CONFIGS:
    globals()[_name] = type(_name, (Configured,), {"config": _name, "__doc__": f"Configuration {_name} of P."})

assert len(CONFIGS) == 59
