"""Score an online bin-packing heuristic by its excess bins over the L1 lower bound on Weibull instances.

Trust boundary: the item sequences are drawn here, from fixed seeds. The packing loop runs in a child
process (`python evaluate.py --child`) in a scratch directory holding only `solution.py` and this file;
it calls the candidate's `priority()` once per item and returns the bin chosen for every item as JSON on
a stdout channel that the candidate's prints cannot reach. This parent never imports the candidate: it
checks that the assignment covers every item and overfills no bin, and counts the bins itself.
Not prevented here: a child that packs its items by some other rule than `priority()` (say, an offline
algorithm); its packing is still checked as feasible, but it is not an online heuristic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np

from arts.tasks import protocol

CAPACITY = 100
N_ITEMS = 5000
SEEDS = (0, 1, 2, 3, 4)  # the grader keeps its own, different seeds
CHILD_TIMEOUT_S = 50  # under the task's 60 s, so a hung candidate still gets a clear result.json
EDITABLE = "solution.py"


def make_instance(seed: int) -> np.ndarray:
    """N_ITEMS item sizes: 45 * Weibull(shape 3), rounded and clipped to [1, CAPACITY]."""
    rng = np.random.default_rng(seed)
    return np.clip(np.round(45 * rng.weibull(3.0, N_ITEMS)), 1, CAPACITY).astype(np.int64)


def pack_online(priority: Callable[[int, np.ndarray], np.ndarray], items: np.ndarray) -> list[int]:
    """Put each item, in order, into the option that `priority` scores highest; return each item's bin."""
    remaining = np.empty(len(items), dtype=np.int64)  # capacity left in each opened bin
    n_open = 0
    chosen = []
    for item in items.tolist():
        fits = np.flatnonzero(remaining[:n_open] >= item)
        options = np.append(remaining[fits], CAPACITY)  # a copy: the candidate cannot alter the state
        scores = np.asarray(priority(item, options), dtype=float)
        if scores.shape != options.shape or not np.isfinite(scores).all():
            raise ValueError(f"priority() must return {len(options)} finite scores, got {scores!r:.80}")
        k = int(np.argmax(scores))
        if k == len(fits):
            remaining[n_open] = CAPACITY
            n_open += 1
            b = n_open - 1
        else:
            b = int(fits[k])
        remaining[b] -= item
        chosen.append(b)
    return chosen


def count_bins(items: np.ndarray, assignment: object) -> tuple[int | None, str]:
    """Bins used by a feasible assignment of items to bins, or (None, why it is infeasible)."""
    a = np.asarray(assignment)
    if a.shape != items.shape or a.dtype.kind != "i" or (a < 0).any():
        return (
            None,
            f"expected one non-negative integer bin index per item ({len(items)}), got {a.shape} {a.dtype}",
        )
    loads = np.bincount(a, weights=items)
    if (loads > CAPACITY).any():
        b = int(np.argmax(loads))
        return None, f"bin {b} holds {loads[b]:.0f} > capacity {CAPACITY}"
    return int((loads > 0).sum()), ""


def score(seeds: tuple[int, ...] = SEEDS) -> tuple[float | None, str, dict]:
    """Pack the instances drawn from `seeds`: (mean % excess bins or None, message, metrics)."""
    instances = [make_instance(s) for s in seeds]
    payload = json.dumps([x.tolist() for x in instances]).encode()
    payload, why = protocol.run_child(__file__, EDITABLE, payload, timeout_s=CHILD_TIMEOUT_S)
    if payload is None:
        return None, why, {}
    try:
        assignments = json.loads(payload)
        if not isinstance(assignments, list) or len(assignments) != len(instances):
            raise ValueError(f"expected {len(instances)} assignments")
    except ValueError as e:
        return None, f"the packing loop returned unreadable output: {e}", {}
    bins, bounds = [], []
    for seed, items, assignment in zip(seeds, instances, assignments, strict=True):
        n, why = count_bins(items, assignment)
        if n is None:
            return None, f"instance {seed}: {why}", {}
        bins.append(n)
        bounds.append(math.ceil(items.sum() / CAPACITY))
    excess = float(np.mean([100 * (n - lb) / lb for n, lb in zip(bins, bounds, strict=True)]))
    metrics = {"excess_bins_pct": excess, "bins": bins, "lower_bounds": bounds}
    return (
        excess,
        f"{sum(bins)} bins for {len(seeds)} instances; {excess:.3f}% above the lower bound",
        metrics,
    )


def child(payload: bytes) -> bytes:
    instances = json.loads(payload)
    from solution import priority

    return json.dumps([pack_online(priority, np.asarray(x, dtype=np.int64)) for x in instances]).encode()


if __name__ == "__main__":
    protocol.main(score, child)
