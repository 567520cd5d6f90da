"""scripts/best_at.py: the best score at equal evaluations, empty past what a run has spent."""

from __future__ import annotations

from tests.doubles import load_script


def load():
    return load_script("best_at")


def test_the_best_so_far_at_each_mark_and_none_past_the_runs_end():
    points = [(0, 0.0, 1.0), (1, 5.0, 1.0), (2, 9.0, 2.5), (2, 9.5, 2.5), (4, 20.0, 3.0), (6, 30.0, 3.0)]
    assert load().best_at(points, [1, 2, 3, 4, 6, 7]) == [1.0, 2.5, 2.5, 3.0, 3.0, None]
    assert load().best_at([(0, 0.0, None), (1, 1.0, None)], [1]) == [None]  # nothing measured yet
