"""A policy that adapts its spending to the run it is in, from the prefix view only.

``AdaptiveSpend`` selects like ``stagnation`` (refine each live branch, close branches on hard
failures, retry repairable ones, open branches up to its limit) but replaces its fixed round budget
and patience with a stopping rule read off the run so far:

* **rate of new bests**: the share of the gain over the baseline reached in the last ``L``
  attempts, ``L = max(patience attempts, attempts / 2)`` (``patience attempts`` = W times
  stagnation's patience, ``round(2 + 6 beta)`` rounds), per attempt: an estimate of what one more
  attempt buys, in units of the gain found so far;
* **failure rate**: that estimate is discounted by the share of the last ``L`` attempts that
  failed (a run whose attempts mostly fail pays for them without learning);
* **branch structure**: stagnation's branch table (closed and dead branches open no new work);
* **attempts so far**: the window grows with the run, so long runs get longer patience.

It stops when the estimate falls below a price per attempt that β sets (``0.003 * 4 ** (1 - 2
beta)``: V's own cost per attempt at β = 0.5, four times that at β = 0, a quarter at β = 1), but
never before ``W * (2 + 4 beta)`` attempts, and never while the last window found a new best that
is at least a quarter of the gain so far. No world size, no score of an unrevealed node, no q:
the same object runs online.

Written, with its constants, before any run of the recommended experiment
(experiments/recommended/PROTOCOL.md); nothing in it was tuned on a split.
"""

from __future__ import annotations

import math

from dream_gym.policies.base import interpolate
from dream_gym.policies.stagnation import StagnationPolicy
from dream_gym.policy import RunContext
from dream_gym.replay.view import PrefixView

V_PRICE = 0.003  # V's cost of one attempt (dream_gym.replay.score.DEFAULT_BETA1), the price at beta = 0.5


class AdaptiveSpend(StagnationPolicy):
    """``stagnation``'s selection with a stopping rule that reads the run (see the module)."""

    name = "adaptive-spend"

    def __init__(self) -> None:
        super().__init__(rounds=10**9, patience=10**9)  # stagnation's selection, not its stopping
        self._history: list[tuple[int, float | None, int]] = []  # (attempts, best score, failed so far)

    def reset(self, context: RunContext) -> None:
        super().reset(context)
        self._history = []

    def price(self) -> float:
        return V_PRICE * 4.0 ** (1.0 - 2.0 * self.beta)

    def should_stop(self, view: PrefixView) -> bool:
        attempts = view.attempts
        failed = sum(1 for node in view.nodes[1:] if node.score is None)
        best = view.best_score()
        self._history.append((attempts, best, failed))
        if attempts < view.workers * interpolate(2, 6, self.beta):
            return False
        if best is None:  # nothing valid yet: the window's failure share decides below
            return failed >= attempts and attempts >= view.workers * interpolate(4, 10, self.beta)
        gain = best - view.baseline_score
        if gain <= 0:
            share = 0.0
        else:
            window = max(view.workers * round(interpolate(2, 8, self.beta)), math.ceil(attempts / 2))
            then = next(((a, b, f) for a, b, f in reversed(self._history) if a <= attempts - window),
                        (0, view.baseline_score, 0))
            before = then[1] if then[1] is not None else view.baseline_score
            share = max(0.0, best - max(before, view.baseline_score)) / gain
            if share >= 0.25:
                return False
            recent = max(1, attempts - then[0])
            fail_share = (failed - then[2]) / recent
            rate = share / recent * (1.0 - fail_share)
            return rate < self.price()
        return True

    def act(self, view: PrefixView) -> list[int]:
        if self.should_stop(view):
            return []
        return super().act(view)


__all__ = ["AdaptiveSpend"]
