"""The built-in rewards that judge a score against the history of scores before its group, registered by
name (those that judge it against its parent are in `rewards.parent`).

All share the `RewardFn` signature and the same rules: an invalid node (score `None` or non-finite) gets
`config.invalid`; `None` and non-finite entries of the history are dropped (the history is meant to hold
valid scores only); an empty history gives a valid score `config.empty_history`. They are pure: no state,
no I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from arts.rewards.base import RewardConfig, RewardFn, register
from arts.rewards.base import valid_score as _valid


def _clean(history: Sequence[float]) -> np.ndarray:
    return np.array([h for h in history if _valid(h)], dtype=float)


def _against_history(name: str) -> Callable[[Callable[[float, np.ndarray, RewardConfig], float]], RewardFn]:
    """Register a reward that judges a valid score against a non-empty cleaned history, under the shared
    rules (the module docstring): the wrapped function sees only that case."""

    def deco(judge: Callable[[float, np.ndarray, RewardConfig], float]) -> RewardFn:
        @functools.wraps(judge)
        def fn(score, history, *, parent_score=None, config: RewardConfig) -> float:
            if not _valid(score):
                return config.invalid
            hist = _clean(history)
            return config.empty_history if hist.size == 0 else judge(score, hist, config)

        return register(name)(fn)

    return deco


@_against_history("percentile")
def percentile(score: float, hist: np.ndarray, config: RewardConfig) -> float:
    """1.0 when the score reaches the q-th quantile of the history, else 0.0.

    The threshold is `np.percentile(history, 100 q, method="linear")` (numpy's default: interpolate
    between the two nearest order statistics); a score equal to it reaches it. As the search improves
    the threshold rises, so a score rewarded early is unrewarded later and rewards do not saturate.
    """
    threshold = float(np.percentile(hist, 100.0 * config.q, method="linear"))
    return 1.0 if score >= threshold else 0.0


@_against_history("best_only")
def best_only(score: float, hist: np.ndarray, config: RewardConfig) -> float:
    """1.0 only for a new best: strictly above every score in the history (a tie is not new)."""
    return 1.0 if score > hist.max() else 0.0


@_against_history("raw")
def raw(score: float, hist: np.ndarray, config: RewardConfig) -> float:
    """The score min-max normalised over the history plus this score, in [0, 1].

    A new best gets 1.0 and a new worst 0.0. When the score equals every history score (zero range) it
    ties the best, so it gets 1.0, as `percentile` rewards a tie at its threshold.
    """
    lo, hi = min(hist.min(), score), max(hist.max(), score)
    return 1.0 if hi == lo else float((score - lo) / (hi - lo))


@_against_history("rank")
def rank(score: float, hist: np.ndarray, config: RewardConfig) -> float:
    """The fraction of the history strictly below the score, in [0, 1] (ties do not count)."""
    return float(np.mean(hist < score))
