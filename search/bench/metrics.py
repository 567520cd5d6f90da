"""The benchmark's statistics: normalised scores, interquartile mean, optimality gap, and their bootstrap
confidence intervals, as rliable (Agarwal et al., 2021) defines them.

A score matrix is given as strata: one list of run scores per task. The IQM pools every run of every task
and averages the middle 50% (`scipy.stats.trim_mean` with 25% cut from each end, as rliable does); the
optimality gap is how far the runs fall short of 1 on average, crediting nothing above 1. Intervals come
from a stratified percentile bootstrap: runs are resampled within each task, never across tasks, so every
resample keeps the benchmark's task mix. The generator is seeded, so a report is reproducible.

Reimplemented, not imported: rliable itself is not a dependency (it pins `arch` and pulls in seaborn
and absl for plotting); these few lines follow its definitions (`aggregate_iqm`, `aggregate_optimality_gap`,
`StratifiedBootstrap` with percentile intervals) on scipy and numpy.

Not done here: choosing the normaliser of a task (`report`), or tests of significance beyond intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import bootstrap, trim_mean

Strata = Sequence[Sequence[float]]
"""Run scores grouped by task: strata[t] holds the runs of task t."""


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval (lo == hi == point when nothing can vary)."""

    point: float
    lo: float
    hi: float

    def fmt(self, digits: int = 3) -> str:
        if math.isnan(self.point):
            return "-"
        return f"{self.point:.{digits}f} [{self.lo:.{digits}f}, {self.hi:.{digits}f}]"


def normalised_score(score: float | None, seed: float, reference: float) -> float:
    """Where `score` lies between the seed program (0) and the reference (1): best known or best seen.

    The same formula serves both directions, since the reference is the better end either way (lower when
    minimising). A task where the reference equals the seed shows no progress to measure: 0. A run with
    no score counts as no better than the seed.
    """
    if score is None or (isinstance(score, float) and math.isnan(score)):
        return 0.0
    if reference == seed:
        return 0.0
    return (score - seed) / (reference - seed)


def iqm(scores: np.ndarray | Sequence[float]) -> float:
    """Interquartile mean over all given scores (flattened), rliable's `aggregate_iqm`."""
    flat = np.asarray(scores, dtype=float).ravel()
    return float(trim_mean(flat, proportiontocut=0.25)) if flat.size else math.nan


def optimality_gap(scores: np.ndarray | Sequence[float], gamma: float = 1.0) -> float:
    """How far scores fall short of `gamma` on average; scores above gamma count as gamma (rliable)."""
    flat = np.asarray(scores, dtype=float).ravel()
    return float(gamma - np.mean(np.minimum(flat, gamma))) if flat.size else math.nan


def _iqm_last(parts: list[np.ndarray]) -> np.ndarray:
    return trim_mean(np.concatenate(parts, axis=-1), proportiontocut=0.25, axis=-1)


def _gap_last(parts: list[np.ndarray]) -> np.ndarray:
    return 1.0 - np.mean(np.minimum(np.concatenate(parts, axis=-1), 1.0), axis=-1)


def bootstrap_ci(
    strata: Strata,
    statistic: Callable[[list[np.ndarray]], np.ndarray],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """`statistic` on the strata with a stratified percentile bootstrap interval.

    `statistic` takes one array per stratum, each with the runs on its last axis (and any batch axes in
    front), and reduces over the last axis. A stratum of one run resamples to itself, so it is held fixed
    (scipy's bootstrap needs two observations per sample); with no stratum of two or more, the interval is
    the point.
    """
    arrays = [np.asarray(s, dtype=float) for s in strata if len(s)]
    if not arrays:
        return Interval(math.nan, math.nan, math.nan)
    point = float(statistic(arrays))
    varying = [i for i, a in enumerate(arrays) if a.size >= 2]
    if not varying:
        return Interval(point, point, point)

    def stat(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        batch = samples[0].shape[:-1]
        drawn = dict(zip(varying, samples))
        parts = [
            drawn[i] if i in drawn else np.broadcast_to(a, (*batch, a.size)) for i, a in enumerate(arrays)
        ]
        return statistic(parts)

    res = bootstrap(
        tuple(arrays[i] for i in varying),
        stat,
        n_resamples=n_resamples,
        vectorized=True,
        axis=-1,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    lo, hi = res.confidence_interval
    return Interval(point, float(lo), float(hi))


def iqm_ci(strata: Strata, **kw) -> Interval:
    """The IQM over runs x tasks with its stratified bootstrap interval."""
    return bootstrap_ci(strata, _iqm_last, **kw)


def optimality_gap_ci(strata: Strata, **kw) -> Interval:
    """The optimality gap (gamma = 1) over runs x tasks with its stratified bootstrap interval."""
    return bootstrap_ci(strata, _gap_last, **kw)


def mean_ci(strata: Strata, **kw) -> Interval:
    """The mean over runs x tasks with its stratified bootstrap interval (e.g. the credit check's concordance,
    where every run's value already pools many pairs and trimming would drop runs)."""
    return bootstrap_ci(strata, lambda parts: np.mean(np.concatenate(parts, axis=-1), axis=-1), **kw)


def iqm_difference_ci(a: Strata, b: Strata, **kw) -> Interval:
    """IQM(a) - IQM(b), each over its own runs x tasks, with a bootstrap interval that resamples both
    methods' runs independently within each task (their runs are separate experiments)."""
    a = [s for s in a if len(s)]
    b = [s for s in b if len(s)]
    if not a or not b:
        return Interval(math.nan, math.nan, math.nan)
    n = len(a)
    return bootstrap_ci([*a, *b], lambda parts: _iqm_last(parts[:n]) - _iqm_last(parts[n:]), **kw)
