"""Group-relative advantages (GRPO): each action's reward against the other actions of its group.

The N actions of one group were sampled from the same state, so subtracting the group mean removes what
the state alone explains. A group whose rewards are all equal carries no signal: its advantages are all
zero and training skips it (`is_degenerate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def is_degenerate(rewards: Sequence[float]) -> bool:
    """True when the group carries no learning signal: fewer than two rewards, or all equal."""
    return len(rewards) < 2 or max(rewards) == min(rewards)


def group_advantages(rewards: Sequence[float], eps: float = 1e-6) -> list[float]:
    """(r - mean) / (std + eps) within the group, std over the group (ddof=0); they sum to zero.

    A degenerate group (see `is_degenerate`) gives all zeros.
    """
    if any(not math.isfinite(r) for r in rewards):
        raise ValueError(f"rewards must be finite, got {list(rewards)}; check the reward function")
    if is_degenerate(rewards):
        return [0.0] * len(rewards)
    r = np.asarray(rewards, dtype=float)
    return ((r - r.mean()) / (r.std() + eps)).tolist()
