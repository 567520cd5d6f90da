"""The benchmark's statistics against values worked out by hand (search/bench/metrics.py)."""

from __future__ import annotations

import math

import pytest

from arts.search.bench.metrics import (
    iqm,
    iqm_ci,
    iqm_difference_ci,
    normalised_score,
    optimality_gap,
    optimality_gap_ci,
)


def test_normalised_score_puts_the_seed_at_0_and_the_reference_at_1_in_both_directions():
    assert normalised_score(2.0, seed=1.0, reference=3.0) == pytest.approx(0.5)  # maximise
    assert normalised_score(4.0, seed=10.0, reference=2.0) == pytest.approx(0.75)  # minimise: lower is better
    assert normalised_score(12.0, seed=10.0, reference=2.0) == pytest.approx(-0.25)  # worse than the seed
    assert normalised_score(4.0, seed=1.0, reference=3.0) == pytest.approx(1.5)  # beyond the best known


def test_a_run_without_score_or_a_task_without_progress_scores_0():
    assert normalised_score(None, seed=1.0, reference=3.0) == 0.0
    assert normalised_score(1.0, seed=1.0, reference=1.0) == 0.0


def test_iqm_averages_the_middle_half_of_all_runs_of_all_tasks():
    assert iqm([1, 2, 3, 4, 5, 6, 7, 8]) == pytest.approx(4.5)  # (3 + 4 + 5 + 6) / 4
    assert iqm([[1, 2, 3, 4], [5, 6, 7, 8]]) == pytest.approx(4.5)  # runs x tasks pooled
    assert iqm([1, 2, 3, 100]) == pytest.approx(2.5)  # the outlier is cut
    assert math.isnan(iqm([]))


def test_optimality_gap_credits_nothing_above_1():
    assert optimality_gap([0.5, 1.2, 0.8]) == pytest.approx(1 - (0.5 + 1.0 + 0.8) / 3)
    assert optimality_gap([1.0, 3.0]) == 0.0


def test_bootstrap_interval_of_two_runs_spans_their_resample_means():
    # resamples of [0, 1]: {0,0} 1/4, {0,1} 1/2, {1,1} 1/4 -> 2.5% and 97.5% quantiles 0 and 1
    ci = iqm_ci([[0.0, 1.0]], seed=0)
    assert (ci.point, ci.lo, ci.hi) == (0.5, 0.0, 1.0)


def test_bootstrap_resamples_within_each_task_and_holds_a_single_run_fixed():
    # task A [0, 1] resamples to sums 0, 1, 2; task B's one run (5) stays: means 5/3, 2, 7/3
    ci = iqm_ci([[0.0, 1.0], [5.0]], seed=0)
    assert ci.point == pytest.approx(2.0)
    assert ci.lo == pytest.approx(5 / 3) and ci.hi == pytest.approx(7 / 3)
    assert iqm_ci([[1.0], [2.0], [3.0]]) == iqm_ci([[2.0], [1.0], [3.0]])
    assert iqm_ci([[1.0], [2.0], [3.0]]).lo == 2.0  # nothing varies: the interval is the point


def test_bootstrap_is_reproducible_on_a_fixed_seed():
    strata = [[0.1, 0.4, 0.35, 0.8, 0.9], [0.2, 0.25, 0.7, 0.5, 0.3]]
    a, b = iqm_ci(strata, seed=7), iqm_ci(strata, seed=7)
    assert a == b and a.lo < a.point < a.hi


def test_optimality_gap_interval():
    # [0.5, 1.5] counts as [0.5, 1]: gaps of the resamples 0.5, 0.25, 0
    ci = optimality_gap_ci([[0.5, 1.5]])
    assert (ci.point, ci.lo, ci.hi) == (0.25, 0.0, 0.5)


def test_difference_of_iqms_between_two_methods():
    ci = iqm_difference_ci([[1.0, 1.0]], [[0.0, 0.0]])
    assert (ci.point, ci.lo, ci.hi) == (1.0, 1.0, 1.0)
    ci = iqm_difference_ci([[0.0, 1.0], [1.0]], [[0.0, 0.0], [1.0]])
    # method a: (sum of the resample of [0, 1] + 1) / 3 in {1/3, 2/3, 1}; method b is 1/3 throughout
    assert ci.point == pytest.approx(1 / 3) and ci.lo == pytest.approx(0.0) and ci.hi == pytest.approx(2 / 3)
    assert math.isnan(iqm_difference_ci([[1.0]], []).point)
