"""Built-in exploration policies, by name.

They live in the library (not in ``agents/``) because the evaluation harness, the online
module and the CLI all accept them by name; ``agents/`` holds what acts from outside the
library (RL training scripts, example policy files, LLM prompts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dream_gym.policies.coverage import CoveragePolicy
from dream_gym.policies.fixed import FixedPolicy
from dream_gym.policies.greedy import GreedyPolicy
from dream_gym.policies.hyperband import HyperbandPolicy
from dream_gym.policies.openevolve_sampler import OpenEvolvePolicy
from dream_gym.policies.puct import PUCTPolicy
from dream_gym.policies.random_legal import RandomPolicy
from dream_gym.policies.shinka import ShinkaPolicy
from dream_gym.policies.stagnation import StagnationPolicy
from dream_gym.policies.ucb import UCBPolicy
from dream_gym.policy import Policy, construct

POLICIES: dict[str, Callable[..., Policy]] = {
    "random": RandomPolicy,
    "greedy": GreedyPolicy,
    "fixed": FixedPolicy,
    "ucb": UCBPolicy,
    "puct": PUCTPolicy,
    "hyperband": HyperbandPolicy,
    "openevolve": OpenEvolvePolicy,
    "shinka": ShinkaPolicy,
    "stagnation": StagnationPolicy,
    "coverage": CoveragePolicy,
}


#: Built-ins made to grow worlds that replay can answer many policies on (docs/concepts/recorders.md),
#: not exploration policies to rank: the demo's leaderboard leaves them out.
RECORDERS = ("coverage",)


def make_policy(name: str, **params: Any) -> Policy:
    """A fresh built-in policy; LookupError lists the known names, ValueError a parameter the
    policy does not take or a value of the wrong kind."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise LookupError(f"unknown built-in policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    policy: Policy = construct(factory, params, f"policy {name!r}")
    return policy


__all__ = [
    "POLICIES",
    "RECORDERS",
    "CoveragePolicy",
    "FixedPolicy",
    "GreedyPolicy",
    "HyperbandPolicy",
    "OpenEvolvePolicy",
    "PUCTPolicy",
    "RandomPolicy",
    "ShinkaPolicy",
    "StagnationPolicy",
    "UCBPolicy",
    "make_policy",
]
