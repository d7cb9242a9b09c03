"""The statistics of fidelity: rank correlations, a bootstrap over seeds and split-half reliability.

Written out here (numpy only) rather than taken from scipy, so their definitions are on the
page; ``tests/test_fidelity_stats.py`` checks them against scipy and against cases worked by hand.

* :func:`spearman`: Spearman's rho, Pearson's correlation of the average ranks (ties share the
  mean of their ranks).
* :func:`kendall`: Kendall's tau-b, (concordant - discordant) pairs over the pairs not tied,
  corrected for ties in either variable (scipy's default).
* :func:`bootstrap_interval`: a percentile interval of a statistic over resamples of the seeds
  (drawn with replacement; resamples where the statistic is undefined are left out and counted).
* :func:`split_half`: the agreement of a ranking with itself: the seeds split into two halves,
  the Spearman rho between the rankings the halves give, corrected to the whole set of seeds by
  :func:`spearman_brown`, averaged over splits (all of them when there are few).

Every function returns ``nan`` where the statistic is undefined (fewer than two values, a
constant variable).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: Splits :func:`split_half` averages over: every split when there are no more, else this many drawn.
MAX_SPLITS = 200


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties given the mean of the ranks they span."""
    data = np.asarray(values, dtype=float)
    order = np.argsort(data, kind="mergesort")
    ranked = np.empty(len(data), dtype=float)
    start = 0
    while start < len(data):
        end = start
        while end + 1 < len(data) and data[order[end + 1]] == data[order[start]]:
            end += 1
        ranked[order[start:end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranked


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / denominator if denominator > 0 else math.nan


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long sequences (nan when undefined)."""
    if len(x) != len(y):
        raise ValueError(f"spearman needs two sequences of one length, got {len(x)} and {len(y)}")
    if len(x) < 2 or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return math.nan
    return _pearson(ranks(x), ranks(y))


def kendall(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two equally long sequences (nan when undefined)."""
    if len(x) != len(y):
        raise ValueError(f"kendall needs two sequences of one length, got {len(x)} and {len(y)}")
    if len(x) < 2 or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return math.nan
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    sign_x = np.sign(a[:, None] - a[None, :])
    sign_y = np.sign(b[:, None] - b[None, :])
    upper = np.triu_indices(len(a), k=1)
    sx, sy = sign_x[upper], sign_y[upper]
    pairs_x, pairs_y = np.count_nonzero(sx), np.count_nonzero(sy)  # pairs not tied in x, in y
    if pairs_x == 0 or pairs_y == 0:
        return math.nan
    return float(np.sum(sx * sy)) / math.sqrt(float(pairs_x) * float(pairs_y))


def spearman_brown(r: float, factor: float = 2.0) -> float:
    """The reliability of a measure ``factor`` times as long as one with reliability ``r``:
    ``factor r / (1 + (factor - 1) r)``; defined for r > -1/(factor - 1) (nan otherwise)."""
    denominator = 1 + (factor - 1) * r
    if not math.isfinite(r) or denominator <= 0:
        return math.nan
    return factor * r / denominator


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval: ``low`` and ``high`` of ``level``, from ``used`` of ``resamples``."""

    low: float
    high: float
    level: float
    used: int
    resamples: int

    def to_dict(self) -> dict[str, float | int | None]:
        return {"low": _finite(self.low), "high": _finite(self.high), "level": self.level, "used": self.used,
                "resamples": self.resamples}


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def bootstrap_interval(statistic: Callable[[np.ndarray], float], seeds: int, *, resamples: int = 2000,
                       level: float = 0.95, rng: np.random.Generator | None = None) -> Interval:
    """The percentile interval of ``statistic(sample)`` over ``resamples`` resamples of seed
    positions ``0 .. seeds - 1`` drawn with replacement (``sample``: an int array of ``seeds``
    positions). Resamples where the statistic is nan are left out (``used`` counts the others)."""
    if seeds < 1:
        raise ValueError("a bootstrap over seeds needs at least one seed")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = rng if rng is not None else np.random.default_rng(0)
    values = [statistic(rng.integers(0, seeds, seeds)) for _ in range(resamples)]
    finite = np.array([v for v in values if math.isfinite(v)])
    if not len(finite):
        return Interval(math.nan, math.nan, level, 0, resamples)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return Interval(float(low), float(high), level, len(finite), resamples)


def halves(seeds: int, *, max_splits: int = MAX_SPLITS, rng: np.random.Generator | None = None
           ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Splits of seed positions into two halves (the first ``seeds // 2`` and the rest): every
    distinct split when there are at most ``max_splits``, else ``max_splits`` drawn at random."""
    if seeds < 2:
        return []
    size = seeds // 2
    everyone = tuple(range(seeds))
    distinct = math.comb(seeds, size) // (2 if 2 * size == seeds else 1)
    if distinct <= max_splits:
        found = []
        for first in itertools.combinations(everyone, size):
            second = tuple(i for i in everyone if i not in first)
            if 2 * size == seeds and second < first:
                continue  # the same split, halves swapped
            found.append((first, second))
        return found
    rng = rng if rng is not None else np.random.default_rng(0)
    drawn = []
    for _ in range(max_splits):
        order = rng.permutation(seeds)
        drawn.append((tuple(sorted(int(i) for i in order[:size])), tuple(sorted(int(i) for i in order[size:]))))
    return drawn


@dataclass(frozen=True)
class SplitHalf:
    """Split-half reliability: the mean over splits of the halves' Spearman rho (``raw``) and of
    its Spearman-Brown correction to the whole set of seeds (``corrected``)."""

    raw: float
    corrected: float
    splits: int  # splits with a defined rho

    def to_dict(self) -> dict[str, float | int | None]:
        return {"raw": _finite(self.raw), "corrected": _finite(self.corrected), "splits": self.splits}


def split_half(outcomes: Sequence[Sequence[float]], *, max_splits: int = MAX_SPLITS,
               rng: np.random.Generator | None = None) -> SplitHalf:
    """How well a ranking of policies agrees with itself across seeds.

    ``outcomes[p][s]`` is policy p's outcome on seed s. For each split of the seeds into two
    halves, each policy's mean over either half ranks the policies; the halves' Spearman rho
    is corrected by :func:`spearman_brown` (each half has about half the seeds), and both are
    averaged over the splits. nan with fewer than two seeds or two policies."""
    table = np.asarray(outcomes, dtype=float)
    if table.ndim != 2 or table.shape[0] < 2 or table.shape[1] < 2:
        return SplitHalf(math.nan, math.nan, 0)
    raw, corrected = [], []
    for first, second in halves(table.shape[1], max_splits=max_splits, rng=rng):
        r = spearman(table[:, list(first)].mean(axis=1), table[:, list(second)].mean(axis=1))
        if math.isfinite(r):
            raw.append(r)
            corrected.append(spearman_brown(r))
    kept = [c for c in corrected if math.isfinite(c)]
    return SplitHalf(float(np.mean(raw)) if raw else math.nan, float(np.mean(kept)) if kept else math.nan,
                     len(raw))


__all__ = ["MAX_SPLITS", "Interval", "SplitHalf", "bootstrap_interval", "halves", "kendall", "ranks", "spearman",
           "spearman_brown", "split_half"]
