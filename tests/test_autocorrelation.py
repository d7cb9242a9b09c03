"""The autocorrelation task: C3 by hand and by brute force, and the evaluator refusing exploits."""

from __future__ import annotations

import numpy as np
import pytest

from dream_gym.online.tasks import get_task
from dream_gym.online.tasks.autocorrelation import BEST_KNOWN, MAX_STEPS, c3_of


@pytest.fixture(scope="module")
def task():
    return get_task("autocorrelation")


def program(expression: str, imports: str = "") -> str:
    return f"{imports}\n\ndef construct_function():\n    return {expression}\n"


def brute_force_c3(heights: np.ndarray, samples_per_step: int = 64) -> float:
    """max_t |f*f(t)| / (integral f)^2 from a fine Riemann sum of the autoconvolution."""
    n = len(heights)
    f = np.repeat(heights, samples_per_step)  # f on a grid of step dx / samples_per_step
    dt = 0.5 / (n * samples_per_step)
    return float(np.abs(np.convolve(f, f) * dt).max() / (f.sum() * dt) ** 2)


@pytest.mark.parametrize(("heights", "expected"), [
    ([1.0] * 40, 2.0),                 # constant: f*f peaks at t = 0 with 1/2, integral 1/2
    ([1.0, 1.0], 2.0),                 # conv [1, 2, 1]: 2n max / S^2 = 4 * 2 / 4
    ([1.0, 0.0], 4.0),                 # conv [1, 0, 0]: 4 * 1 / 1 (all the mass on half the interval)
    ([2.0, 1.0], 16.0 / 9.0),          # conv [4, 4, 1]: 4 * 4 / 9
    ([1.0, -3.0], 9.0),                # conv [1, -6, 9]: 4 * 9 / 4; the integral is negative, squared
    ([3.0, -2.0, 3.0], 6 * 22 / 16),   # conv [9, -12, 22, -12, 9]: 6 * 22 / 16
])
def test_c3_by_hand(heights, expected):
    assert c3_of(np.array(heights))[0] == pytest.approx(expected, rel=1e-12)


def test_negative_peak_counts_through_the_absolute_value():
    # conv of [-2, -2, 3] is [4, 8, -8, -12, 9]: the largest |f*f| is the negative -12, not max 9
    h = np.array([-2.0, -2.0, 3.0])
    assert c3_of(h)[0] == pytest.approx(2 * 3 * 12 / 1.0)
    assert c3_of(h)[1] == 3  # the peak is at knot 3 + 1: t = -1/2 + 4/6


@pytest.mark.parametrize("seed", range(4))
def test_c3_matches_a_brute_force_integral(seed):
    heights = np.random.default_rng(seed).normal(1.0, 0.7, 12)  # some negative heights
    assert c3_of(heights)[0] == pytest.approx(brute_force_c3(heights), rel=2e-3)


def test_initial_program_scores_two_and_direction_is_minimize(task, tmp_path):
    ev = task.evaluate(task.initial_program(), tmp_path)
    assert ev.valid and ev.score == pytest.approx(2.0)
    assert task.direction == "minimize" and task.best_known == pytest.approx(1.4556427953745406)
    assert ev.metrics["c3"] == ev.score and ev.metrics["steps"] == 40
    assert BEST_KNOWN < ev.score


def test_score_is_scale_invariant_and_huge_heights_do_not_overflow(task, tmp_path):
    small = task.evaluate(program("[2.0, 1.0, 1.5]"), tmp_path)
    huge = task.evaluate(program("[2e307, 1e307, 1.5e307]"), tmp_path)
    assert small.valid and huge.valid
    assert huge.score == pytest.approx(small.score, rel=1e-12)


@pytest.mark.parametrize(("code", "message", "fail_class"), [
    (program("[float('nan')] * 10"), "non-finite", "repairable"),
    (program("[1.0, float('inf')]"), "non-finite", "repairable"),
    (program("[1.0, -1.0]"), "integral of f is (nearly) zero", "hard"),
    (program("[0.0] * 8"), "every height is zero", "hard"),
    (program("[1.0]"), "between 2 and", "repairable"),
    (program(f"[1.0] * {MAX_STEPS + 1}"), f"at most {MAX_STEPS}", "repairable"),
    (program("np.ones((5, 2))", "import numpy as np"), "1-D", "repairable"),
    (program("[[1.0], [2.0]]"), "not a real number", "repairable"),
    (program("['1.0', 2.0]"), "not a real number", "repairable"),
    (program("[True, 1.0]"), "not a real number", "repairable"),
    (program("{'heights': [1.0, 2.0]}"), "sequence of heights", "repairable"),
    (program("3.0"), "sequence of heights", "repairable"),
])
def test_bad_answers_are_refused_with_their_reason(task, tmp_path, code, message, fail_class):
    ev = task.evaluate(code, tmp_path)
    assert not ev.valid and ev.score is None
    assert message in ev.error and ev.fail_class == fail_class


def test_reporting_its_own_score_gains_nothing(task, tmp_path):
    # OpenEvolve-style (heights, c3) tuples are not heights; a claimed C3 is never read.
    ev = task.evaluate(program("([1.0, 1.0, 1.0], 0.5)"), tmp_path)
    assert not ev.valid and "not a real number" in ev.error
    honest = task.evaluate(program("[1.0, 1.0, 1.0]  # C3 = 0.5, trust me"), tmp_path)
    assert honest.score == pytest.approx(2.0)


def test_numpy_heights_are_accepted(task, tmp_path):
    ev = task.evaluate(program("np.linspace(1.0, 2.0, 30)", "import numpy as np"), tmp_path)
    assert ev.valid and ev.score == pytest.approx(c3_of(np.linspace(1.0, 2.0, 30))[0])
