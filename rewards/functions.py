"""The built-in reward functions, registered by name.

All share the `RewardFn` signature and the same rules: an invalid node (score `None` or non-finite) gets
`config.invalid`; `None` and non-finite entries of the history are dropped (the history is meant to hold
valid scores only); an empty history gives a valid score `config.empty_history` (except `beats_parent`
and `improvement`, which compare with the parent, not the history). They are pure: no state, no I/O.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from arts.rewards.base import RewardConfig, RewardFn, register


def _valid(score: float | None) -> bool:
    return score is not None and math.isfinite(score)


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


@register("improvement")
def improvement(
    score: float | None,
    history: Sequence[float],
    *,
    parent_score: float | None = None,
    config: RewardConfig,
) -> float:
    """`score - parent_score`, clipped to [-clip, clip] when `config.clip` is set.

    0.0 when there is no valid parent score (a root, or the child of an invalid node): nothing to
    improve on. The history is not used. The value is in score units, so set `clip` for scores of
    unbounded scale.
    """
    if not _valid(score):
        return config.invalid
    if not _valid(parent_score):
        return 0.0
    delta = float(score - parent_score)
    if config.clip is not None:
        delta = min(max(delta, -config.clip), config.clip)
    return delta


@register("beats_parent")
def beats_parent(
    score: float | None,
    history: Sequence[float],
    *,
    parent_score: float | None = None,
    config: RewardConfig,
) -> float:
    """1.0 when the score is strictly above its parent's, else 0.0: did the move pay?

    The default. It judges what the action chose, the move, apart from where it was made: under a
    history bar (`percentile`) a move that changes nothing off a good parent keeps the parent's score and
    is rewarded, and a move that pays off a weak parent is not. A tie (a move that changed no score) is
    not a gain. 0.0 when there is no valid parent score (a root, or the child of an invalid node).
    """
    if not _valid(score):
        return config.invalid
    return 1.0 if _valid(parent_score) and score > parent_score else 0.0


@register("gain_sign")
def gain_sign(
    score: float | None,
    history: Sequence[float],
    *,
    parent_score: float | None = None,
    config: RewardConfig,
) -> float:
    """1.0 above the parent's score, -1.0 below it, 0.0 for a tie: did the move pay, or hurt?

    `beats_parent` with the harm counted: a round whose moves all failed to pay still carries a signal
    when some of them made things worse than others (on the probes, `increase TOL` lowered the score 20
    times in 20 and `beats_parent` gave no signal in 35 of 40 rounds, this reward in 5 of 40). 0.0 when
    there is no valid parent score; an invalid node gets `config.invalid`.
    """
    if not _valid(score):
        return config.invalid
    if not _valid(parent_score):
        return 0.0
    return 1.0 if score > parent_score else -1.0 if score < parent_score else 0.0
