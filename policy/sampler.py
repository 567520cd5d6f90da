"""The external sampler of verbalized sampling.

The scientist states K candidates with probabilities; this module, not the model, draws the actions. A
model asked to pick from its own list tends to pick the first, so the draw happens here, seeded and
recorded. Past a tree depth the scientist is asked for tail candidates (each stated below a threshold)
and the draw is restricted to those; if none qualifies, the whole list is used and the record says so.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict


class Draw(BaseModel):
    """One drawn action with the context needed to store and train on it."""

    model_config = ConfigDict(extra="forbid")
    index: int
    """Position of the drawn candidate in the scientist's list."""
    probability: float
    """Its normalised stated probability (over the whole list)."""
    tail: bool
    """Whether the draw was restricted to tail candidates."""


def normalise(probs: Sequence[float]) -> list[float]:
    """Stated probabilities made into a distribution; non-finite or negative values count as 0, and an
    all-zero list becomes uniform (a model may state nonsense; the draw must still happen)."""
    clean = [p if math.isfinite(p) and p > 0 else 0.0 for p in probs]
    total = sum(clean)
    if total <= 0:
        return [1.0 / len(probs)] * len(probs) if probs else []
    return [p / total for p in clean]


def draw(
    probs: Sequence[float],
    n: int,
    rng: random.Random,
    *,
    tail_threshold: float | None = None,
    replace: bool = False,
    stated: Sequence[float] | None = None,
) -> list[Draw]:
    """Draw n candidate indices in proportion to the stated probabilities.

    Without replacement while candidates last (a group of distinct experiments), then with replacement.
    With `tail_threshold`, only candidates whose normalised probability is below it are eligible: the
    probabilities `stated` when given (the scientist's own, where `probs` are them tilted by what an
    adapter learned: the tail is the scientist's, and a move the adapter favours is drawn more often within
    it, not pushed out of it), else `probs`.
    """
    p = normalise(probs)
    if not p or n <= 0:
        return []
    eligible = list(range(len(p)))
    tail = False
    if tail_threshold is not None:
        q = normalise(stated) if stated is not None and len(stated) == len(p) else p
        low = [i for i in eligible if q[i] < tail_threshold]
        if low:
            eligible, tail = low, True
    out: list[Draw] = []
    pool = list(eligible)
    for _ in range(n):
        if not pool:
            pool = list(eligible)
        weights = [p[i] if p[i] > 0 else 1e-9 for i in pool]
        i = rng.choices(pool, weights=weights)[0]
        out.append(Draw(index=i, probability=p[i], tail=tail))
        if not replace:
            pool.remove(i)
    return out
