"""The built-in rewards that judge a move: a node's score against its parent's, registered by name.

`beats_parent` (the default) pays a move that raised the score, `gain_sign` also charges one that lowered
it, `improvement` pays the raise itself. An invalid node gets `config.invalid`; without a valid parent
score (a root, or the child of an invalid node) there is nothing to judge against: 0.0. The history of
earlier scores is not used. They are pure: no state, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from arts.rewards.base import RewardConfig, register
from arts.rewards.base import valid_score as _valid


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
