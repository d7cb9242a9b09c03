"""The statistics of dream-gym fidelity, against scipy on fixed data and against cases worked by hand."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from dream_gym.fidelity.stats import (
    bootstrap_interval,
    halves,
    kendall,
    ranks,
    spearman,
    spearman_brown,
    split_half,
)


def _same(ours: float, theirs: float) -> bool:
    return (math.isnan(ours) and math.isnan(theirs)) or abs(ours - theirs) < 1e-12


def test_rank_correlations_match_scipy_with_and_without_ties() -> None:
    rng = np.random.default_rng(20261206)
    checked = 0
    for _ in range(300):
        n = int(rng.integers(2, 14))
        if rng.random() < 0.5:  # many ties
            x, y = rng.integers(0, 4, n).astype(float), rng.integers(0, 5, n).astype(float)
        else:
            x, y = rng.normal(size=n), rng.normal(size=n)
        with warnings.catch_warnings():  # scipy warns on a constant input; compared on purpose
            warnings.simplefilter("ignore")
            theirs_s, theirs_k = stats.spearmanr(x, y).statistic, stats.kendalltau(x, y).statistic
        assert _same(spearman(x, y), float(theirs_s)), (x, y)
        assert _same(kendall(x, y), float(theirs_k)), (x, y)
        checked += not math.isnan(theirs_s)
    assert checked > 200  # most cases are defined: the comparison is not of nan with nan


def test_rank_correlations_by_hand() -> None:
    # one swapped pair of four: rho = 1 - 6 * 2 / (4 * 15) = 0.8; tau = (5 - 1) / 6
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert kendall([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # a tie in x: ranks (1.5, 1.5, 3) against (1, 2, 3): 1.5 / sqrt(1.5 * 2); tau-b 2 / sqrt(2 * 3)
    assert list(ranks([5, 5, 7])) == [1.5, 1.5, 3.0]
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(1.5 / math.sqrt(3.0))
    assert kendall([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0) and kendall([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # undefined: a constant variable, a single pair, a non-finite value
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3])) and math.isnan(kendall([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1], [2])) and math.isnan(kendall([1], [2]))
    assert math.isnan(spearman([1, float("nan")], [1, 2]))
    with pytest.raises(ValueError, match="one length"):
        spearman([1, 2], [1, 2, 3])


def test_spearman_brown_by_hand() -> None:
    assert spearman_brown(0.5) == pytest.approx(2 / 3)  # 2 * 0.5 / 1.5
    assert spearman_brown(0.5, factor=3) == pytest.approx(0.75)  # 1.5 / 2
    assert spearman_brown(0.0) == 0.0 and spearman_brown(1.0) == pytest.approx(1.0)
    assert spearman_brown(-0.5) == pytest.approx(-2.0)  # below -1/(k-1) = -1 it is undefined, not here
    assert math.isnan(spearman_brown(-1.0)) and math.isnan(spearman_brown(float("nan")))


def test_bootstrap_interval_matches_scipys_percentile_bootstrap() -> None:
    """Resampling seed positions with replacement, scipy's percentile bootstrap draws the same
    resamples from the same generator: the intervals agree exactly."""
    data = np.random.default_rng(3).normal(size=7)

    def mean_of(sample: np.ndarray) -> float:
        return float(data[np.asarray(sample).astype(int)].mean())

    ours = bootstrap_interval(mean_of, 7, resamples=999, rng=np.random.default_rng(11))
    theirs = stats.bootstrap((np.arange(7),), mean_of, vectorized=False, n_resamples=999, method="percentile",
                             rng=np.random.default_rng(11), confidence_level=0.95).confidence_interval
    assert (ours.low, ours.high) == (pytest.approx(theirs.low), pytest.approx(theirs.high))
    assert ours.used == ours.resamples == 999 and ours.low < data.mean() < ours.high


def test_bootstrap_interval_by_hand() -> None:
    constant = bootstrap_interval(lambda sample: 0.25, 5, resamples=50)
    assert (constant.low, constant.high, constant.used) == (0.25, 0.25, 50)
    # a statistic undefined on every resample (one policy): no interval, and it says so
    empty = bootstrap_interval(lambda sample: float("nan"), 5, resamples=50)
    assert math.isnan(empty.low) and empty.used == 0 and empty.to_dict()["low"] is None
    # undefined on the resamples that repeat one seed only: those are left out and counted
    two = bootstrap_interval(lambda sample: 1.0 if len(set(sample.tolist())) > 1 else float("nan"), 2,
                             resamples=400, rng=np.random.default_rng(1))
    assert 150 < two.used < 250 and two.low == two.high == 1.0  # half of the draws of 2 seeds differ
    # the same generator seed, the same interval
    assert bootstrap_interval(lambda s: float(s.sum()), 6, rng=np.random.default_rng(5)) == \
        bootstrap_interval(lambda s: float(s.sum()), 6, rng=np.random.default_rng(5))
    with pytest.raises(ValueError):
        bootstrap_interval(lambda s: 0.0, 0)


def test_halves_are_every_split_or_a_draw() -> None:
    assert halves(1) == []
    assert halves(2) == [((0,), (1,))]
    assert halves(3) == [((0,), (1, 2)), ((1,), (0, 2)), ((2,), (0, 1))]
    four = halves(4)
    assert len(four) == 3 and {frozenset(a) for a, _ in four} == {frozenset({0, 1}), frozenset({0, 2}), frozenset({0, 3})}
    many = halves(20, max_splits=50, rng=np.random.default_rng(0))  # C(20, 10) / 2 = 92,378 splits: drawn
    assert len(many) == 50 and all(len(a) == len(b) == 10 and not set(a) & set(b) for a, b in many)


def test_split_half_by_hand() -> None:
    # two seeds, one split: the rankings (1, 2, 3) and (2, 1, 3) agree at rho 0.5, 2/3 corrected
    result = split_half([[1, 2], [2, 1], [3, 3]])
    assert result.splits == 1 and result.raw == pytest.approx(0.5) and result.corrected == pytest.approx(2 / 3)
    # three seeds: the mean over the three splits of one seed against the other two
    table = np.array([[1.0, 2.0, 3.0], [2.0, 1.0, 1.0], [3.0, 3.0, 2.0]])
    expected = []
    for first, second in [((0,), (1, 2)), ((1,), (0, 2)), ((2,), (0, 1))]:
        r = stats.spearmanr(table[:, first].mean(axis=1), table[:, second].mean(axis=1)).statistic
        expected.append(2 * r / (1 + r))
    assert split_half(table).corrected == pytest.approx(np.mean(expected))
    # a ranking that holds on every seed is perfectly reliable; one seed says nothing
    assert split_half([[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]]).corrected == pytest.approx(1.0)
    assert math.isnan(split_half([[1], [2]]).corrected) and split_half([[1], [2]]).splits == 0
